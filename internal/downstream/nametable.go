package downstream

import (
	"sync"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"

	"github.com/xds-relay/xds-relay/internal/xdsname"
)

// nameTableSize bounds the shared name table: enough for every name a
// large fleet subscribes to, small enough that clients asking for random
// names cannot grow it without bound (names not asked for in a while go
// first).
const nameTableSize = 1 << 16

// nameTable is the table sessions share requested names through: the
// Server's copy of each name, so that thousands of sessions subscribed to
// one name hold one string, not one each (a request's strings are fresh
// copies from the wire); and, for an xdstp name, where it resolved to, so
// that a reconnect storm does not parse and canonicalise every client's
// names again. Safe for concurrent use: lookups share a read lock.
//
// It is bounded by generations: names go into cur; once cur holds half
// the bound, it becomes old (the one before is dropped) and a new cur
// starts. A name found in old moves back into cur. So a name asked for
// within the last two generations is kept, and the table never holds
// more than nameTableSize names.
type nameTable struct {
	mu       sync.RWMutex
	cur, old map[string]*nameInfo // guarded by mu
}

// nameInfo is what the table keeps of one name; never changed once in it
// (a newer resolution is a new nameInfo).
type nameInfo struct {
	name string
	// by is the resolver res was made by, for typeURL; nil: no
	// resolution kept (a legacy name: its rule may read the node; or a
	// name that did not resolve).
	by      *resolverBox
	typeURL string
	res     Resolution
}

// newNameTable returns an empty table.
func newNameTable() *nameTable {
	return &nameTable{cur: make(map[string]*nameInfo)}
}

// get returns what the table keeps of name; nil: nothing.
func (t *nameTable) get(name string) *nameInfo {
	t.mu.RLock()
	ni, inCur := t.cur[name]
	if !inCur {
		ni = t.old[name]
	}
	t.mu.RUnlock()
	if ni != nil && !inCur {
		t.put(ni) // asked for again: kept another generation
	}
	return ni
}

// put keeps ni (replacing what the table held of its name).
func (t *nameTable) put(ni *nameInfo) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.cur[ni.name]; !ok && len(t.cur) >= nameTableSize/2 {
		t.old, t.cur = t.cur, make(map[string]*nameInfo, len(t.cur))
	}
	t.cur[ni.name] = ni
}

// resolveName resolves a requested name with the resolver in use, and
// returns it with the Server's copy of the name: an xdstp name asked
// before (of the same type, since the resolver was last replaced) is
// answered from the table, with no parsing; legacy names are resolved
// every time (their rules may read the node). The resolution of a name
// whose key is its own canonical name holds the shared string too.
func (s *Server) resolveName(typeURL, name string, node *corev3.Node) (string, Resolution, error) {
	box := s.resolverNow.Load()
	if s.names == nil {
		r, err := box.r.Resolve(typeURL, name, node)
		return name, r, err
	}
	ni := s.names.get(name)
	if ni != nil && ni.by == box && ni.typeURL == typeURL {
		return ni.name, ni.res, nil
	}
	if ni != nil {
		name = ni.name
	}
	r, err := box.r.Resolve(typeURL, name, node)
	if err == nil && xdsname.IsXDSTP(name) {
		s.names.put(&nameInfo{name: name, by: box, typeURL: typeURL, res: r})
	} else if ni == nil {
		s.names.put(&nameInfo{name: name})
	}
	return name, r, err
}
