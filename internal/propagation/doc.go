// Package propagation is the propagation ledger: for each origin change,
// when it arrived and, over every client stream it was sent to, how many
// ACKed it (and how fast), NACKed it (with the reasons), were sent a
// newer state first, ended, or are still pending; and, for one client,
// why its version of a resource is not the newest (Reason).
//
// It is pure bookkeeping, importing nothing of the project's but
// internal/xdstype: internal/cache starts a record per Apply that brings
// new revisions (Ledger.Begin, Change.Describe, Ledger.Add) and points
// each of those revisions to it (cache.Resource.Change), internal/downstream
// settles records from what each client answers (a Tracker per stream and
// type), internal/admin serves the pages, and internal/relay runs the log
// loop (Run) and names the page the log points to (Options.PagePath).
// The ledger is on by default (config propagation.enabled).
//
// Words, as this package uses them:
//   - change: one origin change, one cache Apply that brought new
//     revisions; its record is a Change.
//   - pending (with a stream): sent in a response the client has not
//     answered yet; a Tracker holds a stream's pending changes of one type.
//   - settle: decide how a pending change ended for a stream: ACKed,
//     NACKed, superseded (sent a newer state of all of it before the
//     client answered), gone (the stream ended) or dropped (the client
//     left more than MaxPending unanswered).
//   - converged: the fan-out is over and no stream is pending (StateConverged,
//     or StateNacked when some NACKed).
//   - listed: among the RecentChanges latest of its authority; a change
//     that leaves the listing is retired (it still settles).
//   - reason: why a client's version of a resource differs from the
//     newest the relay holds (Reason), or InSync.
package propagation
