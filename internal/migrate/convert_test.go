package migrate

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/xds-relay/xds-relay/internal/aggregation"
	"github.com/xds-relay/xds-relay/internal/migrate/legacykey"
)

// verifyRequests is how many generated requests each test file replays.
const verifyRequests = 4000

func loadLegacy(t *testing.T, file string) *legacykey.Config {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", file))
	if err != nil {
		t.Fatal(err)
	}
	c, err := legacykey.Parse(data)
	if err != nil {
		t.Fatalf("parse %s: %v", file, err)
	}
	return c
}

// Every test file in the earlier relay's format converts and groups
// generated requests exactly as the earlier relay did, or is refused for
// the reason it was written to show.
func TestConvertAndVerifyTestdata(t *testing.T) {
	tests := []struct {
		file        string
		wantParse   string // a parse error, if the file is invalid
		wantRefusal string // a conversion refusal, if it cannot be converted
	}{
		{file: "per_cluster_and_type.yaml"},
		{file: "canary_by_node_id.yaml"},
		{file: "v2_and_v3_types.yaml"},
		{file: "one_string_fragment.yaml"},
		{file: "word_per_type.yaml"},
		{file: "node_predicates.yaml"},
		{file: "bad_regexes.yaml"},
		{file: "missing_match.yaml", wantParse: "fragments[0].rules[0].match: required"},
		{file: "refuse_second_name.yaml", wantRefusal: "fragments[0].rules[1].result.resource_names_fragment.element: is 1: this relay groups each resource name of a request by itself"},
		{file: "refuse_adjacent_values.yaml", wantRefusal: "fragments[0].rules[0].result.and_result.result_predicates[1].request_node_fragment: and_result puts this value right after another with nothing between them"},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join("testdata", tt.file))
			if err != nil {
				t.Fatal(err)
			}
			legacy, err := legacykey.Parse(data)
			if tt.wantParse != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantParse) {
					t.Fatalf("Parse error = %v, want %q", err, tt.wantParse)
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			conv, err := Convert(legacy, "legacy")
			if tt.wantRefusal != "" {
				if !errors.Is(err, ErrNotConvertible) || !strings.Contains(err.Error(), tt.wantRefusal) {
					t.Fatalf("Convert error = %v, want %q", err, tt.wantRefusal)
				}
				return
			}
			if err != nil {
				t.Fatalf("Convert: %v", err)
			}
			if problems := aggregation.Validate(conv.Rules, []string{"legacy"}); len(problems) > 0 {
				t.Fatalf("converted rules do not validate: %v", problems)
			}
			rep, err := Verify(legacy, conv.Rules, Generate(legacy, verifyRequests, 1))
			if err != nil {
				t.Fatal(err)
			}
			for i, d := range rep.Differences {
				if i == 5 {
					t.Errorf("... %d differences in all", len(rep.Differences))
					break
				}
				t.Errorf("difference: %v", d)
			}
			if rep.Groups < 1 || rep.Refused == rep.Requests {
				t.Errorf("the generated requests make %d groups and %d refusals: they test nothing", rep.Groups, rep.Refused)
			}
		})
	}
}

