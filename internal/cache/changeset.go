package cache

import (
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/xds-relay/xds-relay/internal/propagation"
)

// ChangeSet is one origin change (one Apply) as its watchers see it: the
// cache announces it to each watcher as a whole (Notify for each key, then
// Flush with the set), and each watcher that took it (Take) calls Done once
// the response that carries it has been sent, or once it knows none will be.
// When the last watcher is done, the time from the change's arrival at the
// relay is observed in xds_relay_fanout_duration_seconds.
//
// A ChangeSet is shared by every watcher of the change; its methods are
// safe for concurrent use.
type ChangeSet struct {
	seq     uint64              // read-only after newChangeSet; see Seq
	typeURL string              // read-only after newChangeSet
	arrived time.Time           // read-only after newChangeSet
	obs     prometheus.Observer // read-only after newChangeSet; nil: not measured
	// pending counts the watchers that took the set and are not done,
	// plus one for the cache while it announces the set.
	pending atomic.Int64
	// taken: at least one watcher took the set (only then is it measured).
	taken atomic.Bool
	// revisions: when the change brought only new revisions of resources
	// (no removal, heartbeat, expiry or collection answer), each of them,
	// sorted by key name; nil otherwise. Set before the announcement,
	// read-only after.
	revisions []Revision
	// rec: the propagation ledger's record of the change, told when the
	// last watcher is done (nil: none). Set before the announcement.
	rec *propagation.Change
}

// Revision is one resource a change made present with a new revision.
type Revision struct {
	Key Key
	Res *Resource
}

func newChangeSet(typeURL string, arrived time.Time, obs prometheus.Observer) *ChangeSet {
	cs := &ChangeSet{seq: changeSeq.Add(1), typeURL: typeURL, arrived: arrived, obs: obs}
	cs.pending.Store(1) // the cache's own count while it announces the set
	return cs
}

// changeSeq numbers change sets, from 1.
var changeSeq atomic.Uint64

// Seq identifies the set (never 0), so a watcher can tell a repeat of a
// set it took without keeping the set, and what it holds, alive.
func (cs *ChangeSet) Seq() uint64 { return cs.seq }

// Take registers a watcher that will call Done once. Safe on a nil set.
func (cs *ChangeSet) Take() {
	if cs == nil {
		return
	}
	cs.taken.Store(true)
	cs.pending.Add(1)
}

// Done says a watcher that took the set is finished with it. Safe on a nil
// set.
func (cs *ChangeSet) Done() {
	if cs == nil {
		return
	}
	if cs.pending.Add(-1) != 0 {
		return
	}
	if cs.taken.Load() && cs.obs != nil {
		cs.obs.Observe(time.Since(cs.arrived).Seconds())
	}
	cs.rec.Announced(time.Now()) // nil-safe

}

// TypeURL is the type of every key of the change.
func (cs *ChangeSet) TypeURL() string { return cs.typeURL }

// Revisions returns the change's new revisions, sorted by key name, when
// that is all the change is; nil otherwise. The slice must not be changed.
func (cs *ChangeSet) Revisions() []Revision { return cs.revisions }
