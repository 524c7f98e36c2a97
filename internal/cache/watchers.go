package cache

// watcherSet is the watchers of one key: a slice for fan-out, and beside
// it each one's record, which holds its position (for O(1) has and
// remove). Guarded by Cache.mu like every index.
//
// Fan-out hands out the slice itself (share), to be read after the lock is
// released; the next remove copies it first (copy on write), so a fan-out
// costs no copy and no allocation however many watchers a key has. add
// only appends, which never changes what a shared prefix holds.
//
// A key's set keeps no index of its own: the positions live in each
// watcher's record (watcherRec), which a Watch or Unwatch call looks up
// once for all its keys. A new client watching 20 keys of 200 watchers
// each then reads one small table, its own, instead of 20 large ones
// hashed by interface (the reconnect storm's profile: 7% of the relay's
// CPU went to that index).
type watcherSet struct {
	list   []Watcher
	recs   []*watcherRec // recs[i] is list[i]'s record; never handed out
	shared bool          // list was handed out; copy before changing it
}

// watcherRec is one watcher's part of the watcher index: where it stands
// in each set it is in. Made by its first Watch, dropped once it watches
// nothing (Cache.recs).
type watcherRec struct {
	w   Watcher
	pos map[*watcherSet]int32
}

// share returns the current watchers for reading without the lock.
func (s *watcherSet) share() []Watcher {
	s.shared = true
	return s.list
}

func (s *watcherSet) size() int {
	if s == nil {
		return 0
	}
	return len(s.list)
}

// has reports whether r's watcher is in s.
func (s *watcherSet) has(r *watcherRec) bool {
	if s == nil || r == nil {
		return false
	}
	_, ok := r.pos[s]
	return ok
}

func (s *watcherSet) add(r *watcherRec) {
	r.pos[s] = int32(len(s.list))
	s.list = append(s.list, r.w)
	s.recs = append(s.recs, r)
}

// remove swaps r's watcher with the last one and shortens the list.
func (s *watcherSet) remove(r *watcherRec) {
	i, ok := r.pos[s]
	if !ok {
		return
	}
	if s.shared {
		s.list = append(make([]Watcher, 0, cap(s.list)), s.list...)
		s.shared = false
	}
	last := len(s.list) - 1
	moved := s.recs[last]
	s.list[i], s.recs[i] = moved.w, moved
	moved.pos[s] = i
	s.list[last], s.recs[last] = nil, nil
	s.list, s.recs = s.list[:last], s.recs[:last]
	delete(r.pos, s)
}

// watcherRecLocked returns w's record, making it (sized for n keys) when
// w watches nothing yet.
func (c *Cache) watcherRecLocked(w Watcher, n int) *watcherRec {
	r := c.recs[w]
	if r == nil {
		r = &watcherRec{w: w, pos: make(map[*watcherSet]int32, n)}
		c.recs[w] = r
	}
	return r
}

// dropRecLocked forgets r once its watcher watches nothing.
func (c *Cache) dropRecLocked(r *watcherRec) {
	if r != nil && len(r.pos) == 0 {
		delete(c.recs, r.w)
	}
}
