package aggregation

import (
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"
)

// The built-in plain-names rule is a valid default rule: after other rules
// it takes what they do not match, every type and name, one group per node
// cluster, shown upstream as only that cluster (the relay's id).
func TestPlainNamesRule(t *testing.T) {
	canary := "canary"
	rules := []Rule{
		{Name: "canary", Match: Match{Node: &NodeMatch{Cluster: &StringMatcher{Exact: &canary}}}, Result: Target{Authority: "a", Group: []GroupPart{{Literal: &canary}}}},
		PlainNamesRule("a"),
	}
	if problems := Validate(rules, []string{"a"}); len(problems) > 0 {
		t.Fatalf("Validate: %v", problems)
	}
	r, err := Compile(rules)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		req  Request
		want Result
	}{
		{"wildcard LDS", Request{TypeURL: resourcev3.ListenerType, Node: testNode(t, "envoy-1", "payments", &corev3.Locality{Zone: "z"}, map[string]any{"k": "v"})},
			Result{Rule: PlainNamesRuleName, Authority: "a", Group: "cluster=payments", Node: &corev3.Node{Cluster: "payments"}}},
		{"EDS by name", Request{TypeURL: resourcev3.EndpointType, Name: "backend", Node: testNode(t, "envoy-2", "payments", nil, nil)},
			Result{Rule: PlainNamesRuleName, Authority: "a", Group: "cluster=payments", Node: &corev3.Node{Cluster: "payments"}}},
		{"no cluster", Request{TypeURL: resourcev3.ClusterType, Node: testNode(t, "envoy-3", "", nil, nil)},
			Result{Rule: PlainNamesRuleName, Authority: "a", Group: "cluster=", Node: &corev3.Node{}}},
		{"an earlier rule wins", Request{TypeURL: resourcev3.ClusterType, Node: testNode(t, "envoy-4", "canary", nil, nil)},
			Result{Rule: "canary", Authority: "a", Group: "canary", Node: &corev3.Node{}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := r.Match(tt.req)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got, protocmp.Transform()); diff != "" {
				t.Errorf("Match (-want +got):\n%s", diff)
			}
		})
	}
}
