package config

import (
	"testing"
)

// Rules are decoded by the same strict walker as the rest of the config, and
// aggregation.Validate's problems get the "aggregation." prefix and a line.
func TestAggregationRules(t *testing.T) {
	const head = "authorities:\n" + // 1
		"  - name: mesh\n" + // 2
		"    origins: [\"h:1\"]\n" + // 3
		"aggregation:\n" + // 4
		"  rules:\n" + // 5
		"    - name: per-cluster\n" + // 6
		"      match:\n" + // 7
		"        node:\n" + // 8
		"          cluster: {regex: \"(?P<svc>[a-z]+)-prod\"}\n" + // 9
		"      result:\n" + // 10
		"        authority: mesh\n" + // 11
		"        group:\n" + // 12
		"          - literal: \"svc=\"\n" + // 13
		"          - capture: {from: node.cluster, group: svc}\n" // 14
	tests := []struct {
		name string
		yaml string
		want []problem
	}{
		{name: "valid", yaml: head},
		{name: "unknown authority", yaml: head +
			"    - name: other\n" + // 15
			"      default: true\n" + // 16
			"      result:\n" + // 17
			"        authority: nowhere\n" + // 18
			"        group: [{literal: x}]\n", // 19
			want: []problem{{"aggregation.rules[1].result.authority", 18, "nowhere"}}},
		{name: "bad regex, nested path", yaml: head +
			"    - name: broken\n" + // 15
			"      match:\n" + // 16
			"        node:\n" + // 17
			"          id: {regex: \"(\"}\n" + // 18
			"      result: {authority: mesh, group: [{literal: x}]}\n", // 19
			want: []problem{{"aggregation.rules[1].match.node.id.regex", 18, ""}}},
		{name: "unknown key in a rule", yaml: head +
			"    - name: typo\n" + // 15
			"      match:\n" + // 16
			"        node:\n" + // 17
			"          clustr: {exact: a}\n" + // 18
			"          id: {exact: b}\n" + // 19
			"      result: {authority: mesh, group: [{literal: x}]}\n", // 20
			want: []problem{{"aggregation.rules[1].match.node.clustr", 18, `unknown key "clustr" (did you mean "cluster"?)`}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse([]byte(tt.yaml), "test.yaml")
			got := problemsOf(t, err)
			// The exact wording of aggregation's problems is its own; here
			// only their place matters, and that they are there.
			if len(tt.want) == 1 && tt.want[0].Has == "" && len(got) == 1 {
				got[0].Has = ""
			}
			if diff := diffProblems(tt.want, got); diff != "" {
				t.Errorf("problems (-want +got):\n%s\nerror: %v", diff, err)
			}
			if err == nil && len(c.Aggregation.Rules) != 1 {
				t.Errorf("decoded %d rules, want 1", len(c.Aggregation.Rules))
			}
		})
	}
}
