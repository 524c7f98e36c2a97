// Package downstream serves xDS clients: every SotW and delta variant, ADS and
// per-type services, and REST-JSON polling. One session per client stream,
// with its own nonces, ACK/NACK state and subscriptions, and one writer that
// only ever sends the newest state.
//
// Words, as this package uses them:
//   - session: one client's gRPC stream (not an upstream connection).
//   - writer: the goroutine that is a session's only caller of Send; its
//     lifecycle (idle, running, rerun; paused while a request is applied or
//     a change announced; closed) is writerState.
//   - round: what one writer pass looks at; a work is one type's part of
//     it, its probes the subscriptions to look up in the cache.
//   - subscribed: a name the client asked for, or a member of one of its
//     collections (wildcard or glob); sent (sentRev) is what it has of a name.
//   - diff: what a type's probes change for the client compared with what
//     it has; each variant's response is built from it.
//   - served: the revision of a key a client is sent when the key's newest
//     is held back from it by a rollout (the NACK breaker, a wave): the
//     last accepted one, or what it has (rollout.go).
//   - kept back: names a gather waits on, left out of a response until
//     they are all answered or the gather window passes (gather.go).
//   - watchEdit: the cache work one request implies (keys to watch and
//     unwatch), done after unlocking; a change is always an origin change.
//   - hold, held, release: only package delivery's (a version or removal
//     held back from clients, and letting it go); this package reads a
//     hold (cache.Rollout.Hold) and never makes one. See the glossary in
//     docs/architecture.md.
package downstream
