package cache

import (
	"slices"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"

	"github.com/xds-relay/xds-relay/internal/xdstype"
)

// Resources the origin marked cache_control.do_not_cache (a revision's
// wrapper field, fields.go) are never shared from cache with a later
// watcher. Such a revision is dropped as soon as nobody watches it (never
// kept in the LRU, so never restored), never written to the snapshot, and
// a new watcher of it while others watch it is owed a fresh copy
// (oweFreshLocked, entry.waiting): the cache asks the origin again
// (unsubscribe and subscribe the key, as the upstream's liveness probe
// does) and the revision is withheld from that watcher (Lookup's
// KeyLookup.Withheld, decided in the same read: lookup.go) until the
// origin answers (answerOwedLocked).
//
// Those refetches are rate-limited per key. Without a bound, a client
// reconnecting in a loop makes the origin send it once per stream. So the
// cache asks the origin for such a key at most once per
// Options.RefetchInterval (cache.refetch_interval, default 1s):
//
//   - a new watcher while others watch it (oweFreshLocked): if a fetch of
//     it is in flight or delayed, the watcher waits for that one; if the
//     key was fetched less than the interval ago, the refetch is delayed
//     until the interval has passed (the watcher waits for it); otherwise
//     it is refetched at once;
//   - a new watcher after everyone left (the revision was dropped at once,
//     and unsubscribed): the cache remembers, for the interval, when it
//     last fetched the key (recentFetches, at most maxRecentFetches keys),
//     and delays the new subscription until the interval has passed.
//
// Either way the watcher is never sent the cached revision: it waits for
// the origin's next copy, which, if the origin sends it of its own accord
// before the delayed fetch is due, is enough (the fetch is then not
// made). A delayed fetch is made by the cache's timer (expiry.go arms it
// for the earliest TTL or fetch due). Watchers that wait instead of
// causing a fetch are counted in xds_relay_cache_refetches_limited_total;
// the fetches made, in xds_relay_cache_refetches_total.

// maxRecentFetches bounds the dropped do_not_cache keys whose last fetch
// the cache remembers; past it, one is not remembered (and a new watcher
// of it fetches it at once).
const maxRecentFetches = 4096

// delayedFetch is a fetch of a key delayed until due.
type delayedFetch struct {
	due  time.Time
	node *corev3.Node // the node to present if the link must be opened
	// subscribe: the key's subscription (a watcher after everyone left);
	// else a refetch of its cached revision.
	subscribe bool
}

// answerOwedLocked: the origin sent e's resource again (r). The watchers
// owed a fresh copy of it are owed no more; when r is unchanged they are
// told (nobody else is), otherwise the change tells everyone.
func (c *Cache) answerOwedLocked(a *applyRun, e *entry, r *Resource) {
	if len(e.waiting) == 0 {
		return
	}
	if e.state == StatePresent && identical(e.res, r) {
		for w, k := range e.waiting {
			a.owed = append(a.owed, note{w: w, k: k})
		}
	}
	e.waiting = nil
}

// oweFreshLocked: w starts watching k, which reads as e's do_not_cache
// revision. w is owed a copy from the origin: the revision is withheld
// from it (KeyLookup.Withheld) until the origin sends e again, and k is
// asked of the origin again (unsubscribed and subscribed: the upstream has
// the origin forget and resend it), at most once per refetch interval.
// Reports whether w is now owed one.
func (c *Cache) oweFreshLocked(w Watcher, k Key, e *entry, node *corev3.Node, now time.Time) bool {
	if e == nil || !e.res.DoNotCache() {
		return false
	}
	joined := len(e.waiting) > 0 // a fetch for earlier watchers is under way
	if e.waiting == nil {
		e.waiting = make(map[Watcher]Key)
	}
	e.waiting[w] = k
	if r := c.recs[w]; r != nil {
		r.owed = true // its Unwatch looks for what it is owed
	}
	if ke := c.entries[k]; ke != nil && ke.subscribed {
		c.refetchLocked(ke, node, joined, now) // at most one per interval
	}
	return true
}

// forgetOwedLocked: w no longer watches k.
func (c *Cache) forgetOwedLocked(w Watcher, k Key) {
	for _, e := range []*entry{c.entries[k], c.aliases[k]} {
		if e != nil && e.waiting[w] == k {
			delete(e.waiting, w)
		}
	}
}

// subscribeKeyLocked subscribes key e for a new watcher (unless it is
// subscribed or its subscription delayed), or delays the subscription
// when e's do_not_cache revision was fetched less than the refetch
// interval ago.
func (c *Cache) subscribeKeyLocked(e *entry, node *corev3.Node, now time.Time) {
	switch {
	case e.subscribed:
		return
	case e.fetch != nil: // its subscription is delayed: it waits for it
		c.m.refetchesLimited.WithLabelValues(xdstype.Label(e.key.TypeURL)).Inc()
		return
	}
	if last, ok := c.recent.take(e.key, now, c.refetchInterval); ok && !e.collection {
		c.delayFetchLocked(e, delayedFetch{due: last.Add(c.refetchInterval), node: node, subscribe: true})
		return
	}
	e.subscribed, e.lastFetch = true, now
	c.queueLocked(true, e.key, node)
}

