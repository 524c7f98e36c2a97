package aggregation

import (
	"errors"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/types/known/structpb"
)

// FuzzRules checks that no rule set, however malformed, crashes Validate,
// Compile or Match, that Compile accepts exactly what Validate accepts
// (bar authorities), that a key is never empty, and that matching the node
// KeepNode keeps serves or refuses as matching the node does.
func FuzzRules(f *testing.F) {
	f.Add(string(mustRead(f, "testdata/rules.yaml")), "payments-prod", "routes/a/b")
	f.Add("rules:\n- name: a\n  match: {node: {id: {regex: \"(x)?\"}}}\n  result: {authority: a, group: [{literal: k}, {capture: {from: node.id, group: 1}}]}\n", "x", "")
	f.Add("rules:\n- name: a\n  default: true\n  result: {authority: a, group: [{literal: \"=\"}, {node_field: metadata.a.b}]}\n", "", "*")
	f.Add("rules:\n- name: r\n  match: {node: {cluster: {all_of: [{prefix: p}, {not: {exact: px}}]}, has_metadata: true, metadata: [{keys: [deploy, track], string: {regex: \"c.*\"}}, {keys: [a], present: true}]}}\n  result: {refuse: {reason: no}}\n- name: d\n  default: true\n  result: {authority: a, group: [{literal: k}, {rewrite: {from: node.cluster, regex: \"-(.*)\", replace: \"${1}\"}, refuse_empty: true}, {literal: /}, {metadata: {keys: [a, b], type: string}}], node: {metadata: {x: true}}}\n", "p-q", "canary")
	f.Fuzz(func(t *testing.T, src, cluster, name string) {
		var doc struct {
			Rules []Rule `yaml:"rules"`
		}
		if err := yamlDecoder(src).Decode(&doc); err != nil {
			return
		}
		problems := Validate(doc.Rules, []string{"a", "mesh", "canary-origin"})
		r, err := Compile(doc.Rules)
		if err != nil {
			if !errors.Is(err, ErrInvalidRules) {
				t.Fatalf("Compile error %v does not wrap ErrInvalidRules", err)
			}
			if len(problems) == 0 {
				t.Fatalf("Compile failed (%v) but Validate found nothing", err)
			}
			return
		}
		md, _ := structpb.NewStruct(map[string]any{"a": map[string]any{"b": cluster}, "deploy": map[string]any{"track": name}})
		node := &corev3.Node{Id: name, Cluster: cluster, Metadata: md, Locality: &corev3.Locality{Zone: cluster}}
		for _, typ := range []string{resourcev3.ClusterType, resourcev3.EndpointType, resourcev3.RouteType} {
			for _, n := range []*corev3.Node{node, nil} {
				res, err := r.Match(Request{TypeURL: typ, Name: name, Node: n})
				_, keptErr := r.Match(Request{TypeURL: typ, Name: name, Node: r.KeepNode(n)})
				if (err == nil) != (keptErr == nil) {
					t.Fatalf("Match of the kept node: %v; of the node: %v", keptErr, err)
				}
				if err != nil {
					if !errors.Is(err, ErrNoMatch) && !errors.Is(err, ErrRefused) {
						t.Fatalf("Match error %v wraps neither ErrNoMatch nor ErrRefused", err)
					}
					continue
				}
				if res.Group == "" && len(problems) == 0 {
					t.Fatalf("rule %q built an empty key from a valid rule set", res.Rule)
				}
			}
		}
	})
}
