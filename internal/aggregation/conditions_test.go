package aggregation

import (
	"errors"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/structpb"
)

// matchRule compiles one rule "r" (match written in YAML) that groups by
// the literal "hit" and reports whether req matches it. The match is
// checked on the node KeepNode keeps too: both must agree.
func matchRule(t *testing.T, match string, req Request) bool {
	t.Helper()
	rules := compileYAML(t, "rules:\n- name: r\n  match: "+match+"\n  result: {authority: a, group: [{literal: hit}]}\n")
	_, err := rules.Match(req)
	if err != nil && !errors.Is(err, ErrNoMatch) {
		t.Fatalf("Match: %v", err)
	}
	kept := req
	kept.Node = rules.KeepNode(req.Node)
	_, keptErr := rules.Match(kept)
	if (err == nil) != (keptErr == nil) {
		t.Errorf("matching the kept node %v gives %v, the node %v", kept.Node, keptErr, err)
	}
	return err == nil
}

func nodeWith(t *testing.T, id, cluster string, md map[string]any) *corev3.Node {
	t.Helper()
	return testNode(t, id, cluster, nil, md)
}

func TestNegativeAndSeveralMatchers(t *testing.T) {
	eds := resourcev3.EndpointType
	tests := []struct {
		name  string
		match string
		node  *corev3.Node
		want  bool
	}{
		{"not exact, other value", `{node: {cluster: {not: {exact: canary}}}}`, nodeWith(t, "1", "stable", nil), true},
		{"not exact, that value", `{node: {cluster: {not: {exact: canary}}}}`, nodeWith(t, "1", "canary", nil), false},
		{"not regex is anchored inside", `{node: {id: {not: {regex: "sidecar.*"}}}}`, nodeWith(t, "my-sidecar-1", "c", nil), true},
		{"not not", `{node: {id: {not: {not: {prefix: a}}}}}`, nodeWith(t, "ab", "c", nil), true},
		{"all of: every one holds", `{node: {cluster: {all_of: [{prefix: pay}, {not: {exact: payments-canary}}, {regex: ".*-prod"}]}}}`, nodeWith(t, "1", "payments-prod", nil), true},
		{"all of: one fails", `{node: {cluster: {all_of: [{prefix: pay}, {not: {exact: payments-prod}}]}}}`, nodeWith(t, "1", "payments-prod", nil), false},
		{"not on metadata value", `{node: {metadata: [{path: track, value: {not: {exact: canary}}}]}}`, nodeWith(t, "1", "c", map[string]any{"track": "stable"}), true},
		{"not on metadata value: absent path still does not match", `{node: {metadata: [{path: track, value: {not: {exact: canary}}}]}}`, nodeWith(t, "1", "c", map[string]any{}), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := matchRule(t, tt.match, Request{TypeURL: eds, Name: "x", Node: tt.node})
			if got != tt.want {
				t.Errorf("match = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestTypedMetadataConditions(t *testing.T) {
	eds := resourcev3.EndpointType
	md := map[string]any{
		"flag":     true,
		"text":     "true",
		"n":        3.0,
		"nothing":  nil,
		"list":     []any{"a"},
		"envoy.io": map[string]any{"track": "canary"},
		"team":     map[string]any{"name": "payments"},
	}
	tests := []struct {
		name  string
		match string
		node  *corev3.Node
		want  bool
	}{
		{"value sees bool true as true", `{node: {metadata: [{path: flag, value: {exact: "true"}}]}}`, nodeWith(t, "1", "c", md), true},
		{"string does not see the bool true", `{node: {metadata: [{path: flag, string: {exact: "true"}}]}}`, nodeWith(t, "1", "c", md), false},
		{"string sees the string true", `{node: {metadata: [{path: text, string: {exact: "true"}}]}}`, nodeWith(t, "1", "c", md), true},
		{"bool true matches the bool", `{node: {metadata: [{path: flag, bool: true}]}}`, nodeWith(t, "1", "c", md), true},
		{"bool true does not match the string true", `{node: {metadata: [{path: text, bool: true}]}}`, nodeWith(t, "1", "c", md), false},
		{"bool false does not match the bool true", `{node: {metadata: [{path: flag, bool: false}]}}`, nodeWith(t, "1", "c", md), false},
		{"string does not see a number", `{node: {metadata: [{path: n, string: {regex: ".*"}}]}}`, nodeWith(t, "1", "c", md), false},
		{"present: null", `{node: {metadata: [{path: nothing, present: true}]}}`, nodeWith(t, "1", "c", md), true},
		{"present: list", `{node: {metadata: [{path: list, present: true}]}}`, nodeWith(t, "1", "c", md), true},
		{"present: struct", `{node: {metadata: [{path: team, present: true}]}}`, nodeWith(t, "1", "c", md), true},
		{"present false: absent", `{node: {metadata: [{path: gone, present: false}]}}`, nodeWith(t, "1", "c", md), true},
		{"present false: there", `{node: {metadata: [{path: n, present: false}]}}`, nodeWith(t, "1", "c", md), false},
		{"present through a non-struct is absent", `{node: {metadata: [{path: n.x, present: true}]}}`, nodeWith(t, "1", "c", md), false},
		{"keys with a dot", `{node: {metadata: [{keys: [envoy.io, track], string: {exact: canary}}]}}`, nodeWith(t, "1", "c", md), true},
		{"dotted path is not a key with a dot", `{node: {metadata: [{path: envoy.io.track, value: {exact: canary}}]}}`, nodeWith(t, "1", "c", md), false},
		{"has metadata, empty", `{node: {has_metadata: true}}`, nodeWith(t, "1", "c", map[string]any{}), true},
		{"has metadata false, none", `{node: {has_metadata: false}}`, nodeWith(t, "1", "c", nil), true},
		{"has metadata false, some", `{node: {has_metadata: false}}`, nodeWith(t, "1", "c", md), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := matchRule(t, tt.match, Request{TypeURL: eds, Name: "x", Node: tt.node})
			if got != tt.want {
				t.Errorf("match = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestKeepNodeTypedAndPresence(t *testing.T) {
	rules := compileYAML(t, `rules:
- name: r
  match: {node: {has_metadata: true, metadata: [{path: big, present: true}, {keys: [a.b], bool: true}]}}
  result: {authority: a, group: [{literal: x}]}`)
	n := nodeWith(t, "1", "c", map[string]any{"big": map[string]any{"k": "v"}, "a.b": true, "other": "dropped"})
	got := rules.KeepNode(n)
	want := &corev3.Node{Id: "1", Cluster: "c", Metadata: &structpb.Struct{Fields: map[string]*structpb.Value{
		"big": structpb.NewNullValue(),
		"a.b": structpb.NewBoolValue(true),
	}}}
	if diff := cmp.Diff(want, got, protocmp.Transform()); diff != "" {
		t.Errorf("KeepNode (-want +got):\n%s", diff)
	}
	// A present test of a path whose longer path another rule reads keeps
	// the longer path's value (not a null over it).
	nested := compileYAML(t, `rules:
- name: r
  match: {node: {metadata: [{keys: [a, b], present: true}, {keys: [a], present: true}]}}
  result: {authority: a, group: [{literal: x}]}`)
	gotNested := nested.KeepNode(nodeWith(t, "1", "c", map[string]any{"a": map[string]any{"b": 0.0, "c": "dropped"}}))
	wantNested := &corev3.Node{Id: "1", Cluster: "c", Metadata: mustStruct(t, map[string]any{"a": map[string]any{"b": 0.0}})}
	if diff := cmp.Diff(wantNested, gotNested, protocmp.Transform()); diff != "" {
		t.Errorf("KeepNode of nested present paths (-want +got):\n%s", diff)
	}
	empty := rules.KeepNode(nodeWith(t, "1", "c", map[string]any{}))
	if empty.GetMetadata() == nil {
		t.Errorf("KeepNode of a node with empty metadata dropped it: has_metadata needs it")
	}
}
