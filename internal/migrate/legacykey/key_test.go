package legacykey

import (
	"errors"
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/types/known/structpb"
)

const (
	lds = "type.googleapis.com/envoy.config.listener.v3.Listener"
	cds = "type.googleapis.com/envoy.config.cluster.v3.Cluster"
	eds = "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment"
)

func node(t *testing.T, id, cluster string, loc *corev3.Locality, md map[string]any) *corev3.Node {
	t.Helper()
	n := &corev3.Node{Id: id, Cluster: cluster, Locality: loc}
	if md != nil {
		s, err := structpb.NewStruct(md)
		if err != nil {
			t.Fatal(err)
		}
		n.Metadata = s
	}
	return n
}

// The earlier relay's key semantics, as its documentation and tests
// describe them.
func TestKey(t *testing.T) {
	plain := node(t, "envoy-1", "payments-prod", &corev3.Locality{Region: "eu", Zone: "eu-a", SubZone: "rack1"}, map[string]any{"deploy": map[string]any{"track": "canary"}, "on": true, "n": 3.0})
	tests := []struct {
		name    string
		rules   string
		req     Request
		want    string
		wantErr error  // errors.Is
		errText string // or a substring
	}{
		{
			name: "every matching rule of a fragment contributes, fragments joined with _",
			rules: `fragments:
- rules:
  - {match: {any_match: true}, result: {string_fragment: a}}
  - {match: {request_type_match: {types: [` + cds + `]}}, result: {string_fragment: b}}
  - {match: {request_type_match: {types: [` + lds + `]}}, result: {string_fragment: c}}
- rules:
  - {match: {any_match: true}, result: {string_fragment: d}}`,
			req:  Request{TypeURL: cds, Node: plain},
			want: "a_b_d",
		},
		{
			name: "a fragment no rule matches contributes nothing",
			rules: `fragments:
- rules:
  - {match: {request_type_match: {types: [` + lds + `]}}, result: {string_fragment: l}}
- rules:
  - {match: {any_match: true}, result: {string_fragment: all}}`,
			req:  Request{TypeURL: cds, Node: plain},
			want: "all",
		},
		{
			name:    "no fragment matches: refused",
			rules:   "fragments:\n- rules:\n  - {match: {request_type_match: {types: [" + lds + "]}}, result: {string_fragment: l}}",
			req:     Request{TypeURL: cds, Node: plain},
			wantErr: ErrNoFragment,
		},
		{
			name:    "EDS without names: refused before any rule",
			rules:   "fragments:\n- rules:\n  - {match: {any_match: true}, result: {string_fragment: x}}",
			req:     Request{TypeURL: eds, Node: plain},
			wantErr: ErrEDSWithoutNames,
		},
		{
			name:    "no type: refused",
			rules:   "fragments:\n- rules:\n  - {match: {any_match: true}, result: {string_fragment: x}}",
			req:     Request{Node: plain},
			wantErr: ErrNoTypeURL,
		},
		{
			name:  "a regex match is unanchored",
			rules: "fragments:\n- rules:\n  - {match: {request_node_match: {cluster_match: {regex_match: ments-}}}, result: {string_fragment: hit}}",
			req:   Request{TypeURL: cds, Node: plain},
			want:  "hit",
		},
		{
			name:    "an empty exact_match matches nothing, even the empty id",
			rules:   `fragments: [{rules: [{match: {request_node_match: {id_match: {exact_match: ""}}}, result: {string_fragment: hit}}]}]`,
			req:     Request{TypeURL: cds, Node: node(t, "", "c", nil, nil)},
			wantErr: ErrNoFragment,
		},
		{
			name:  "and, or, not",
			rules: `fragments: [{rules: [{match: {and_match: {rules: [{or_match: {rules: [{request_node_match: {id_match: {exact_match: x}}}, {request_node_match: {cluster_match: {exact_match: payments-prod}}}]}}, {not_match: {request_type_match: {types: [` + lds + `]}}}]}}, result: {string_fragment: hit}}]}]`,
			req:   Request{TypeURL: cds, Node: plain},
			want:  "hit",
		},
		{
			name:    "a metadata match on a node without metadata: refused",
			rules:   `fragments: [{rules: [{match: {request_node_match: {node_metadata_match: {path: [{key: a}], match: {string_match: {exact_match: b}}}}}, result: {string_fragment: x}}]}]`,
			req:     Request{TypeURL: cds, Node: node(t, "1", "c", nil, nil)},
			wantErr: ErrNoMetadata,
		},
		{
			name:  "a bool_match false matches a value that is not a bool",
			rules: `fragments: [{rules: [{match: {request_node_match: {node_metadata_match: {path: [{key: deploy}], match: {bool_match: {value_match: false}}}}}, result: {string_fragment: hit}}]}]`,
			req:   Request{TypeURL: cds, Node: plain},
			want:  "hit",
		},
		{
			name:  "a string_match sees a bool as the empty string",
			rules: `fragments: [{rules: [{match: {request_node_match: {node_metadata_match: {path: [{key: on}], match: {string_match: {regex_match: "^$"}}}}}, result: {string_fragment: hit}}]}]`,
			req:   Request{TypeURL: cds, Node: plain},
			want:  "hit",
		},
		{
			name:  "locality action joins its fields with |",
			rules: `fragments: [{rules: [{match: {any_match: true}, result: {request_node_fragment: {locality_action: {region_action: {exact: true}, subzone_action: {regex_action: {pattern: "rack", replace: "r"}}}}}}]}]`,
			req:   Request{TypeURL: cds, Node: plain},
			want:  "eu|r1",
		},
		{
			name:  "metadata action and and_result",
			rules: `fragments: [{rules: [{match: {any_match: true}, result: {and_result: {result_predicates: [{string_fragment: "t="}, {request_node_fragment: {node_metadata_action: {path: [{key: deploy}, {key: track}], action: {exact: true}}}}]}}}]}]`,
			req:   Request{TypeURL: cds, Node: plain},
			want:  "t=canary",
		},
		{
			name:    "a metadata action on an absent path: refused",
			rules:   `fragments: [{rules: [{match: {any_match: true}, result: {request_node_fragment: {node_metadata_action: {path: [{key: gone}], action: {exact: true}}}}}]}]`,
			req:     Request{TypeURL: cds, Node: plain},
			wantErr: ErrNoSuchPath,
		},
		{
			name:    "an exact action on an empty value: refused",
			rules:   `fragments: [{rules: [{match: {any_match: true}, result: {request_node_fragment: {id_action: {exact: true}}}}]}]`,
			req:     Request{TypeURL: cds, Node: node(t, "", "c", nil, nil)},
			wantErr: ErrEmptyFragment,
		},
		{
			name:  "a regex action replaces every match, unanchored",
			rules: `fragments: [{rules: [{match: {any_match: true}, result: {request_node_fragment: {cluster_action: {regex_action: {pattern: "^(.*)-.*$", replace: "$1"}}}}}]}]`,
			req:   Request{TypeURL: cds, Node: plain},
			want:  "payments",
		},
		{
			name:    "the resource name of a wildcard: refused",
			rules:   `fragments: [{rules: [{match: {any_match: true}, result: {resource_names_fragment: {element: 0, action: {exact: true}}}}]}]`,
			req:     Request{TypeURL: cds, Node: plain},
			wantErr: ErrNoSuchElement,
		},
		{
			name:  "the first resource name",
			rules: `fragments: [{rules: [{match: {any_match: true}, result: {resource_names_fragment: {element: 0, action: {exact: true}}}}]}]`,
			req:   Request{TypeURL: eds, Names: []string{"backend", "other"}, Node: plain},
			want:  "backend",
		},
		{
			name:    "a regex that does not compile refuses the requests that reach it",
			rules:   `fragments: [{rules: [{match: {request_node_match: {id_match: {regex_match: "a("}}}, result: {string_fragment: x}}]}]`,
			req:     Request{TypeURL: cds, Node: plain},
			errText: "missing closing )",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse([]byte(tt.rules))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			got, err := New(c).Key(tt.req)
			switch {
			case tt.wantErr != nil:
				if !errors.Is(err, tt.wantErr) {
					t.Errorf("Key = %q, %v; want error %v", got, err, tt.wantErr)
				}
			case tt.errText != "":
				if err == nil || !strings.Contains(err.Error(), tt.errText) {
					t.Errorf("Key = %q, %v; want an error with %q", got, err, tt.errText)
				}
			case err != nil:
				t.Errorf("Key: %v", err)
			default:
				if diff := cmp.Diff(tt.want, got); diff != "" {
					t.Errorf("Key (-want +got):\n%s", diff)
				}
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name  string
		rules string
		want  []string
	}{
		{"empty file", "", []string{"fragments: required"}},
		{"unknown field", "fragments:\n- rules: []\n  priority: 1\n", []string{`line 3: unknown key "priority"`}},
		// The decoder's errors are said in the file's terms, never by the
		// Go types that read it.
		{"a top-level key of another file", "server: {}\nfragments: []\n", []string{`line 1: unknown key "server"`}},
		{"a list for a string", "fragments:\n- rules:\n  - match: {any_match: true}\n    result: {string_fragment: [a]}\n", []string{"line 4: a list where a string goes"}},
		{"a list for the file", "- a\n", []string{"line 1: a list where a mapping goes"}},
		{"no fragments", "fragments: []", []string{"fragments: at least one fragment is required"}},
		{
			name: "missing and doubled parts",
			rules: `fragments:
- rules:
  - result: {string_fragment: a, and_result: {result_predicates: [{string_fragment: b}]}}
  - match: {any_match: false}
    result: {request_node_fragment: {id_action: {exact: false}}}
  - match: {and_match: {rules: [{any_match: true}]}, or_match: {rules: []}}
    result: {resource_names_fragment: {element: -1}}
  - match: {request_node_match: {node_metadata_match: {path: [], match: {}}}}
    result: {request_node_fragment: {node_metadata_action: {path: [{key: ""}], action: {regex_action: {replace: x}}}}}`,
			want: []string{
				"fragments[0].rules[0].match: required",
				"fragments[0].rules[0].result: only one of",
				"fragments[0].rules[0].result.and_result.result_predicates: at least two results are required",
				"fragments[0].rules[1].match.any_match: must be true",
				"fragments[0].rules[1].result.request_node_fragment.id_action.exact: must be true",
				"fragments[0].rules[2].match: only one of",
				"fragments[0].rules[2].result.resource_names_fragment.element: must not be negative",
				"fragments[0].rules[2].result.resource_names_fragment.action: required",
				"fragments[0].rules[3].match.request_node_match.node_metadata_match.path: at least one segment is required",
				"fragments[0].rules[3].match.request_node_match.node_metadata_match.match: one of [string_match bool_match] is required",
				"fragments[0].rules[3].result.request_node_fragment.node_metadata_action.path[0].key: required",
				"fragments[0].rules[3].result.request_node_fragment.node_metadata_action.action.regex_action.pattern: required",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.rules))
			if err == nil {
				t.Fatal("Parse succeeded")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not contain %q:\n%v", w, err)
				}
			}
			if strings.Contains(err.Error(), "legacykey.") {
				t.Errorf("error names a Go type: %v", err)
			}
		})
	}
}
