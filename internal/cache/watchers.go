package cache

// watcherSet is the watchers of one key: a slice for fan-out and an index
// for O(1) add and remove. Guarded by Cache.mu like every index.
//
// Fan-out hands out the slice itself (share), to be read after the lock is
// released; the next remove copies it first (copy on write), so a fan-out
// costs no copy and no allocation however many watchers a key has. add
// only appends, which never changes what a shared prefix holds.
type watcherSet struct {
	list   []Watcher
	idx    map[Watcher]int // position in list
	shared bool            // list was handed out; copy before changing it
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

func (s *watcherSet) has(w Watcher) bool {
	if s == nil {
		return false
	}
	_, ok := s.idx[w]
	return ok
}

func (s *watcherSet) add(w Watcher) {
	if s.idx == nil {
		s.idx = make(map[Watcher]int)
	}
	s.idx[w] = len(s.list)
	s.list = append(s.list, w)
}

// remove swaps w with the last watcher and shortens the list.
func (s *watcherSet) remove(w Watcher) {
	i, ok := s.idx[w]
	if !ok {
		return
	}
	if s.shared {
		s.list = append(make([]Watcher, 0, cap(s.list)), s.list...)
		s.shared = false
	}
	last := len(s.list) - 1
	moved := s.list[last]
	s.list[i] = moved
	s.idx[moved] = i
	s.list[last] = nil
	s.list = s.list[:last]
	delete(s.idx, w)
}