// refetchLocked asks the origin for key ke again (unsubscribe and
// subscribe: the upstream has the origin forget and resend it) for a new
// watcher owed a fresh copy, at most once per refetch interval. joined: a
// fetch of the revision the watcher waits for is already in flight or
// delayed; the watcher waits for that one.
func (c *Cache) refetchLocked(ke *entry, node *corev3.Node, joined bool, now time.Time) {
	due := ke.lastFetch.Add(c.refetchInterval)
	switch {
	case joined || ke.fetch != nil:
		c.m.refetchesLimited.WithLabelValues(xdstype.Label(ke.key.TypeURL)).Inc()
	case c.refetchInterval > 0 && now.Before(due):
		c.delayFetchLocked(ke, delayedFetch{due: due, node: node})
	default:
		c.fetchLocked(ke, node, false, now)
	}
}

// fetchLocked asks the origin for key e now: its subscription, or a
// refetch (unsubscribe and subscribe).
func (c *Cache) fetchLocked(e *entry, node *corev3.Node, subscribe bool, now time.Time) {
	c.m.refetches.WithLabelValues(xdstype.Label(e.key.TypeURL)).Inc()
	e.lastFetch = now
	if !subscribe {
		c.queueLocked(false, e.key, nil)
	}
	e.subscribed = true
	c.queueLocked(true, e.key, node)
}

// delayFetchLocked delays a fetch of e until f.due (the timer makes it).
func (c *Cache) delayFetchLocked(e *entry, f delayedFetch) {
	c.m.refetchesLimited.WithLabelValues(xdstype.Label(e.key.TypeURL)).Inc()
	e.fetch = &f
	if c.dueFetches == nil {
		c.dueFetches = make(map[*entry]struct{})
	}
	c.dueFetches[e] = struct{}{}
}

// fetchDueLocked makes the delayed fetches due by now that someone still
// waits for: a subscription whose key is watched, a refetch whose revision
// is still owed to a watcher (the origin did not send it meanwhile).
func (c *Cache) fetchDueLocked(now time.Time) {
	for e := range c.dueFetches {
		f := e.fetch
		if now.Before(f.due) {
			continue
		}
		c.dropFetchLocked(e)
		switch {
		case c.entries[e.key] != e:
		case f.subscribe:
			if !e.subscribed && c.watchers[e.key].size() > 0 {
				c.fetchLocked(e, f.node, true, now)
			}
		default:
			if se := c.servingLocked(e.key, now); e.subscribed && se != nil && len(se.waiting) > 0 {
				c.fetchLocked(e, f.node, false, now)
			}
		}
	}
}

// dropFetchLocked forgets e's delayed fetch.
func (c *Cache) dropFetchLocked(e *entry) {
	if e.fetch != nil {
		e.fetch = nil
		delete(c.dueFetches, e)
	}
}

// nextFetchLocked returns when the earliest delayed fetch is due.
func (c *Cache) nextFetchLocked() (time.Time, bool) {
	var at time.Time
	for e := range c.dueFetches {
		if at.IsZero() || e.fetch.due.Before(at) {
			at = e.fetch.due
		}
	}
	return at, !at.IsZero()
}

// SetRefetchInterval replaces Options.RefetchInterval (a config reload).
func (c *Cache) SetRefetchInterval(d time.Duration) {
	c.mu.Lock()
	c.refetchInterval = d
	c.mu.Unlock()
}

// recentFetches remembers, for the refetch interval, when the cache last
// fetched the do_not_cache keys it dropped: at most maxRecentFetches.
// Guarded by Cache.mu.
type recentFetches struct {
	at    map[Key]time.Time
	order []keyFetched // oldest first; may list keys taken since
}

type keyFetched struct {
	k  Key
	at time.Time
}

// add remembers that k, dropped now, was last fetched at, if that is less
// than interval ago and there is room.
func (r *recentFetches) add(k Key, at, now time.Time, interval time.Duration) {
	if interval <= 0 || at.IsZero() || !now.Before(at.Add(interval)) {
		return
	}
	r.prune(now, interval)
	if len(r.order) >= 2*maxRecentFetches || len(r.at) >= maxRecentFetches {
		return
	}
	if r.at == nil {
		r.at = make(map[Key]time.Time)
	}
	r.at[k] = at
	r.order = append(r.order, keyFetched{k: k, at: at})
}

// take returns when k was last fetched, when less than interval ago, and
// forgets it.
func (r *recentFetches) take(k Key, now time.Time, interval time.Duration) (time.Time, bool) {
	at, ok := r.at[k]
	if !ok {
		return time.Time{}, false
	}
	delete(r.at, k)
	return at, interval > 0 && now.Before(at.Add(interval))
}

// prune forgets the fetches interval ago or older.
func (r *recentFetches) prune(now time.Time, interval time.Duration) {
	i := 0
	for ; i < len(r.order) && !now.Before(r.order[i].at.Add(interval)); i++ {
		if o := r.order[i]; r.at[o.k] == o.at {
			delete(r.at, o.k)
		}
	}
	r.order = slices.Delete(r.order, 0, i)
}
