package config

import (
	"github.com/xds-relay/xds-relay/internal/aggregation"
)

// PlainNamesAuthority returns the index of the authority that serves the
// plain (non-xdstp) names no aggregation rule matches, through the built-in
// rule aggregation.PlainNamesRule: the authority marked plain_names: true,
// else the only authority unless it says plain_names: false. It returns -1
// when there is none, or when a rule is the default (that rule serves them):
// plain names no rule matches are then refused.
func (c *Config) PlainNamesAuthority() int {
	for _, r := range c.Aggregation.Rules {
		if r.Default {
			return -1
		}
	}
	for i, a := range c.Authorities {
		if a.PlainNames != nil && *a.PlainNames {
			return i
		}
	}
	if len(c.Authorities) == 1 && c.Authorities[0].PlainNames == nil {
		return 0
	}
	return -1
}

// AggregationRules returns the rule set the relay runs: aggregation.rules,
// followed by the built-in plain-names rule when PlainNamesAuthority names
// an authority. Every user of the rules (the resolver, explain, the
// snapshot fingerprint) takes them from here.
func (c *Config) AggregationRules() []aggregation.Rule {
	i := c.PlainNamesAuthority()
	if i < 0 {
		return c.Aggregation.Rules
	}
	rules := make([]aggregation.Rule, 0, len(c.Aggregation.Rules)+1)
	rules = append(rules, c.Aggregation.Rules...)
	return append(rules, aggregation.PlainNamesRule(c.Authorities[i].Name))
}

// plainNames checks authorities[].plain_names: at most one authority is
// marked, not together with a default rule, and no rule takes the built-in
// rule's name.
func (v *validator) plainNames() {
	c := v.c
	marked := ""
	for i, a := range c.Authorities {
		if a.PlainNames == nil || !*a.PlainNames {
			continue
		}
		p := joinIndex("authorities", i) + ".plain_names"
		if marked != "" {
			v.add(p, "only one authority serves plain names; %s already does%s", marked, v.lineSuffix(marked))
			continue
		}
		marked = p
		for j, r := range c.Aggregation.Rules {
			if r.Default {
				v.add(p, "aggregation.rules[%d] (%q) is a default rule: it already serves every plain name no rule matches", j, r.Name)
			}
		}
	}
	for j, r := range c.Aggregation.Rules {
		if r.Name == aggregation.PlainNamesRuleName {
			v.add(joinIndex("aggregation.rules", j)+".name", "%q is the name of the built-in rule (see authorities[].plain_names); choose another", r.Name)
		}
	}
}
