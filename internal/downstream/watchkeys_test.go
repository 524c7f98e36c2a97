package downstream

import (
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"github.com/google/go-cmp/cmp"

	"github.com/xds-relay/xds-relay/internal/cache"
)

// watchCalls records what watchKeys asks of the cache.
type watchCalls struct {
	Cache // only Watch is called
	calls []watchCall
}

type watchCall struct {
	node *corev3.Node
	keys []cache.Key
}

func (c *watchCalls) Watch(_ cache.Watcher, node *corev3.Node, keys ...cache.Key) {
	c.calls = append(c.calls, watchCall{node: node, keys: append([]cache.Key(nil), keys...)})
}

// Each key is watched with the node of its stream's rule, none for the
// others (xdstp); a request of one group's names is one Watch.
func TestWatchKeysByStream(t *testing.T) {
	a := cache.LinkID{Authority: "o", Group: "cluster=a"}
	b := cache.LinkID{Authority: "o", Group: "cluster=b"}
	x := cache.LinkID{Authority: "o"}
	na, nb := &corev3.Node{Cluster: "a"}, &corev3.Node{Cluster: "b"}
	key := func(l cache.LinkID, n string) cache.Key { return cache.Key{Link: l, TypeURL: "t", Name: n} }
	for _, tt := range []struct {
		name  string
		keys  []cache.Key
		nodes map[cache.LinkID]*corev3.Node
		want  map[*corev3.Node][]cache.Key
	}{
		{"xdstp only", []cache.Key{key(x, "1"), key(x, "2")}, nil,
			map[*corev3.Node][]cache.Key{nil: {key(x, "1"), key(x, "2")}}},
		{"one group", []cache.Key{key(a, "1"), key(a, "2")}, map[cache.LinkID]*corev3.Node{a: na},
			map[*corev3.Node][]cache.Key{na: {key(a, "1"), key(a, "2")}}},
		{"one group and xdstp", []cache.Key{key(a, "1"), key(x, "2"), key(a, "3")}, map[cache.LinkID]*corev3.Node{a: na},
			map[*corev3.Node][]cache.Key{nil: {key(x, "2")}, na: {key(a, "1"), key(a, "3")}}},
		{"two groups", []cache.Key{key(a, "1"), key(b, "2")}, map[cache.LinkID]*corev3.Node{a: na, b: nb},
			map[*corev3.Node][]cache.Key{na: {key(a, "1")}, nb: {key(b, "2")}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := &watchCalls{}
			watchKeys(c, nil, tt.keys, tt.nodes)
			got := map[*corev3.Node][]cache.Key{}
			for _, call := range c.calls {
				if _, dup := got[call.node]; dup {
					t.Errorf("node %v watched in two calls", call.node)
				}
				got[call.node] = call.keys
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("watched (-want +got):\n%s", diff)
			}
		})
	}
}