func TestConvertOutput(t *testing.T) {
	s := func(v string) *string { return &v }
	cds := "type.googleapis.com/envoy.config.cluster.v3.Cluster"
	tests := []struct {
		name  string
		rules string
		want  []aggregation.Rule
	}{
		{
			name: "one literal for one type: that type, and the rest refused",
			rules: `fragments:
- rules:
  - match: {request_type_match: {types: [` + cds + `]}}
    result: {string_fragment: all}`,
			want: []aggregation.Rule{
				edsWithoutNames,
				{Name: "cluster-1", Match: aggregation.Match{TypeURLs: []string{cds}},
					Result: aggregation.Target{Authority: "a", Group: []aggregation.GroupPart{{Literal: s("legacy:all")}}}},
				{Name: "other-1", Default: true,
					Result: aggregation.Target{Refuse: &aggregation.Refuse{Reason: "no fragment of the earlier relay's rules matches: it refused the request"}}},
			},
		},
		{
			name: "a cluster regex match and a node id: the regex made whole, the id refused when empty",
			rules: `fragments:
- rules:
  - match: {request_node_match: {cluster_match: {regex_match: "^pay"}}}
    result: {request_node_fragment: {id_action: {exact: true}}}`,
			want: []aggregation.Rule{
				edsWithoutNames,
				{Name: "other-1", Match: aggregation.Match{Node: &aggregation.NodeMatch{Cluster: &aggregation.StringMatcher{Regex: s("(?s:.*)(?:^pay)(?s:.*)")}}},
					Result: aggregation.Target{Authority: "a", Group: []aggregation.GroupPart{{Literal: s("legacy:")}, {NodeField: s("id"), RefuseEmpty: true}}}},
				{Name: "other-2", Default: true,
					Result: aggregation.Target{Refuse: &aggregation.Refuse{Reason: "no fragment of the earlier relay's rules matches: it refused the request"}}},
			},
		},
		{
			name: "a metadata bool: no metadata refused first, then the bool, as a type",
			rules: `fragments:
- rules:
  - match: {request_node_match: {node_metadata_match: {path: [{key: a.b}], match: {bool_match: {value_match: true}}}}}
    result: {string_fragment: yes}
  - match: {any_match: true}
    result: {string_fragment: any}`,
			want: []aggregation.Rule{
				edsWithoutNames,
				{Name: "other-1", Match: aggregation.Match{Node: &aggregation.NodeMatch{HasMetadata: ptrBool(true), Metadata: []aggregation.MetadataMatch{{Keys: []string{"a.b"}, Bool: ptrBool(true)}}}},
					Result: aggregation.Target{Authority: "a", Group: []aggregation.GroupPart{{Literal: s("legacy:yes_any")}}}},
				{Name: "other-2", Match: aggregation.Match{Node: &aggregation.NodeMatch{HasMetadata: ptrBool(true)}},
					Result: aggregation.Target{Authority: "a", Group: []aggregation.GroupPart{{Literal: s("legacy:any")}}}},
				{Name: "other-3", Default: true,
					Result: aggregation.Target{Refuse: &aggregation.Refuse{Reason: "fragments[0].rules[0].match.request_node_match.node_metadata_match: the node has no metadata (the earlier relay refused the request)"}}},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			legacy, err := legacykey.Parse([]byte(tt.rules))
			if err != nil {
				t.Fatal(err)
			}
			got, err := Convert(legacy, "a")
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got.Rules); diff != "" {
				t.Errorf("converted rules (-want +got):\n%s", diff)
			}
			rep, err := Verify(legacy, got.Rules, Generate(legacy, verifyRequests, 2))
			if err != nil {
				t.Fatal(err)
			}
			if len(rep.Differences) > 0 {
				t.Errorf("%d differences, the first: %v", len(rep.Differences), rep.Differences[0])
			}
		})
	}
}

func ptrBool(b bool) *bool { return &b }

// edsWithoutNames is the first rule of every conversion.
var edsWithoutNames = aggregation.Rule{
	Name: "eds-without-names",
	Match: aggregation.Match{
		TypeURLs:     []string{"type.googleapis.com/envoy.api.v2.ClusterLoadAssignment", "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment"},
		ResourceName: &aggregation.StringMatcher{Exact: new("")},
	},
	Result: aggregation.Target{Refuse: &aggregation.Refuse{Reason: "the earlier relay refused EDS requests without resource names"}},
}

