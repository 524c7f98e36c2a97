package cache

import (
	"slices"
	"time"
)

// What a snapshot holds, taken from the cache and put back: the API warm
// restart (package snapshot: the format, the file, when it is written)
// uses, and all of the cache it uses.

// SnapshotEntry is one key of a snapshot: what SnapshotEntries collects
// and Restore puts back.
type SnapshotEntry struct {
	Key Key
	// Collection: Key is a collection (glob or Wildcard) the origin had
	// answered; Res is nil.
	Collection bool
	// Res is the resource's current revision (immutable, shared with the
	// cache when collected).
	Res *Resource
	// OriginVersion is the origin's latest version of the resource (what
	// the relay tells the origin it holds).
	OriginVersion string
	// Expires is when the revision's TTL lapses; zero: no TTL.
	Expires time.Time
}

// Generation counts changes to what the cache holds: it moves with every
// Apply, expiry and eviction. Equal generations: nothing to rewrite.
func (c *Cache) Generation() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.gen
}

// SnapshotEntries returns what a snapshot should hold, most valuable
// first: the present resources some client watches (sorted by key), then
// the unwatched ones from the most to the least recently used, then the
// collections the origin has answered (sorted). A revision the origin
// marked do_not_cache is never listed. Only pointers to immutable
// revisions are copied under the lock; encoding happens outside it. gen is
// the Generation the entries are of.
func (c *Cache) SnapshotEntries() (entries []SnapshotEntry, gen uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	entries = make([]SnapshotEntry, 0, len(c.entries))
	var colls []SnapshotEntry
	for _, e := range c.entries {
		switch {
		case e.collection:
			if e.state == StatePresent {
				colls = append(colls, SnapshotEntry{Key: e.key, Collection: true})
			}
		case e.inLRU:
			// below, in LRU order
		case e.visibleState(now) == StatePresent && !e.res.DoNotCache():
			entries = append(entries, snapshotEntryOf(e))
		}
	}
	slices.SortFunc(entries, func(a, b SnapshotEntry) int { return compareKeys(a.Key, b.Key) })
	keys := c.lru.Keys() // oldest first
	for i := len(keys) - 1; i >= 0; i-- {
		e := c.entries[keys[i]]
		if e != nil && !e.collection && e.visibleState(now) == StatePresent && !e.res.DoNotCache() {
			entries = append(entries, snapshotEntryOf(e))
		}
	}
	slices.SortFunc(colls, func(a, b SnapshotEntry) int { return compareKeys(a.Key, b.Key) })
	return append(entries, colls...), c.gen
}

func snapshotEntryOf(e *entry) SnapshotEntry {
	return SnapshotEntry{Key: e.key, Res: e.res, OriginVersion: e.originVersion, Expires: e.expires}
}

// RestoreResult counts what Restore did with a snapshot's entries.
type RestoreResult struct {
	// Resources and Collections restored.
	Resources, Collections int
	// Expired: resources whose TTL had lapsed; not restored.
	Expired int
	// OverBounds: resources (and collections) left out because the
	// unwatched-key bounds (Options.MaxResources, MaxBytes) were full.
	OverBounds int
	// Existing: keys the cache already held; left as they were.
	Existing int
	// Foreign: entries whose name (or resource's name) their link does
	// not own (LinkID.Owns: another authority's xdstp name); not restored.
	Foreign int
}

