package cache

import (
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
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
	arrived time.Time           // read-only after newChangeSet
	obs     prometheus.Observer // read-only after newChangeSet; nil: not measured
	// pending counts the watchers that took the set and are not done,
	// plus one for the cache while it announces the set.
	pending atomic.Int64
	// taken: at least one watcher took the set (only then is it measured).
	taken atomic.Bool
}

func newChangeSet(arrived time.Time, obs prometheus.Observer) *ChangeSet {
	cs := &ChangeSet{arrived: arrived, obs: obs}
	cs.pending.Store(1) // the cache's hold while it announces the set
	return cs
}

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
	if cs.pending.Add(-1) == 0 && cs.taken.Load() && cs.obs != nil {
		cs.obs.Observe(time.Since(cs.arrived).Seconds())
	}
}
