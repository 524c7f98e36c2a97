package downstream

import (
	lru "github.com/hashicorp/golang-lru/v2"
)

// nameTableSize bounds the shared name table: enough for every name a
// large fleet subscribes to, small enough that clients asking for random
// names cannot grow it without bound (the least recently used go first).
const nameTableSize = 1 << 16

// newNameTable returns the table sessions share requested names through.
func newNameTable() *lru.Cache[string, string] {
	c, err := lru.New[string, string](nameTableSize)
	if err != nil {
		panic(err) // only for a size <= 0
	}
	return c
}

// intern returns the Server's copy of name, so that thousands of sessions
// subscribed to one name hold one string, not one each (a request's
// strings are fresh copies from the wire). A name not in the table is
// added and returned as is.
func (s *Server) intern(name string) string {
	if s.names == nil {
		return name
	}
	if v, ok := s.names.Get(name); ok {
		return v
	}
	s.names.Add(name, name)
	return name
}
