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

func TestRewriteMetadataPartsAndRefusals(t *testing.T) {
	eds := resourcev3.EndpointType
	md := map[string]any{"flag": true, "text": "true", "n": 3.0, "envoy.io": map[string]any{"track": "canary"}}
	tests := []struct {
		name       string
		group      string
		match      string // default: the rule is the default rule
		req        Request
		wantGroup  string
		wantRefuse string // the refusal's reason
	}{
		{
			name:      "rewrite with a group reference",
			group:     `[{literal: "svc="}, {rewrite: {from: node.cluster, regex: "^(.*)-[a-z]+$", replace: "$1"}}]`,
			req:       Request{TypeURL: eds, Name: "x", Node: nodeWith(t, "1", "payments-prod", nil)},
			wantGroup: "svc=payments",
		},
		{
			name:      "rewrite is unanchored and replaces every match",
			group:     `[{literal: "k="}, {rewrite: {from: node.id, regex: "[0-9]", replace: "#"}}]`,
			req:       Request{TypeURL: eds, Name: "x", Node: nodeWith(t, "a1b22", "c", nil)},
			wantGroup: "k=a#b##",
		},
		{
			name:      "rewrite of a value the regex does not match keeps it",
			group:     `[{literal: "k="}, {rewrite: {from: node.cluster, regex: "^(.*)-[a-z]+$", replace: "${1}x"}}]`,
			req:       Request{TypeURL: eds, Name: "x", Node: nodeWith(t, "1", "plain", nil)},
			wantGroup: "k=plain",
		},
		{
			name:      "rewrite of the resource name, named group",
			group:     `[{literal: "team="}, {rewrite: {from: resource_name, regex: "^routes/(?P<team>[^/]+)/.*$", replace: "${team}"}}]`,
			req:       Request{TypeURL: eds, Name: "routes/pay/main", Node: nodeWith(t, "1", "c", nil)},
			wantGroup: "team=pay",
		},
		{
			name:      "rewrite of typed metadata by keys",
			group:     `[{literal: "t="}, {rewrite: {from: node.metadata, keys: [envoy.io, track], type: string, regex: "^can", replace: "CAN"}}]`,
			req:       Request{TypeURL: eds, Name: "x", Node: nodeWith(t, "1", "c", md)},
			wantGroup: "t=CANary",
		},
		{
			name:      "metadata part, bool: the bool true",
			group:     `[{literal: "f="}, {metadata: {keys: [flag], type: bool}}, {literal: "/t="}, {metadata: {keys: [text], type: bool}}]`,
			req:       Request{TypeURL: eds, Name: "x", Node: nodeWith(t, "1", "c", md)},
			wantGroup: "f=true/t=",
		},
		{
			name:      "metadata part, string: the string true",
			group:     `[{literal: "f="}, {metadata: {keys: [flag], type: string}}, {literal: "/t="}, {metadata: {keys: [text], type: string}}, {literal: "/n="}, {metadata: {keys: [n], type: number}}]`,
			req:       Request{TypeURL: eds, Name: "x", Node: nodeWith(t, "1", "c", md)},
			wantGroup: "f=/t=true/n=3",
		},
		{
			name:       "refuse_empty on an empty field",
			group:      `[{literal: "id="}, {node_field: id, refuse_empty: true}]`,
			req:        Request{TypeURL: eds, Name: "x", Node: nodeWith(t, "", "c", nil)},
			wantRefuse: "rules[0].result.group[1] is empty (refuse_empty)",
		},
		{
			name:       "refuse_empty on a rewrite that leaves nothing",
			group:      `[{literal: "id="}, {rewrite: {from: node.id, regex: ".*", replace: ""}, refuse_empty: true}]`,
			req:        Request{TypeURL: eds, Name: "x", Node: nodeWith(t, "abc", "c", nil)},
			wantRefuse: "rules[0].result.group[1] is empty (refuse_empty)",
		},
		{
			name:      "refuse_empty on a value that is there",
			group:     `[{literal: "id="}, {node_field: id, refuse_empty: true}]`,
			req:       Request{TypeURL: eds, Name: "x", Node: nodeWith(t, "abc", "c", nil)},
			wantGroup: "id=abc",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rules := compileYAML(t, "rules:\n- name: r\n  default: true\n  result: {authority: a, group: "+tt.group+"}\n")
			got, err := rules.Match(tt.req)
			var refused *RefusedError
			switch {
			case tt.wantRefuse != "":
				if !errors.As(err, &refused) || !errors.Is(err, ErrRefused) {
					t.Fatalf("Match = %v, %v; want a refusal", got, err)
				}
				if diff := cmp.Diff(&RefusedError{Rule: "r", Reason: tt.wantRefuse}, refused); diff != "" {
					t.Errorf("refusal (-want +got):\n%s", diff)
				}
			case err != nil:
				t.Fatalf("Match: %v", err)
			default:
				if got.Group != tt.wantGroup {
					t.Errorf("group = %q, want %q", got.Group, tt.wantGroup)
				}
			}
		})
	}
}

