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
//
// The positions are a short list while the watcher is in few sets (an
// Envoy's 20 names: one slice, scanned), a map once it is in more than
// fewSets.
type watcherRec struct {
	w    Watcher
	few  []setPos
	many map[*watcherSet]int32
	// owed: w was owed a fresh copy of a do_not_cache revision (fields.go)
	// since its record was made; only then does its Unwatch look for it.
	owed bool
}

// setPos is a watcher's position in one set.
type setPos struct {
	s *watcherSet
	i int32
}

// fewSets is where a record's positions move from a list to a map.
const fewSets = 32

func newWatcherRec(w Watcher, n int) *watcherRec {
	r := &watcherRec{w: w}
	if n > fewSets {
		r.many = make(map[*watcherSet]int32, n)
	} else {
		r.few = make([]setPos, 0, n)
	}
	return r
}

// pos returns the watcher's position in s.
func (r *watcherRec) pos(s *watcherSet) (int32, bool) {
	if r.many != nil {
		i, ok := r.many[s]
		return i, ok
	}
	for _, p := range r.few {
		if p.s == s {
			return p.i, true
		}
	}
	return 0, false
}

// setPos records the watcher's position in s.
func (r *watcherRec) setPos(s *watcherSet, i int32) {
	if r.many != nil {
		r.many[s] = i
		return
	}
	for j := range r.few {
		if r.few[j].s == s {
			r.few[j].i = i
			return
		}
	}
	if len(r.few) < fewSets {
		r.few = append(r.few, setPos{s: s, i: i})
		return
	}
	r.many = make(map[*watcherSet]int32, 2*fewSets)
	for _, p := range r.few {
		r.many[p.s] = p.i
	}
	r.many[s] = i
	r.few = nil
}

// forget drops the watcher's position in s.
func (r *watcherRec) forget(s *watcherSet) {
	if r.many != nil {
		delete(r.many, s)
		return
	}
	for j := range r.few {
		if r.few[j].s == s {
			last := len(r.few) - 1
			r.few[j] = r.few[last]
			r.few[last] = setPos{}
			r.few = r.few[:last]
			return
		}
	}
}

// sets is how many sets the watcher is in.
func (r *watcherRec) sets() int {
	if r.many != nil {
		return len(r.many)
	}
	return len(r.few)
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
	_, ok := r.pos(s)
	return ok
}

func (s *watcherSet) add(r *watcherRec) {
	r.setPos(s, int32(len(s.list)))
	s.list = append(s.list, r.w)
	s.recs = append(s.recs, r)
}

// remove swaps r's watcher with the last one and shortens the list.
func (s *watcherSet) remove(r *watcherRec) {
	i, ok := r.pos(s)
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
	moved.setPos(s, i)
	s.list[last], s.recs[last] = nil, nil
	s.list, s.recs = s.list[:last], s.recs[:last]
	r.forget(s)
}

// watcherRecLocked returns w's record, making it (sized for n keys) when
// w watches nothing yet.
func (c *Cache) watcherRecLocked(w Watcher, n int) *watcherRec {
	r := c.recs[w]
	if r == nil {
		r = newWatcherRec(w, n)
		c.recs[w] = r
	}
	return r
}

// dropRecLocked forgets r once its watcher watches nothing.
func (c *Cache) dropRecLocked(r *watcherRec) {
	if r != nil && r.sets() == 0 {
		delete(c.recs, r.w)
	}
}
