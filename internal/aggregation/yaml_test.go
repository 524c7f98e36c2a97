package aggregation

import (
	"bytes"
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.yaml.in/yaml/v3"
)

func ptr(s string) *string { return &s }

// yamlDecoder decodes strictly, as the config package does.
func yamlDecoder(src string) *yaml.Decoder {
	dec := yaml.NewDecoder(bytes.NewReader([]byte(src)))
	dec.KnownFields(true)
	return dec
}

// decodeRules decodes an aggregation block.
func decodeRules(t testing.TB, data []byte) ([]Rule, error) {
	t.Helper()
	var doc struct {
		Rules []Rule `yaml:"rules"`
	}
	err := yamlDecoder(string(data)).Decode(&doc)
	return doc.Rules, err
}

func mustDecode(t testing.TB, data []byte) []Rule {
	t.Helper()
	rules, err := decodeRules(t, data)
	if err != nil {
		t.Fatalf("decode: %v", err)
	}
	return rules
}

func mustRead(t testing.TB, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func TestDecodeRealisticRules(t *testing.T) {
	data, err := os.ReadFile("testdata/rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	got, err := decodeRules(t, data)
	if err != nil {
		t.Fatalf("decode: %v", err)
	}
	want := []Rule{
		{
			Name: "canary",
			Match: Match{Node: &NodeMatch{Metadata: []MetadataMatch{
				{Path: "deploy.track", Value: &StringMatcher{Exact: ptr("canary")}},
			}}},
			Result: Target{
				Authority: "canary-origin",
				Group:     []GroupPart{{Literal: ptr("canary/")}, {NodeField: ptr("cluster")}},
				Node:      &UpstreamNode{ID: "relay-canary", Cluster: "canary"},
			},
		},
		{
			Name: "eds-cds-per-cluster",
			Match: Match{
				TypeURLs: []string{
					"type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment",
					"type.googleapis.com/envoy.config.cluster.v3.Cluster",
				},
				Node: &NodeMatch{Cluster: &StringMatcher{Regex: ptr("(?P<svc>[a-z-]+)-(prod|staging)")}},
			},
			Result: Target{Authority: "mesh", Group: []GroupPart{
				{Literal: ptr("svc=")},
				{Capture: &Capture{From: "node.cluster", Group: "svc"}},
				{Literal: ptr("/env=")},
				{Capture: &Capture{From: "node.cluster", Group: "2"}},
				{Literal: ptr("/zone=")},
				{NodeField: ptr("locality.zone")},
			}},
		},
		{
			Name: "team-routes",
			Match: Match{
				TypeURLs:     []string{"type.googleapis.com/envoy.config.route.v3.RouteConfiguration"},
				ResourceName: &StringMatcher{Regex: ptr(`routes/(\w+)/.*`)},
			},
			Result: Target{Authority: "mesh", Group: []GroupPart{
				{Literal: ptr("team=")},
				{Capture: &Capture{From: "resource_name", Group: "1"}},
			}},
		},
		{
			Name:    "everything-else",
			Default: true,
			Result: Target{Authority: "mesh", Group: []GroupPart{
				{Literal: ptr("cluster=")},
				{NodeField: ptr("cluster")},
			}},
		},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("decoded rules (-want +got):\n%s", diff)
	}
	if problems := Validate(got, []string{"mesh", "canary-origin"}); len(problems) > 0 {
		t.Errorf("Validate: %v", problems)
	}
}

func TestDecodeRejectsUnknownKeys(t *testing.T) {
	tests := []struct {
		name string
		yaml string
	}{
		{"rule", "rules:\n- name: a\n  priority: 1\n"},
		{"match", "rules:\n- name: a\n  match: {types: [x]}\n"},
		{"node", "rules:\n- name: a\n  match: {node: {zone: {exact: z}}}\n"},
		{"string matcher", "rules:\n- name: a\n  match: {node: {id: {suffix: x}}}\n"},
		{"locality", "rules:\n- name: a\n  match: {node: {locality: {subzone: {exact: z}}}}\n"},
		{"metadata", "rules:\n- name: a\n  match: {node: {metadata: [{key: a, value: {exact: b}}]}}\n"},
		{"result", "rules:\n- name: a\n  result: {authority: m, stream: x}\n"},
		{"group part", "rules:\n- name: a\n  result: {group: [{text: x}]}\n"},
		{"capture", "rules:\n- name: a\n  result: {group: [{capture: {from: resource_name, index: 1}}]}\n"},
		{"upstream node", "rules:\n- name: a\n  result: {node: {id: x, zone: z}}\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := decodeRules(t, []byte(tt.yaml)); err == nil {
				t.Errorf("decode succeeded, want an unknown-field error")
			}
		})
	}
}