// Verify finds what a wrong conversion gets wrong: groups split, groups
// merged, refusals served and served requests refused.
func TestVerifyFindsDifferences(t *testing.T) {
	legacy := loadLegacy(t, "per_cluster_and_type.yaml")
	conv, err := Convert(legacy, "legacy")
	if err != nil {
		t.Fatal(err)
	}
	lit := func(v string) *string { return &v }
	field := func(v string) *string { return &v }
	tests := []struct {
		name   string
		change func(rules []aggregation.Rule) []aggregation.Rule
		want   string // in the first difference
	}{
		{
			name: "groups merged: the cluster left out of the key",
			change: func(rules []aggregation.Rule) []aggregation.Rule {
				for i := range rules {
					if g := rules[i].Result.Group; len(g) > 1 {
						rules[i].Result.Group = []aggregation.GroupPart{{Literal: lit("one-group/")}, {NodeField: field("locality.zone")}}
					}
				}
				return rules
			},
			want: "; but ",
		},
		{
			name: "groups split: the node id added to the key",
			change: func(rules []aggregation.Rule) []aggregation.Rule {
				for i := range rules {
					if g := rules[i].Result.Group; len(g) > 1 {
						rules[i].Result.Group = append(g, aggregation.GroupPart{Literal: lit("/id=")}, aggregation.GroupPart{NodeField: field("id")})
					}
				}
				return rules
			},
			want: "; but ",
		},
		{
			name: "refusals served: every refusal turned into a group",
			change: func(rules []aggregation.Rule) []aggregation.Rule {
				for i := range rules {
					if rules[i].Result.Refuse != nil {
						rules[i].Result = aggregation.Target{Authority: "legacy", Group: []aggregation.GroupPart{{Literal: lit("refused-before")}}}
					}
				}
				return rules
			},
			want: "earlier relay refused (",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rules := tt.change(cloneRules(t, conv.Rules))
			rep, err := Verify(legacy, rules, Generate(legacy, verifyRequests, 1))
			if err != nil {
				t.Fatal(err)
			}
			if len(rep.Differences) == 0 {
				t.Fatalf("no differences found")
			}
			if got := rep.Differences[0].String(); !strings.Contains(got, tt.want) {
				t.Errorf("first difference %q does not contain %q", got, tt.want)
			}
		})
	}
}

// cloneRules deep-copies rules through their YAML.
func cloneRules(t *testing.T, rules []aggregation.Rule) []aggregation.Rule {
	t.Helper()
	out := make([]aggregation.Rule, len(rules))
	copy(out, rules)
	for i := range out {
		out[i].Result.Group = append([]aggregation.GroupPart(nil), rules[i].Result.Group...)
	}
	return out
}

func TestGenerateIsDeterministic(t *testing.T) {
	legacy := loadLegacy(t, "node_predicates.yaml")
	a, b := Generate(legacy, 500, 7), Generate(legacy, 500, 7)
	for i := range a {
		if describe(a[i]) != describe(b[i]) {
			t.Fatalf("request %d differs between two runs: %s / %s", i, describe(a[i]), describe(b[i]))
		}
	}
}

func TestNormalizeTemplate(t *testing.T) {
	tests := []struct {
		name, pattern, template, want string
	}{
		{"numbered group", "^(a)(b)$", "$1-$2", "${1}-${2}"},
		{"a group that does not exist is dropped", "^(a)$", "$1$2", "${1}"},
		{"$1_x names the group 1_x", "^(a)$", "$1_x", ""},
		{"braced names are kept", "^(?P<svc>a)$", "${svc}.${1}", "${svc}.${1}"},
		{"a dollar stays a dollar", "^(a)$", "$$1 costs $", "$$1 costs $"},
		{"a malformed brace is a dollar", "^(a)$", "${1", "$${1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			re := mustCompile(t, tt.pattern)
			got := normalizeTemplate(tt.template, re)
			if got != tt.want {
				t.Errorf("normalizeTemplate(%q) = %q, want %q", tt.template, got, tt.want)
			}
			// Same meaning: Expand gives the same text for both.
			for _, in := range []string{"a", "ab", "x"} {
				if w, g := re.ReplaceAllString(in, tt.template), re.ReplaceAllString(in, got); w != g {
					t.Errorf("on %q: %q before, %q after", in, w, g)
				}
			}
		})
	}
}
