package aggregation

// PlainNamesRuleName is the name of the built-in rule PlainNamesRule
// returns; the config reserves it.
const PlainNamesRuleName = "plain-names"

// PlainNamesRule is the built-in default rule that serves plain (non-xdstp)
// names without any rule written: every request it sees goes to authority,
// in one group per node cluster (key "cluster=<node.cluster>"), and the
// group's upstream stream presents the relay's node id with that cluster.
// It is what an Envoy fleet needs (wildcard LDS and CDS, RDS and EDS by
// name: an origin answers them by the client's cluster). The config appends
// it last to a rule set that has no default rule.
func PlainNamesRule(authority string) Rule {
	literal, field := "cluster=", "cluster"
	return Rule{
		Name:    PlainNamesRuleName,
		Default: true,
		Result: Target{
			Authority: authority,
			Group:     []GroupPart{{Literal: &literal}, {NodeField: &field}},
		},
	}
}
