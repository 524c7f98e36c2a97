package aggregation

import (
	"errors"
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/structpb"
)

// testNode builds a Node; md is converted with structpb.NewStruct.
func testNode(t testing.TB, id, cluster string, loc *corev3.Locality, md map[string]any) *corev3.Node {
	t.Helper()
	n := &corev3.Node{Id: id, Cluster: cluster, Locality: loc}
	if md != nil {
		s, err := structpb.NewStruct(md)
		if err != nil {
			t.Fatalf("metadata: %v", err)
		}
		n.Metadata = s
	}
	return n
}

// compileYAML decodes and compiles an aggregation block.
func compileYAML(t testing.TB, src string) *Rules {
	t.Helper()
	var doc struct {
		Rules []Rule `yaml:"rules"`
	}
	dec := yamlDecoder(src)
	if err := dec.Decode(&doc); err != nil {
		t.Fatalf("decode: %v", err)
	}
	r, err := Compile(doc.Rules)
	if err != nil {
		t.Fatalf("compile: %v", err)
	}
	return r
}

func TestMatch(t *testing.T) {
	eds, cds, lds := resourcev3.EndpointType, resourcev3.ClusterType, resourcev3.ListenerType
	zoneA := &corev3.Locality{Region: "eu", Zone: "eu-a", SubZone: "rack1"}

	tests := []struct {
		name    string
		rules   string
		req     Request
		want    Result
		wantErr bool
	}{
		{
			name: "exact cluster",
			rules: `rules:
- name: r
  match: {node: {cluster: {exact: frontend}}}
  result: {authority: mesh, group: [{literal: "c="}, {node_field: cluster}]}`,
			req:  Request{TypeURL: eds, Name: "backend", Node: testNode(t, "f-1", "frontend", nil, nil)},
			want: Result{Rule: "r", Authority: "mesh", Group: "c=frontend"},
		},
		{
			name: "exact cluster does not match another",
			rules: `rules:
- name: r
  match: {node: {cluster: {exact: frontend}}}
  result: {authority: mesh, group: [{literal: all}]}`,
			req:     Request{TypeURL: eds, Name: "backend", Node: testNode(t, "b-1", "frontend-2", nil, nil)},
			wantErr: true,
		},
		{
			name: "prefix id",
			rules: `rules:
- name: r
  match: {node: {id: {prefix: "sidecar~"}}}
  result: {authority: mesh, group: [{literal: sidecars}]}`,
			req:  Request{TypeURL: lds, Node: testNode(t, "sidecar~10.0.0.1", "x", nil, nil)},
			want: Result{Rule: "r", Authority: "mesh", Group: "sidecars"},
		},
		{
			name: "regex is anchored",
			rules: `rules:
- name: r
  match: {node: {cluster: {regex: "front.*"}}}
  result: {authority: mesh, group: [{literal: all}]}`,
			req:     Request{TypeURL: lds, Node: testNode(t, "1", "my-frontend", nil, nil)},
			wantErr: true,
		},
		{
			name: "type url restricts",
			rules: `rules:
- name: eds
  match: {type_urls: [` + eds + `]}
  result: {authority: a, group: [{literal: eds}]}
- name: cds
  match: {type_urls: [` + cds + `]}
  result: {authority: a, group: [{literal: cds}]}`,
			req:  Request{TypeURL: cds, Node: testNode(t, "1", "c", nil, nil)},
			want: Result{Rule: "cds", Authority: "a", Group: "cds"},
		},
		{
			name: "first match wins",
			rules: `rules:
- name: first
  match: {node: {cluster: {prefix: front}}}
  result: {authority: a, group: [{literal: first}]}
- name: second
  match: {node: {cluster: {exact: frontend}}}
  result: {authority: b, group: [{literal: second}]}`,
			req:  Request{TypeURL: eds, Name: "x", Node: testNode(t, "1", "frontend", nil, nil)},
			want: Result{Rule: "first", Authority: "a", Group: "first"},
		},
		{
			name: "later rule when earlier does not match",
			rules: `rules:
- name: first
  match: {node: {cluster: {prefix: back}}}
  result: {authority: a, group: [{literal: first}]}
- name: second
  match: {node: {cluster: {exact: frontend}}}
  result: {authority: b, group: [{literal: second}]}`,
			req:  Request{TypeURL: eds, Name: "x", Node: testNode(t, "1", "frontend", nil, nil)},
			want: Result{Rule: "second", Authority: "b", Group: "second"},
		},
		{
			name: "default rule serves the rest",
			rules: `rules:
- name: first
  match: {node: {cluster: {prefix: back}}}
  result: {authority: a, group: [{literal: first}]}
- name: rest
  default: true
  result: {authority: b, group: [{literal: "c="}, {node_field: cluster}]}`,
			req:  Request{TypeURL: eds, Name: "x", Node: testNode(t, "1", "frontend", nil, nil)},
			want: Result{Rule: "rest", Authority: "b", Group: "c=frontend"},
		},
		{
			name: "no rule matches",
			rules: `rules:
- name: first
  match: {node: {cluster: {prefix: back}}}
  result: {authority: a, group: [{literal: first}]}`,
			req:     Request{TypeURL: eds, Name: "x", Node: testNode(t, "1", "frontend", nil, nil)},
			wantErr: true,
		},
		{
			name: "nil node is empty fields",
			rules: `rules:
- name: r
  match: {node: {cluster: {exact: ""}}}
  result: {authority: a, group: [{literal: "c="}, {node_field: cluster}, {literal: "/z="}, {node_field: locality.zone}]}`,
			req:  Request{TypeURL: eds, Name: "x"},
			want: Result{Rule: "r", Authority: "a", Group: "c=/z="},
		},
		{
			name: "wildcard has name empty",
			rules: `rules:
- name: wildcard
  match: {resource_name: {exact: ""}}
  result: {authority: a, group: [{literal: w}]}
- name: named
  default: true
  result: {authority: a, group: [{literal: n}]}`,
			req:  Request{TypeURL: cds, Node: testNode(t, "1", "c", nil, nil)},
			want: Result{Rule: "wildcard", Authority: "a", Group: "w"},
		},
		{
			name: "locality match and key",
			rules: `rules:
- name: r
  match: {node: {locality: {region: {exact: eu}, zone: {prefix: eu-}, sub_zone: {regex: "rack[0-9]+"}}}}
  result: {authority: a, group: [{node_field: locality.region}, {literal: "/"}, {node_field: locality.zone}, {literal: "/"}, {node_field: locality.sub_zone}]}`,
			req:  Request{TypeURL: eds, Name: "x", Node: testNode(t, "1", "c", zoneA, nil)},
			want: Result{Rule: "r", Authority: "a", Group: "eu/eu-a/rack1"},
		},
		{
			name: "locality mismatch",
			rules: `rules:
- name: r
  match: {node: {locality: {region: {exact: eu}, zone: {exact: eu-b}}}}
  result: {authority: a, group: [{literal: x}]}`,
			req:     Request{TypeURL: eds, Name: "x", Node: testNode(t, "1", "c", zoneA, nil)},
			wantErr: true,
		},
		{
			name: "nested metadata path",
			rules: `rules:
- name: r
  match: {node: {metadata: [{path: team.name, value: {exact: payments}}]}}
  result: {authority: a, group: [{literal: "team="}, {node_field: metadata.team.name}]}`,
			req:  Request{TypeURL: eds, Name: "x", Node: testNode(t, "1", "c", nil, map[string]any{"team": map[string]any{"name": "payments"}})},
			want: Result{Rule: "r", Authority: "a", Group: "team=payments"},
		},
		{
			name: "metadata number and bool are formatted",
			rules: `rules:
- name: r
  match: {node: {metadata: [{path: shard, value: {exact: "3"}}, {path: canary, value: {exact: "true"}}]}}
  result: {authority: a, group: [{literal: "shard="}, {node_field: metadata.shard}, {literal: "/"}, {node_field: metadata.ratio}]}`,
			req:  Request{TypeURL: eds, Name: "x", Node: testNode(t, "1", "c", nil, map[string]any{"shard": 3.0, "canary": true, "ratio": 0.25})},
			want: Result{Rule: "r", Authority: "a", Group: "shard=3/0.25"},
		},
		{
			name: "absent metadata does not match even exact empty",
			rules: `rules:
- name: r
  match: {node: {metadata: [{path: team.name, value: {exact: ""}}]}}
  result: {authority: a, group: [{literal: x}]}`,
			req:     Request{TypeURL: eds, Name: "x", Node: testNode(t, "1", "c", nil, map[string]any{"team": "flat"})},
			wantErr: true,
		},
		{
			name: "metadata struct value does not match",
			rules: `rules:
- name: r
  match: {node: {metadata: [{path: team, value: {prefix: "m"}}]}}
  result: {authority: a, group: [{literal: x}]}`,
			req:     Request{TypeURL: eds, Name: "x", Node: testNode(t, "1", "c", nil, map[string]any{"team": map[string]any{"name": "m"}})},
			wantErr: true,
		},
		{
			name: "absent metadata in key is empty",
			rules: `rules:
- name: r
  match: {node: {cluster: {exact: c}}}
  result: {authority: a, group: [{literal: "t="}, {node_field: metadata.team.name}]}`,
			req:  Request{TypeURL: eds, Name: "x", Node: testNode(t, "1", "c", nil, nil)},
			want: Result{Rule: "r", Authority: "a", Group: "t="},
		},
		{
			name: "numbered and named captures of node cluster",
			rules: `rules:
- name: r
  match: {node: {cluster: {regex: "(?P<svc>[a-z]+)-(prod|staging)"}}}
  result: {authority: a, group: [{capture: {from: node.cluster, group: svc}}, {literal: "@"}, {capture: {from: node.cluster, group: 2}}]}`,
			req:  Request{TypeURL: eds, Name: "x", Node: testNode(t, "1", "payments-prod", nil, nil)},
			want: Result{Rule: "r", Authority: "a", Group: "payments@prod"},
		},
		{
			name: "capture of resource name",
			rules: `rules:
- name: r
  match: {resource_name: {regex: "routes/(\\w+)/.*"}}
  result: {authority: a, group: [{literal: "team="}, {capture: {from: resource_name, group: 1}}]}`,
			req:  Request{TypeURL: resourcev3.RouteType, Name: "routes/payments/v1", Node: testNode(t, "1", "c", nil, nil)},
			want: Result{Rule: "r", Authority: "a", Group: "team=payments"},
		},
		{
			name: "capture of metadata and whole value",
			rules: `rules:
- name: r
  match: {node: {metadata: [{path: env, value: {regex: "(dev|prod)-([0-9]+)"}}]}}
  result: {authority: a, group: [{capture: {from: node.metadata.env, group: 2}}, {literal: ":"}, {capture: {from: node.metadata.env, group: 0}}]}`,
			req:  Request{TypeURL: eds, Name: "x", Node: testNode(t, "1", "c", nil, map[string]any{"env": "prod-42"})},
			want: Result{Rule: "r", Authority: "a", Group: "42:prod-42"},
		},
		{
			name: "optional group that did not take part is empty",
			rules: `rules:
- name: r
  match: {node: {id: {regex: "node(-(\\d+))?"}}}
  result: {authority: a, group: [{literal: "n"}, {capture: {from: node.id, group: 2}}]}`,
			req:  Request{TypeURL: eds, Name: "x", Node: testNode(t, "node", "c", nil, nil)},
			want: Result{Rule: "r", Authority: "a", Group: "n"},
		},
		{
			name: "rule sets upstream node",
			rules: `rules:
- name: r
  match: {type_urls: [` + cds + `]}
  result: {authority: a, group: [{literal: "g"}], node: {id: relay-1, cluster: shared}}`,
			req:  Request{TypeURL: cds, Node: testNode(t, "1", "c", nil, nil)},
			want: Result{Rule: "r", Authority: "a", Group: "g", Node: &corev3.Node{Id: "relay-1", Cluster: "shared"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := compileYAML(t, tt.rules)
			got, err := r.Match(tt.req)
			// What a session keeps of the node matches alike.
			kept := tt.req
			kept.Node = r.KeepNode(tt.req.Node)
			keptGot, keptErr := r.Match(kept)
			if errors.Is(keptErr, ErrNoMatch) != errors.Is(err, ErrNoMatch) || (err == nil && cmp.Diff(got, keptGot, protocmp.Transform()) != "") {
				t.Errorf("Match with KeepNode's node = %+v, %v; with the whole node %+v, %v", keptGot, keptErr, got, err)
			}
			if tt.wantErr {
				if !errors.Is(err, ErrNoMatch) {
					t.Fatalf("Match = %+v, %v; want ErrNoMatch", got, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Match: %v", err)
			}
			if tt.want.Node == nil {
				got.Node = nil // TestGroupNode checks the node a rule without one presents
			}
			if diff := cmp.Diff(tt.want, got, protocmp.Transform()); diff != "" {
				t.Errorf("Match (-want +got):\n%s", diff)
			}
		})
	}
}

// TestGroupNode: a rule without node presents upstream a node built from
// its group key alone, whichever client of the group asks: a client's id,
// metadata and locality outside the key never reach the origin (a forged
// first client cannot speak for its group), and of a field the key only
// captures part of, only that part.
func TestGroupNode(t *testing.T) {
	forged := testNode(t, "forged-id", "frontend-7", &corev3.Locality{Zone: "z1", Region: "r1"},
		map[string]any{"evil": true, "team": map[string]any{"name": "pay", "n": 3}})
	const clusterRegex = `{cluster: {regex: "(?P<svc>[a-z]+)-(?P<n>[0-9]+)"}}`
	md := func(fields map[string]any) *structpb.Struct {
		s, err := structpb.NewStruct(fields)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	for _, tt := range []struct {
		name  string
		match string // the rule's node conditions; "" for a default rule
		group string
		want  *corev3.Node
	}{
		{"literal only", "", `[{literal: "all"}]`, &corev3.Node{}},
		{"by cluster", "", `[{literal: "c="}, {node_field: cluster}]`, &corev3.Node{Cluster: "frontend-7"}},
		{"by id", "", `[{literal: "n="}, {node_field: id}]`, &corev3.Node{Id: "forged-id"}},
		{"by zone", "", `[{literal: "z="}, {node_field: locality.zone}]`, &corev3.Node{Locality: &corev3.Locality{Zone: "z1"}}},
		{"by metadata: shown at its path as the key's text", "", `[{literal: "m="}, {node_field: metadata.team.n}]`,
			&corev3.Node{Metadata: md(map[string]any{"team": map[string]any{"n": "3"}})}},
		{"by metadata bool", "", `[{literal: "m="}, {node_field: metadata.evil}]`,
			&corev3.Node{Metadata: md(map[string]any{"evil": "true"})}},
		{"absent metadata: not shown", "", `[{literal: "m="}, {node_field: metadata.nope}]`, &corev3.Node{}},
		{"capture: the captured text, not the field", clusterRegex, `[{literal: "svc="}, {capture: {from: node.cluster, group: svc}}]`,
			&corev3.Node{Cluster: "frontend"}},
		{"two captures of one field: joined in key order", clusterRegex, `[{literal: "n="}, {capture: {from: node.cluster, group: n}}, {literal: "/svc="}, {capture: {from: node.cluster, group: svc}}]`,
			&corev3.Node{Cluster: "7/frontend"}},
		{"capture group 0: the whole field", clusterRegex, `[{literal: "c="}, {capture: {from: node.cluster, group: 0}}, {literal: "/"}, {capture: {from: node.cluster, group: svc}}]`,
			&corev3.Node{Cluster: "frontend-7"}},
		{"capture of metadata: the captured text at its path", `{metadata: [{path: team.name, value: {regex: "(p)a.*"}}]}`, `[{literal: "t="}, {capture: {from: node.metadata.team.name, group: 1}}]`,
			&corev3.Node{Metadata: md(map[string]any{"team": map[string]any{"name": "p"}})}},
		{"capture of the resource name: not shown", `{cluster: {regex: "frontend-.*"}}
    resource_name: {regex: "(.*)"}`, `[{literal: "r="}, {capture: {from: resource_name, group: 1}}]`, &corev3.Node{}},
		{"several fields", clusterRegex, `[{literal: "svc="}, {capture: {from: node.cluster, group: svc}}, {literal: "/id="}, {node_field: id}, {literal: "/r="}, {node_field: locality.region}, {literal: "/t="}, {node_field: metadata.team.name}]`,
			&corev3.Node{Id: "forged-id", Cluster: "frontend", Locality: &corev3.Locality{Region: "r1"}, Metadata: md(map[string]any{"team": map[string]any{"name": "pay"}})}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rule := "  default: true\n"
			if tt.match != "" {
				rule = "  match:\n    node: " + tt.match + "\n"
			}
			r := compileYAML(t, `rules:
- name: r
`+rule+`  result: {authority: a, group: `+tt.group+`}`)
			got, err := r.Match(Request{TypeURL: resourcev3.ClusterType, Name: "backend", Node: forged})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got.Node, protocmp.Transform()); diff != "" {
				t.Errorf("upstream node (-want +got):\n%s", diff)
			}
		})
	}
}

// TestGroupNodeSameForEveryClient: clients of different full clusters in
// one group are shown upstream as one node, whichever asks.
func TestGroupNodeSameForEveryClient(t *testing.T) {
	r := compileYAML(t, `rules:
- name: env
  match: {node: {cluster: {regex: "(?P<env>[a-z]+)-[0-9]+"}, metadata: [{path: team, value: {prefix: pay}}]}}
  result: {authority: a, group: [{node_field: metadata.team}, {literal: "/"}, {capture: {from: node.cluster, group: env}}, {literal: "_cds"}]}`)
	match := func(id, cluster, team string, zone string) Result {
		t.Helper()
		res, err := r.Match(Request{TypeURL: resourcev3.ClusterType, Node: testNode(t, id, cluster, &corev3.Locality{Zone: zone}, map[string]any{"team": team, "other": id})})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	a, b := match("a", "staging-1", "payments", "z1"), match("b", "staging-2", "payments", "z2")
	if a.Group != "payments/staging_cds" || a.Group != b.Group {
		t.Fatalf("groups %q, %q; want both payments/staging_cds", a.Group, b.Group)
	}
	want := testNode(t, "", "staging", nil, map[string]any{"team": "payments"})
	for _, got := range []*corev3.Node{a.Node, b.Node} {
		if diff := cmp.Diff(want, got, protocmp.Transform()); diff != "" {
			t.Errorf("upstream node (-want +got):\n%s", diff)
		}
	}
}

func TestMatchErrorNamesTypeAndNode(t *testing.T) {
	r := compileYAML(t, `rules:
- name: r
  match: {node: {cluster: {exact: a}}}
  result: {authority: a, group: [{literal: x}]}`)
	_, err := r.Match(Request{TypeURL: resourcev3.EndpointType, Name: "backend", Node: testNode(t, "node-7", "b", nil, nil)})
	if !errors.Is(err, ErrNoMatch) {
		t.Fatalf("err = %v, want ErrNoMatch", err)
	}
	for _, want := range []string{resourcev3.EndpointType, `"backend"`, `"node-7"`, `"b"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}
}

func TestMatchNilRules(t *testing.T) {
	var r *Rules
	if _, err := r.Match(Request{TypeURL: resourcev3.ClusterType}); !errors.Is(err, ErrNoMatch) {
		t.Errorf("err = %v, want ErrNoMatch", err)
	}
}

// TestGroupsNeverMix checks that clients of different clusters get different
// keys and clients of one cluster the same key, through the realistic rules.
func TestGroupsNeverMix(t *testing.T) {
	data := mustRead(t, "testdata/rules.yaml")
	rules, err := decodeRules(t, data)
	if err != nil {
		t.Fatal(err)
	}
	r, err := Compile(rules)
	if err != nil {
		t.Fatal(err)
	}
	loc := &corev3.Locality{Zone: "z1"}
	key := func(id, cluster string) string {
		res, err := r.Match(Request{TypeURL: resourcev3.EndpointType, Name: "backend", Node: testNode(t, id, cluster, loc, nil)})
		if err != nil {
			t.Fatal(err)
		}
		return res.Authority + "|" + res.Group
	}
	if a, b := key("1", "payments-prod"), key("2", "payments-prod"); a != b {
		t.Errorf("same cluster, different keys: %q, %q", a, b)
	}
	if a, b := key("1", "payments-prod"), key("1", "payments-staging"); a == b {
		t.Errorf("different clusters, same key %q", a)
	}
	if a, b := key("1", "payments-prod"), key("1", "orders-prod"); a == b {
		t.Errorf("different clusters, same key %q", a)
	}
}

func BenchmarkMatch(b *testing.B) {
	r, err := Compile(mustDecode(b, mustRead(b, "testdata/rules.yaml")))
	if err != nil {
		b.Fatal(err)
	}
	loc := &corev3.Locality{Region: "eu", Zone: "eu-a"}
	cases := []struct {
		name string
		req  Request
	}{
		{"rule=default", Request{TypeURL: resourcev3.ListenerType, Node: testNode(b, "1", "payments-prod", loc, map[string]any{"deploy": map[string]any{"track": "stable"}})}},
		{"rule=metadata", Request{TypeURL: resourcev3.EndpointType, Name: "backend", Node: testNode(b, "1", "payments-prod", loc, map[string]any{"deploy": map[string]any{"track": "canary"}})}},
		{"rule=captures", Request{TypeURL: resourcev3.EndpointType, Name: "backend", Node: testNode(b, "1", "payments-prod", loc, nil)}},
		{"rule=resource-regex", Request{TypeURL: resourcev3.RouteType, Name: "routes/payments/v1", Node: testNode(b, "1", "x", loc, nil)}},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := r.Match(c.req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestKeepNode: of a client's Node, only id, cluster, locality and the
// metadata values at the paths rules read are kept.
func TestKeepNode(t *testing.T) {
	r := compileYAML(t, `rules:
- name: r
  match: {node: {metadata: [{path: team.name, value: {prefix: "p"}}, {path: env, value: {regex: "(.*)"}}]}}
  result: {authority: a, group: [{literal: g}, {node_field: metadata.shard}, {literal: "/"}, {capture: {from: node.metadata.env, group: 1}}]}`)
	big := strings.Repeat("x", 1<<16)
	loc := &corev3.Locality{Region: "eu", Zone: "eu-a", SubZone: "r1"}
	n := testNode(t, "id-1", "c-1", loc, map[string]any{
		"team":   map[string]any{"name": "payments", "notes": big},
		"shard":  3,
		"env":    map[string]any{"nested": "a struct: no rule reads it whole"},
		"unread": big,
	})
	n.UserAgentName, n.ClientFeatures = "envoy", []string{big}
	want := testNode(t, "id-1", "c-1", loc, map[string]any{"team": map[string]any{"name": "payments"}, "shard": 3})
	if diff := cmp.Diff(want, r.KeepNode(n), protocmp.Transform()); diff != "" {
		t.Errorf("KeepNode (-want +got):\n%s", diff)
	}
	if got := r.KeepNode(nil); got != nil {
		t.Errorf("KeepNode(nil) = %v", got)
	}
	plain := testNode(t, "id-1", "c-1", nil, map[string]any{"unread": big})
	if diff := cmp.Diff(testNode(t, "id-1", "c-1", nil, nil), KeepNodeFields(plain), protocmp.Transform()); diff != "" {
		t.Errorf("KeepNodeFields (-want +got):\n%s", diff)
	}
}
