package cache

import (
	"container/heap"
	"time"

	"go.uber.org/zap"

	"github.com/xds-relay/xds-relay/internal/xdstype"
)

// TTL expiry. Every present resource with a TTL is in one min-heap by
// expiry time, and one timer per cache is armed for the earliest of them.
// When it fires, every resource whose TTL elapsed becomes absent, as if the
// origin had removed it: its watchers and those of its collections are
// notified (delta clients get it in removed_resources), collection state
// follows, and the timer is re-armed for the next expiry. Apply first
// expires what is due, so a heartbeat or update never races the timer.

// expiryHeap orders entries by expires, earliest first; each entry knows
// its place (entry.heapPos) so a refreshed or removed TTL is O(log n).
// Guarded by Cache.mu.
type expiryHeap []*entry

func (h expiryHeap) Len() int           { return len(h) }
func (h expiryHeap) Less(i, j int) bool { return h[i].expires.Before(h[j].expires) }
func (h expiryHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].heapPos, h[j].heapPos = i+1, j+1
}

func (h *expiryHeap) Push(x any) {
	e := x.(*entry)
	*h = append(*h, e)
	e.heapPos = len(*h)
}

func (h *expiryHeap) Pop() any {
	old := *h
	n := len(old) - 1
	e := old[n]
	old[n] = nil
	e.heapPos = 0
	*h = old[:n]
	return e
}

// setExpiresLocked sets when e lapses (zero: never) and keeps the heap in
// step. Every write of entry.expires goes through here.
func (c *Cache) setExpiresLocked(e *entry, at time.Time) {
	e.expires = at
	inHeap := e.heapPos > 0
	switch {
	case at.IsZero() && inHeap:
		heap.Remove(&c.expiries, e.heapPos-1)
	case at.IsZero():
	case inHeap:
		heap.Fix(&c.expiries, e.heapPos-1)
	default:
		heap.Push(&c.expiries, e)
	}
}

// expireDueLocked makes every resource whose TTL elapsed by now absent,
// recording the changes in a.
func (c *Cache) expireDueLocked(a *applyRun, now time.Time) {
	for len(c.expiries) > 0 {
		e := c.expiries[0]
		if now.Before(e.expires) {
			return
		}
		c.m.expirations.WithLabelValues(xdstype.Label(e.key.TypeURL)).Inc()
		c.lg.Debug("resource expired (TTL elapsed without update or heartbeat)",
			zap.String("type_url", e.key.TypeURL), zap.String("name", e.key.Name))
		lapsed := e.res
		c.endDeferralLocked(nil, e)  // it lapses, deferred or not
		c.removeResourceLocked(a, e) // takes e out of the heap
		if c.entries[e.key] == e {
			e.lapsed = lapsed // a late heartbeat of it brings it back
		}
	}
}

// armLocked makes sure the timer fires no later than the earliest expiry
// or delayed fetch (refetch.go).
// A timer already armed for that time or earlier is kept (firing early is
// harmless: nothing is due, it re-arms), so refreshing TTLs re-arms
// nothing. Nothing is armed once the cache is closed.
func (c *Cache) armLocked(now time.Time) {
	at, ok := c.nextFetchLocked() // refetch.go
	if len(c.expiries) > 0 && (!ok || c.expiries[0].expires.Before(at)) {
		at, ok = c.expiries[0].expires, true
	}
	if c.closed || !ok {
		return
	}
	if c.timerStop != nil && !c.timerAt.After(at) {
		return
	}
	if c.timerStop != nil && c.timerStop() {
		c.timers.Done() // its callback will not run
	}
	c.timerGen++
	gen := c.timerGen
	c.timers.Add(1)
	c.timerAt = at
	c.timerStop = c.afterFunc(max(at.Sub(now), 0), func() { c.onTimer(gen) })
}

// onTimer expires what is due, makes the fetches due, notifies, and re-arms. gen is the arming
// that scheduled it: a timer replaced after it had already fired must not
// forget its successor.
func (c *Cache) onTimer(gen uint64) {
	defer c.timers.Done()
	a := newApplyRun()
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	if gen == c.timerGen {
		c.timerStop = nil
	}
	now := c.now()
	c.expireDueLocked(&a, now)
	c.fetchDueLocked(now)
	c.finishUnlock(&a, now)
}

// Close stops the expiry timer and waits for a firing in progress. The
// cache stays readable and writable; TTLs then lapse only lazily (a lapsed
// resource reads as absent, nobody is notified).
func (c *Cache) Close() {
	c.mu.Lock()
	c.closed = true
	stop := c.timerStop
	c.timerStop = nil
	c.mu.Unlock()
	if stop != nil && stop() {
		c.timers.Done()
	}
	c.timers.Wait()
}

// defaultAfterFunc is time.AfterFunc as Options.AfterFunc.
func defaultAfterFunc(d time.Duration, f func()) func() bool {
	return time.AfterFunc(d, f).Stop
}
