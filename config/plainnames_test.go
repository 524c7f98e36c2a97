package config

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/xds-relay/xds-relay/internal/aggregation"
)

// Which authority serves the plain names no rule matches, and the rule set
// the relay runs: the configured rules, then the built-in rule.
func TestPlainNames(t *testing.T) {
	const partial = "aggregation:\n" +
		"  rules:\n" +
		"    - name: canary\n" +
		"      match: {node: {cluster: {exact: canary}}}\n" +
		"      result: {authority: a, group: [{literal: canary}]}\n"
	tests := []struct {
		name      string
		yaml      string
		want      int      // PlainNamesAuthority
		wantRules []string // names of AggregationRules
	}{
		{name: "the only authority", yaml: "authorities: [{name: a, origins: [\"h:1\"]}]\n",
			want: 0, wantRules: []string{aggregation.PlainNamesRuleName}},
		{name: "the only authority, after the rules", yaml: "authorities: [{name: a, origins: [\"h:1\"]}]\n" + partial,
			want: 0, wantRules: []string{"canary", aggregation.PlainNamesRuleName}},
		{name: "the only authority says false", yaml: "authorities: [{name: a, origins: [\"h:1\"], plain_names: false}]\n" + partial,
			want: -1, wantRules: []string{"canary"}},
		{name: "several authorities, none marked", yaml: "authorities: [{name: a, origins: [\"h:1\"]}, {name: b, origins: [\"h:2\"]}]\n",
			want: -1},
		{name: "several authorities, one marked", yaml: "authorities: [{name: a, origins: [\"h:1\"]}, {name: b, origins: [\"h:2\"], plain_names: true}]\n" + partial,
			want: 1, wantRules: []string{"canary", aggregation.PlainNamesRuleName}},
		{name: "a default rule serves them", yaml: "authorities: [{name: a, origins: [\"h:1\"]}]\n" + partial +
			"    - name: rest\n      default: true\n      result: {authority: a, group: [{literal: all}]}\n",
			want: -1, wantRules: []string{"canary", "rest"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse([]byte(tt.yaml), "test.yaml")
			if err != nil {
				t.Fatal(err)
			}
			if got := c.PlainNamesAuthority(); got != tt.want {
				t.Errorf("PlainNamesAuthority() = %d, want %d", got, tt.want)
			}
			var got []string
			for _, r := range c.AggregationRules() {
				got = append(got, r.Name)
			}
			if diff := cmp.Diff(tt.wantRules, got); diff != "" {
				t.Errorf("AggregationRules names (-want +got):\n%s", diff)
			}
			if tt.want >= 0 {
				last := c.AggregationRules()[len(got)-1]
				if last.Result.Authority != c.Authorities[tt.want].Name || !last.Default {
					t.Errorf("built-in rule %+v, want the default rule of %q", last, c.Authorities[tt.want].Name)
				}
			}
		})
	}
}

// A plain_names setting that could not apply is a config error at its line.
func TestPlainNamesProblems(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want []problem
	}{
		{name: "two authorities marked", yaml: "authorities:\n" + // 1
			"  - {name: a, origins: [\"h:1\"], plain_names: true}\n" + // 2
			"  - {name: b, origins: [\"h:2\"], plain_names: true}\n", // 3
			want: []problem{{"authorities[1].plain_names", 3, "authorities[0].plain_names already does, line 2"}}},
		{name: "marked with a default rule", yaml: "authorities:\n" + // 1
			"  - {name: a, origins: [\"h:1\"], plain_names: true}\n" + // 2
			"aggregation:\n" + // 3
			"  rules:\n" + // 4
			"    - {name: rest, default: true, result: {authority: a, group: [{literal: all}]}}\n", // 5
			want: []problem{{"authorities[0].plain_names", 2, `aggregation.rules[0] ("rest") is a default rule`}}},
		{name: "a rule takes the built-in name", yaml: "authorities:\n" + // 1
			"  - {name: a, origins: [\"h:1\"]}\n" + // 2
			"aggregation:\n" + // 3
			"  rules:\n" + // 4
			"    - {name: plain-names, match: {node: {id: {exact: x}}}, result: {authority: a, group: [{literal: x}]}}\n", // 5
			want: []problem{{"aggregation.rules[0].name", 5, "built-in rule"}}},
		{name: "not a bool", yaml: "authorities:\n" + // 1
			"  - {name: a, origins: [\"h:1\"], plain_names: yes-please}\n", // 2
			want: []problem{{"authorities[0].plain_names", 2, ""}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.yaml), "test.yaml")
			got := problemsOf(t, err)
			if diff := diffProblems(tt.want, got); diff != "" {
				t.Errorf("problems (-want +got):\n%s\nerror: %v", diff, err)
			}
		})
	}
}

// The shipped configs serve an Envoy fleet's plain names as they are.
func TestShippedConfigsServePlainNames(t *testing.T) {
	example, err := Load("example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	demo, err := Demo(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]*Config{"example.yaml": example, "demo/relay.yaml": demo} {
		if i := c.PlainNamesAuthority(); i < 0 {
			t.Errorf("%s: no authority serves plain names", name)
		}
	}
}
