package aggregation

import (
	"slices"
	"sync"
	"sync/atomic"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
)

// Every name a client requests through a rule that sets no node resolves
// to its group's key and upstream node, both functions of the key parts'
// values alone: an Envoy's 20 EDS names, a fleet's thousands of clients of
// one cluster, all the same group. Building them per request made the
// built-in plain-names rule cost one Node and one key string per name
// (200000 of each for a cold sync of 10000 clients of 20 names). So each
// rule remembers the groups it built, read without a lock (the map is
// copied on write), at most maxGroupMemo of them: past that, groups are
// built per request as before (a rule keyed by node id sees one group
// per client, and clients come and go). Nodes are shared read only, as a
// rule's own result.node is (the upstream clones what it presents).

// maxGroupMemo bounds the groups one rule remembers.
const maxGroupMemo = 1024

// groupMemo is one rule's remembered groups, by group key.
type groupMemo struct {
	m  atomic.Pointer[map[string]memoGroup]
	mu sync.Mutex // serializes the copies on write
}

// memoGroup is one group: the values it was built from, its key, its node.
type memoGroup struct {
	vals []string
	key  string
	node *corev3.Node
}

// keyAndNode returns the group key and upstream node of a request whose
// key parts have values vals, for a rule that sets no node.
func (cr *compiledRule) keyAndNode(vals []string) (string, *corev3.Node) {
	var buf [128]byte
	k := cr.appendKey(buf[:0], vals)
	if m := cr.memo.m.Load(); m != nil {
		// Equal values, not only an equal key: parts concatenated may
		// give one key from different values, and different nodes.
		if g, ok := (*m)[string(k)]; ok && slices.Equal(g.vals, vals) {
			return g.key, g.node
		}
	}
	key, node := string(k), cr.groupNode(vals)
	cr.memo.add(memoGroup{vals: slices.Clone(vals), key: key, node: node})
	return key, node
}

// add remembers g, unless the memo is full or has its key already.
func (gm *groupMemo) add(g memoGroup) {
	gm.mu.Lock()
	defer gm.mu.Unlock()
	old := gm.m.Load()
	var n int
	if old != nil {
		if _, ok := (*old)[g.key]; ok {
			return
		}
		n = len(*old)
	}
	if n >= maxGroupMemo {
		return
	}
	m := make(map[string]memoGroup, n+1)
	if old != nil {
		for k, v := range *old {
			m[k] = v
		}
	}
	m[g.key] = g
	gm.m.Store(&m)
}
