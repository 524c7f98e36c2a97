package aggregation

import (
	"fmt"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"
)

// The requests of one group share its key and upstream node, built once:
// resolving a client's names through the plain-names rule allocates
// nothing once its cluster's group is known.
func TestMatchSharesGroupNode(t *testing.T) {
	r, err := Compile([]Rule{PlainNamesRule("a")})
	if err != nil {
		t.Fatal(err)
	}
	req := func(name, cluster string) Request {
		return Request{TypeURL: resourcev3.EndpointType, Name: name, Node: &corev3.Node{Id: "envoy-" + name, Cluster: cluster}}
	}
	first, err := r.Match(req("cla-1", "payments"))
	if err != nil {
		t.Fatal(err)
	}
	again, _ := r.Match(req("cla-2", "payments"))
	if again.Node != first.Node || again.Group != "cluster=payments" {
		t.Errorf("second request of the group: node %p group %q, want the first's %p %q", again.Node, again.Group, first.Node, first.Group)
	}
	other, _ := r.Match(req("cla-1", "orders"))
	if diff := cmp.Diff(&corev3.Node{Cluster: "orders"}, other.Node, protocmp.Transform()); diff != "" || other.Group != "cluster=orders" {
		t.Errorf("another cluster: group %q, node (-want +got):\n%s", other.Group, diff)
	}
	if diff := cmp.Diff(&corev3.Node{Cluster: "payments"}, first.Node, protocmp.Transform()); diff != "" {
		t.Errorf("first group's node changed (-want +got):\n%s", diff)
	}
	q := req("cla-3", "payments")
	if allocs := testing.AllocsPerRun(100, func() { _, _ = r.Match(q) }); allocs != 0 {
		t.Errorf("Match of a known group: %v allocations, want 0", allocs)
	}
}

// Values holding the literal between them can give one key from different
// values: each still gets the node of its own values.
func TestMatchGroupNodeByValues(t *testing.T) {
	id, cluster, sep := "id", "cluster", "/"
	r, err := Compile([]Rule{{Name: "both", Default: true, Result: Target{Authority: "a",
		Group: []GroupPart{{NodeField: &id}, {Literal: &sep}, {NodeField: &cluster}}}}})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		for _, n := range []*corev3.Node{{Id: "a/b", Cluster: "c"}, {Id: "a", Cluster: "b/c"}} {
			res, err := r.Match(Request{TypeURL: resourcev3.EndpointType, Name: "x", Node: n})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(n, res.Node, protocmp.Transform()); diff != "" || res.Group != "a/b/c" {
				t.Errorf("node %v: group %q, upstream node (-want +got):\n%s", n, res.Group, diff)
			}
		}
	}
}

// Past maxGroupMemo groups, a rule builds the others per request, still
// right.
func TestMatchGroupMemoBounded(t *testing.T) {
	r, err := Compile([]Rule{PlainNamesRule("a")})
	if err != nil {
		t.Fatal(err)
	}
	for i := range maxGroupMemo + 10 {
		c := fmt.Sprintf("c%d", i)
		res, err := r.Match(Request{TypeURL: resourcev3.EndpointType, Name: "x", Node: &corev3.Node{Cluster: c}})
		if err != nil {
			t.Fatal(err)
		}
		if res.Group != "cluster="+c || res.Node.GetCluster() != c {
			t.Fatalf("cluster %s: group %q node cluster %q", c, res.Group, res.Node.GetCluster())
		}
	}
	if n := len(*r.rules[0].memo.m.Load()); n != maxGroupMemo {
		t.Errorf("memo holds %d groups, want at most %d", n, maxGroupMemo)
	}
}