// Restore puts a decoded snapshot's entries back, before the first Watch.
// Restored keys are present, unwatched and not subscribed upstream: they
// sit in the LRU, so they count against its bounds. Entries are taken in
// their order (SnapshotEntries': the most valuable first) while they fit
// the bounds; from the first resource that does not fit on, none is
// restored, and then no collection either (a collection missing members
// would call them absent). The first entries are the most recently used,
// the last evicted. A resource whose TTL has lapsed is dropped; the rest
// keep their absolute TTL expiry. Nobody is notified: nobody watches yet.
func (c *Cache) Restore(entries []SnapshotEntry) RestoreResult {
	var res RestoreResult
	c.mu.Lock()
	now := c.now()
	room := c.restoreRoomLocked()
	take, colls, full := c.pickResourcesLocked(entries, now, room, &res)
	colls = c.pickCollectionsLocked(colls, full, room, &res)
	// Least valuable first, so the first entries are the newest in the LRU;
	// collections last: evicting one of them drops its unsubscribed members.
	for i := len(take) - 1; i >= 0; i-- {
		c.restoreResourceLocked(take[i], now)
		res.Resources++
	}
	for _, e := range colls {
		ce := c.newEntryLocked(e.Key)
		ce.state = StatePresent
		c.reconcileLocked(ce)
		res.Collections++
	}
	c.gen++
	c.enforceBoundsLocked()
	c.armLocked(now)
	c.mu.Unlock()
	c.flush()
	return res
}

// restoreRoom is the room a restore has left within the cache's bounds:
// keys and bytes, -1 when unbounded.
type restoreRoom struct {
	keys, bytes int64
}

// restoreRoomLocked returns the room the cache has now within its bounds.
func (c *Cache) restoreRoomLocked() *restoreRoom {
	room := &restoreRoom{keys: -1, bytes: -1}
	if c.maxResources >= 0 {
		room.keys = max(int64(c.maxResources-c.lru.Len()), 0)
	}
	if c.maxBytes >= 0 {
		room.bytes = max(c.maxBytes-c.lruBytes, 0)
	}
	return room
}

// fits says whether a key of size bytes fits in the room left, and if so
// takes its room.
func (room *restoreRoom) fits(size int64) bool {
	if (room.keys >= 0 && room.keys < 1) || (room.bytes >= 0 && room.bytes < size) {
		return false
	}
	if room.keys >= 0 {
		room.keys--
	}
	if room.bytes >= 0 {
		room.bytes -= size
	}
	return true
}

// pickResourcesLocked returns the resources of entries to restore, in
// order, and the collections, to pick after them. An entry is skipped
// (counted in res) when its link does not own its name, the cache holds
// its key, it expired, or it does not fit in room; full: one did not fit, so none after it was taken.
func (c *Cache) pickResourcesLocked(entries []SnapshotEntry, now time.Time, room *restoreRoom, res *RestoreResult) (take, colls []SnapshotEntry, full bool) {
	for _, e := range entries {
		switch {
		case !e.Key.Link.Owns(e.Key.Name) || (e.Res != nil && !e.Key.Link.Owns(e.Res.Name)):
			res.Foreign++
		case e.Collection || e.Res == nil:
			colls = append(colls, e)
		case c.entries[e.Key] != nil:
			res.Existing++
		case !e.Expires.IsZero() && !now.Before(e.Expires):
			res.Expired++
		case full || !room.fits(int64(e.Res.Size())):
			full = true
			res.OverBounds++
		default:
			take = append(take, e)
		}
	}
	return take, colls, full
}

// pickCollectionsLocked returns the collections of colls to restore: none
// when a resource did not fit (full) or they do not all fit in room, else
// those whose key the cache does not hold. Those skipped count in res.
func (c *Cache) pickCollectionsLocked(colls []SnapshotEntry, full bool, room *restoreRoom, res *RestoreResult) []SnapshotEntry {
	if full {
		res.OverBounds += len(colls)
		return nil
	}
	var ok []SnapshotEntry
	for _, e := range colls {
		if c.entries[e.Key] != nil {
			res.Existing++
			continue
		}
		if !room.fits(0) {
			res.OverBounds += len(colls)
			return nil
		}
		ok = append(ok, e)
	}
	return ok
}

func (c *Cache) restoreResourceLocked(se SnapshotEntry, now time.Time) {
	e := &entry{key: se.Key, state: StatePending, glob: globOf(se.Key.Name), originVersion: se.OriginVersion}
	c.entries[se.Key] = e
	c.addByTypeLocked(e)
	// At start: its fields are measured here (sized), under the lock.
	c.setPresentLocked(e, sized(se.Res), now)
	c.setExpiresLocked(e, se.Expires) // as it was, not recomputed from arrival
	c.reconcileLocked(e)
}