func TestRefuseResult(t *testing.T) {
	rules := compileYAML(t, `rules:
- name: no-legacy
  match: {node: {cluster: {prefix: legacy-}}}
  result: {refuse: {reason: "served by the old relay"}}
- name: rest
  default: true
  result: {authority: a, group: [{literal: "c="}, {node_field: cluster}]}`)
	tests := []struct {
		name    string
		cluster string
		want    error
	}{
		{"refused", "legacy-pay", &RefusedError{Rule: "no-legacy", Reason: "served by the old relay"}},
		{"served", "pay", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := rules.Match(Request{TypeURL: resourcev3.ClusterType, Node: nodeWith(t, "1", tt.cluster, nil)})
			var got *RefusedError
			errors.As(err, &got)
			if tt.want == nil {
				if err != nil {
					t.Fatalf("Match: %v", err)
				}
				return
			}
			if diff := cmp.Diff(tt.want, error(got)); diff != "" {
				t.Errorf("refusal (-want +got):\n%s", diff)
			}
			if want := `refused by aggregation rule "no-legacy": served by the old relay`; err.Error() != want {
				t.Errorf("error text %q, want %q", err, want)
			}
		})
	}
}

func TestUpstreamNodeFixedMetadataAndRewrite(t *testing.T) {
	tests := []struct {
		name string
		rule string
		node *corev3.Node
		want *corev3.Node
	}{
		{
			name: "fixed metadata keeps its types",
			rule: `{authority: a, group: [{literal: g}], node: {id: relay, metadata: {flag: true, text: "true", n: 3, team: {name: pay}, list: [a, 1]}}}`,
			node: nodeWith(t, "client", "c", nil),
			want: &corev3.Node{Id: "relay", Metadata: mustStruct(t, map[string]any{
				"flag": true, "text": "true", "n": 3.0, "team": map[string]any{"name": "pay"}, "list": []any{"a", 1.0},
			})},
		},
		{
			name: "a rewrite shows its text, as a capture",
			rule: `{authority: a, group: [{literal: "svc="}, {rewrite: {from: node.cluster, regex: "-prod$", replace: ""}}]}`,
			node: nodeWith(t, "client", "payments-prod", nil),
			want: &corev3.Node{Cluster: "payments"},
		},
		{
			name: "a typed metadata part shows its text as a string",
			rule: `{authority: a, group: [{literal: "f="}, {metadata: {keys: [envoy.io], type: bool}}]}`,
			node: nodeWith(t, "client", "c", map[string]any{"envoy.io": true}),
			want: &corev3.Node{Metadata: mustStruct(t, map[string]any{"envoy.io": "true"})},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rules := compileYAML(t, "rules:\n- name: r\n  default: true\n  result: "+tt.rule+"\n")
			got, err := rules.Match(Request{TypeURL: resourcev3.ClusterType, Node: tt.node})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got.Node, protocmp.Transform()); diff != "" {
				t.Errorf("upstream node (-want +got):\n%s", diff)
			}
		})
	}
}

func mustStruct(t *testing.T, m map[string]any) *structpb.Struct {
	t.Helper()
	s, err := structpb.NewStruct(m)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestTemplateRefs(t *testing.T) {
	tests := []struct {
		template string
		want     []string
	}{
		{"$1", []string{"1"}},
		{"${1}x", []string{"1"}},
		{"$1x", []string{"1x"}},
		{"$$1", nil},
		{"a$", nil},
		{"${name}-$2", []string{"name", "2"}},
		{"${bad", nil},
		{"${a-b}", nil},
	}
	for _, tt := range tests {
		t.Run(tt.template, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, templateRefs(tt.template)); diff != "" {
				t.Errorf("templateRefs (-want +got):\n%s", diff)
			}
		})
	}
}
