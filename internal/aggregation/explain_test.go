package aggregation

import (
	"errors"
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"
)

// explainRules refuses the legacy-* clusters, groups by a typed metadata
// bool with a node of its own, keys one group by node.id and serves the
// rest by cluster (the built-in rule's shape).
const explainRules = `rules:
- name: no-legacy
  match: {node: {cluster: {prefix: legacy-}}}
  result: {refuse: {reason: "served by the old relay"}}
- name: mesh-flag
  match: {node: {metadata: [{keys: [istio.io], bool: true}]}}
  result:
    authority: mesh
    group:
      - literal: "mesh/"
      - rewrite: {from: node.cluster, regex: "-(prod|staging)$", replace: ""}
        refuse_empty: true
    node: {metadata: {mesh: true}}
- name: by-id
  match: {node: {cluster: {exact: pinned}}}
  result: {authority: mesh, group: [{literal: "id="}, {node_field: id}]}
- name: by-cluster
  default: true
  result: {authority: mesh, group: [{literal: "cluster="}, {node_field: cluster}]}
`

func TestExplain(t *testing.T) {
	rules := mustDecode(t, []byte(explainRules))
	cds := resourcev3.ClusterType
	meshFlag := map[string]any{"istio.io": true}
	tests := []struct {
		name string
		node *corev3.Node
		want Explanation
	}{
		{
			name: "refused by a rule",
			node: nodeWith(t, "old-1", "legacy-payments", nil),
			want: Explanation{Rule: "no-legacy", Index: 0, Refused: "served by the old relay"},
		},
		{
			name: "refused by an empty refuse_empty part",
			node: nodeWith(t, "e-1", "-prod", meshFlag),
			want: Explanation{Rule: "mesh-flag", Index: 1, Refused: "rules[1].result.group[1] is empty (refuse_empty)"},
		},
		{
			name: "the rule's node, as written",
			node: nodeWith(t, "e-1", "payments-prod", meshFlag),
			want: Explanation{
				Rule: "mesh-flag", Index: 1,
				Result:       Result{Rule: "mesh-flag", Authority: "mesh", Group: "mesh/payments", Node: testNode(t, "", "", nil, map[string]any{"mesh": true})},
				UpstreamNode: testNode(t, "", "", nil, map[string]any{"mesh": true}),
				NodeFromRule: true,
			},
		},
		{
			// The relay's id on a copy: the group's node, which its
			// requests share (groupmemo.go), stays as the key built it.
			name: "a node from the key alone, with the relay's id",
			node: nodeWith(t, "envoy-7", "payments", nil),
			want: Explanation{
				Rule: "by-cluster", Index: 3,
				Result:       Result{Rule: "by-cluster", Authority: "mesh", Group: "cluster=payments", Node: &corev3.Node{Cluster: "payments"}},
				UpstreamNode: &corev3.Node{Id: "relay-1", Cluster: "payments"},
			},
		},
		{
			name: "a key that uses the id keeps it",
			node: nodeWith(t, "envoy-7", "pinned", nil),
			want: Explanation{
				Rule: "by-id", Index: 2,
				Result:       Result{Rule: "by-id", Authority: "mesh", Group: "id=envoy-7", Node: &corev3.Node{Id: "envoy-7"}},
				UpstreamNode: &corev3.Node{Id: "envoy-7"},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Explain(rules, Request{TypeURL: cds, Node: tt.node}, "relay-1")
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got, protocmp.Transform()); diff != "" {
				t.Errorf("Explain (-want +got):\n%s", diff)
			}
		})
	}
}

// TestExplainNoMatchAndInvalidRules: a request no rule matches is an
// Explanation with Index -1; an invalid rule set is the one error.
func TestExplainNoMatchAndInvalidRules(t *testing.T) {
	rules := mustDecode(t, []byte(explainRules))[:3] // no default
	got, err := Explain(rules, Request{TypeURL: resourcev3.EndpointType, Name: "backend", Node: nodeWith(t, "b-1", "backend", nil)}, "relay-1")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(Explanation{Index: -1}, got, protocmp.Transform()); diff != "" {
		t.Errorf("no match (-want +got):\n%s", diff)
	}
	rules[0].Match.Node.Cluster = &StringMatcher{Regex: ptr("front(")}
	if _, err := Explain(rules, Request{TypeURL: resourcev3.EndpointType}, "relay-1"); !errors.Is(err, ErrInvalidRules) || !strings.Contains(err.Error(), "rules[0].match.node.cluster.regex") {
		t.Errorf("invalid rules: err = %v, want ErrInvalidRules naming rules[0].match.node.cluster.regex", err)
	}
}
