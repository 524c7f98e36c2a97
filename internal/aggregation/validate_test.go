package aggregation

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestValidate(t *testing.T) {
	authorities := []string{"mesh", "edge"}
	ok := "{authority: mesh, group: [{literal: g}]}"
	tests := []struct {
		name  string
		rules string
		want  []FieldError
	}{
		{
			name: "valid",
			rules: `
- name: a
  match: {node: {cluster: {regex: "(x)-(?P<env>y)"}}}
  result: {authority: mesh, group: [{capture: {from: node.cluster, group: 1}}, {literal: "-"}, {capture: {from: node.cluster, group: env}}]}
- name: b
  default: true
  result: ` + ok,
		},
		{
			name: "name missing and duplicate",
			rules: `
- match: {node: {id: {exact: a}}}
  result: ` + ok + `
- name: x
  match: {node: {id: {exact: a}}}
  result: ` + ok + `
- name: x
  match: {node: {id: {exact: b}}}
  result: ` + ok,
			want: []FieldError{
				{"rules[0].name", "required"},
				{"rules[2].name", `"x" is already the name of rules[1]`},
			},
		},
		{
			name: "default rule not last and with conditions",
			rules: `
- name: d
  default: true
  match: {type_urls: [type.googleapis.com/envoy.config.cluster.v3.Cluster]}
  result: ` + ok + `
- name: x
  match: {node: {id: {exact: a}}}
  result: ` + ok,
			want: []FieldError{
				{"rules[0].default", "the default rule must be the last rule: the rules after it could never match"},
				{"rules[0].match", "a default rule matches every request and has no conditions"},
			},
		},
		{
			name: "rule without conditions",
			rules: `
- name: x
  match: {node: {}}
  result: ` + ok,
			want: []FieldError{
				{"rules[0].match", "no conditions: a rule that matches every request is written default: true, as the last rule"},
			},
		},
		{
			name: "bad type url",
			rules: `
- name: x
  match: {type_urls: [envoy.config.cluster.v3.Cluster, "type.googleapis.com/"]}
  result: ` + ok,
			want: []FieldError{
				{"rules[0].match.type_urls[0]", `"envoy.config.cluster.v3.Cluster" is not a type URL (want type.googleapis.com/<message>, e.g. type.googleapis.com/envoy.config.cluster.v3.Cluster)`},
				{"rules[0].match.type_urls[1]", `"type.googleapis.com/" is not a type URL (want type.googleapis.com/<message>, e.g. type.googleapis.com/envoy.config.cluster.v3.Cluster)`},
			},
		},
		{
			name: "string matchers: none, two, empty prefix, bad regex",
			rules: `
- name: x
  match:
    resource_name: {}
    node:
      id: {exact: a, regex: b}
      cluster: {prefix: ""}
      locality: {zone: {regex: "("}, sub_zone: {exact: "", prefix: a, regex: b}}
  result: ` + ok,
			want: []FieldError{
				{"rules[0].match.resource_name", "one of exact, prefix, regex, not or all_of is required"},
				{"rules[0].match.node.id", "exactly one of exact, prefix, regex, not or all_of may be set, found exact and regex"},
				{"rules[0].match.node.cluster.prefix", "empty: it would match everything; leave the condition out instead"},
				{"rules[0].match.node.locality.zone.regex", "does not compile: error parsing regexp: missing closing ): `(`"},
				{"rules[0].match.node.locality.sub_zone", "exactly one of exact, prefix, regex, not or all_of may be set, found exact and prefix and regex"},
			},
		},
		{
			name: "metadata path and value",
			rules: `
- name: x
  match:
    node:
      metadata:
        - {value: {exact: a}}
        - {path: "a..b", value: {exact: a}}
        - {path: a}
        - {path: a.b, value: {regex: "[z"}}
  result: ` + ok,
			want: []FieldError{
				{"rules[0].match.node.metadata[0].path", "required (or keys, a list of keys)"},
				{"rules[0].match.node.metadata[1].path", `"a..b" has an empty key (want dot-separated keys, e.g. team.name)`},
				{"rules[0].match.node.metadata[2]", "one of value, string, bool or present is required"},
				{"rules[0].match.node.metadata[3].value.regex", "does not compile: error parsing regexp: missing closing ]: `[z`"},
			},
		},
		{
			name: "authority missing and unknown",
			rules: `
- name: x
  match: {node: {id: {exact: a}}}
  result: {group: [{literal: g}]}
- name: y
  match: {node: {id: {exact: a}}}
  result: {authority: nowhere, group: [{literal: g}]}`,
			want: []FieldError{
				{"rules[0].result.authority", "required"},
				{"rules[1].result.authority", `"nowhere" is not a configured authority (have: mesh, edge)`},
			},
		},
		{
			name: "group empty",
			rules: `
- name: x
  match: {node: {id: {exact: a}}}
  result: {authority: mesh}`,
			want: []FieldError{
				{"rules[0].result.group", "required: at least one part (a literal alone puts every client the rule matches in one group)"},
			},
		},
		{
			name: "group without literal",
			rules: `
- name: x
  match: {node: {id: {exact: a}}}
  result: {authority: mesh, group: [{node_field: cluster}]}`,
			want: []FieldError{
				{"rules[0].result.group", "needs at least one literal part, so that no group key is empty (the empty group is the authority's xdstp stream)"},
			},
		},
		{
			name: "group parts: none, two, empty literal, unknown node field, adjacent values",
			rules: `
- name: x
  match: {node: {id: {regex: "(a)"}}}
  result:
    authority: mesh
    group:
      - {}
      - {literal: a, node_field: id}
      - {literal: ""}
      - {node_field: zone}
      - {node_field: metadata.}
      - {literal: "/"}
      - {node_field: id}
      - {capture: {from: node.id, group: 1}}`,
			want: []FieldError{
				{"rules[0].result.group[0]", "one of literal, node_field, capture, rewrite or metadata is required"},
				{"rules[0].result.group[1]", "exactly one of literal, node_field, capture, rewrite or metadata may be set, found literal and node_field"},
				{"rules[0].result.group[2].literal", "empty"},
				{"rules[0].result.group[3].node_field", `"zone" is not a node field (want id, cluster, locality.region, locality.zone, locality.sub_zone or metadata.<path>)`},
				{"rules[0].result.group[4].node_field", `"metadata." is not a node field (want id, cluster, locality.region, locality.zone, locality.sub_zone or metadata.<path>)`},
				{"rules[0].result.group[7]", `follows another value part with no literal between them: the key would be ambiguous (add e.g. - literal: "/")`},
			},
		},
		{
			name: "captures: unknown from, no regex there, bad groups",
			rules: `
- name: x
  match:
    resource_name: {exact: r}
    node:
      cluster: {regex: "(?P<svc>[a-z]+)-(prod)"}
      metadata: [{path: env, value: {regex: "(dev|prod)"}}]
  result:
    authority: mesh
    group:
      - {literal: "a"}
      - {capture: {from: node.zone, group: 1}}
      - {literal: "b"}
      - {capture: {group: 1}}
      - {literal: "c"}
      - {capture: {from: resource_name, group: 1}}
      - {literal: "d"}
      - {capture: {from: node.id, group: 1}}
      - {literal: "e"}
      - {capture: {from: node.cluster}}
      - {literal: "f"}
      - {capture: {from: node.cluster, group: 3}}
      - {literal: "g"}
      - {capture: {from: node.cluster, group: env}}
      - {literal: "h"}
      - {capture: {from: node.metadata.team, group: 1}}
      - {literal: "i"}
      - {capture: {from: node.metadata.env, group: 2}}
      - {literal: "j"}
      - {capture: {from: node.cluster, group: -1}}`,
			want: []FieldError{
				{"rules[0].result.group[1].capture.from", `"node.zone" is not a request field (want resource_name, node.id, node.cluster, node.locality.region, node.locality.zone, node.locality.sub_zone or node.metadata.<path>)`},
				{"rules[0].result.group[3].capture.from", "required (one of resource_name, node.id, node.cluster, node.locality.region, node.locality.zone, node.locality.sub_zone or node.metadata.<path>)"},
				{"rules[0].result.group[5].capture.from", "this rule's match has no valid regex condition on resource_name"},
				{"rules[0].result.group[7].capture.from", "this rule's match has no valid regex condition on node.id"},
				{"rules[0].result.group[9].capture.group", "required: a group number or name of rules[0].match.node.cluster.regex"},
				{"rules[0].result.group[11].capture.group", "rules[0].match.node.cluster.regex has 2 capture groups, not 3"},
				{"rules[0].result.group[13].capture.group", `rules[0].match.node.cluster.regex has no group named "env"`},
				{"rules[0].result.group[15].capture.from", "this rule's match has no valid regex condition on node.metadata.team"},
				{"rules[0].result.group[17].capture.group", "rules[0].match.node.metadata[0].value.regex has 1 capture groups, not 2"},
				{"rules[0].result.group[19].capture.group", "rules[0].match.node.cluster.regex has 2 capture groups, not -1"},
			},
		},
		{
			name: "negative and several matchers",
			rules: `
- name: x
  match:
    node:
      id: {not: {}}
      cluster: {all_of: []}
      locality: {zone: {all_of: [{prefix: a}, {regex: "("}, {not: {exact: a, prefix: b}}]}}
  result: ` + ok,
			want: []FieldError{
				{"rules[0].match.node.id.not", "one of exact, prefix, regex, not or all_of is required"},
				{"rules[0].match.node.cluster.all_of", "empty: list the matchers that must all hold"},
				{"rules[0].match.node.locality.zone.all_of[1].regex", "does not compile: error parsing regexp: missing closing ): `(`"},
				{"rules[0].match.node.locality.zone.all_of[2].not", "exactly one of exact, prefix, regex, not or all_of may be set, found exact and prefix"},
			},
		},
		{
			name: "typed metadata conditions and key lists",
			rules: `
- name: x
  match:
    node:
      metadata:
        - {path: a, keys: [a], bool: true}
        - {keys: [a, ""], present: true}
        - {keys: [a], bool: true, string: {exact: x}}
        - {keys: [a], string: {prefix: ""}}
  result: ` + ok,
			want: []FieldError{
				{"rules[0].match.node.metadata[0]", "exactly one of path or keys may be set, found path and keys"},
				{"rules[0].match.node.metadata[1].keys[1]", "empty"},
				{"rules[0].match.node.metadata[2]", "exactly one of value, string, bool or present may be set, found string and bool"},
				{"rules[0].match.node.metadata[3].string.prefix", "empty: it would match everything; leave the condition out instead"},
			},
		},
		{
			name: "refuse result with a group, without a reason",
			rules: `
- name: x
  match: {node: {id: {exact: a}}}
  result: {refuse: {}, authority: mesh, group: [{literal: g}], node: {id: n}}`,
			want: []FieldError{
				{"rules[0].result.refuse.reason", "required: what the refused client is told"},
				{"rules[0].result.authority", "a rule that refuses serves nothing: leave authority out"},
				{"rules[0].result.group", "a rule that refuses serves nothing: leave group out"},
				{"rules[0].result.node", "a rule that refuses serves nothing: leave node out"},
			},
		},
		{
			name: "rewrite, metadata parts, refuse_empty",
			rules: `
- name: x
  match: {node: {id: {exact: a}}}
  result:
    authority: mesh
    group:
      - {literal: a, refuse_empty: true}
      - {rewrite: {from: node.zone, regex: x}}
      - {literal: b}
      - {rewrite: {from: node.id}}
      - {literal: c}
      - {rewrite: {from: node.id, regex: "(a)(?P<n>b)", replace: "$1$n$3${x}$1x${2}"}}
      - {literal: d}
      - {rewrite: {from: node.metadata, regex: x}}
      - {literal: e}
      - {rewrite: {from: node.cluster, keys: [a], regex: x}}
      - {literal: f}
      - {metadata: {keys: [a]}}
      - {literal: g}
      - {metadata: {type: text}}
      - {literal: h}
      - {rewrite: {from: node.id, regex: "("}}`,
			want: []FieldError{
				{"rules[0].result.group[0].refuse_empty", "a literal is never empty: refuse_empty is for value parts"},
				{"rules[0].result.group[1].rewrite.from", `"node.zone" is not a request field (want resource_name, node.id, node.cluster, node.locality.region, node.locality.zone, node.locality.sub_zone or node.metadata.<path>, or node.metadata with keys and type)`},
				{"rules[0].result.group[3].rewrite.regex", "required"},
				{"rules[0].result.group[5].rewrite.replace", `refers to group "3", which the regex does not have (it has 2; write ${1}x for group 1 followed by x)`},
				{"rules[0].result.group[5].rewrite.replace", `refers to group "x", which the regex does not have (it has 2; write ${1}x for group 1 followed by x)`},
				{"rules[0].result.group[5].rewrite.replace", `refers to group "1x", which the regex does not have (it has 2; write ${1}x for group 1 followed by x)`},
				{"rules[0].result.group[7].rewrite.keys", "required with from: node.metadata"},
				{"rules[0].result.group[7].rewrite.type", "required: string, bool or number"},
				{"rules[0].result.group[9].rewrite", "keys and type are for from: node.metadata"},
				{"rules[0].result.group[11].metadata.type", "required: string, bool or number"},
				{"rules[0].result.group[13].metadata.keys", "required: the path, a list of keys"},
				{"rules[0].result.group[13].metadata.type", `"text" is not a metadata type (want string, bool or number)`},
				{"rules[0].result.group[15].rewrite.regex", "does not compile: error parsing regexp: missing closing ): `(`"},
			},
		},
		{
			name: "upstream node metadata that is not a struct",
			rules: `
- name: x
  match: {node: {id: {exact: a}}}
  result: {authority: mesh, group: [{literal: g}], node: {metadata: {a: !!timestamp 2001-12-14}}}`,
			want: []FieldError{
				{"rules[0].result.node.metadata.a", "a time.Time is not a metadata value (want a string, number, bool, null, list or map)"},
			},
		},
		{
			name: "upstream node empty",
			rules: `
- name: x
  match: {node: {id: {exact: a}}}
  result: {authority: mesh, group: [{literal: g}], node: {}}`,
			want: []FieldError{
				{"rules[0].result.node", "set id, cluster or metadata, or leave node out to present the node built from the group key"},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var rules []Rule
			if err := yamlDecoder(tt.rules).Decode(&rules); err != nil {
				t.Fatalf("decode: %v", err)
			}
			got := Validate(rules, authorities)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Validate (-want +got):\n%s", diff)
			}

			_, err := Compile(rules)
			structural := 0
			for _, p := range tt.want {
				if p.Path[len(p.Path)-len("authority"):] != "authority" || p.Problem == "required" {
					structural++
				}
			}
			if (err != nil) != (structural > 0) || (err != nil && !errors.Is(err, ErrInvalidRules)) {
				t.Errorf("Compile error = %v; want an ErrInvalidRules error: %v", err, structural > 0)
			}
		})
	}
}
