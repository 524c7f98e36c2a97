package migrate

import (
	"fmt"
	"strings"

	"github.com/xds-relay/xds-relay/internal/aggregation"
)

// assemble writes the converted rules: EDS without names refused, each
// group's rules (named after its first type), then the rules for every
// other type, the last of them the default.
func assemble(groups []*typeGroup, other []leaf, authority string) []aggregation.Rule {
	// The earlier relay refused EDS without names before any rule.
	empty := ""
	rules := []aggregation.Rule{{
		Name:   "eds-without-names",
		Match:  aggregation.Match{TypeURLs: edsTypes, ResourceName: &aggregation.StringMatcher{Exact: &empty}},
		Result: aggregation.Target{Refuse: &aggregation.Refuse{Reason: "the earlier relay refused EDS requests without resource names"}},
	}}
	used := map[string]bool{}
	for k, g := range groups {
		name := shortType(g.types[0])
		if used[name] {
			name = fmt.Sprintf("%s.%d", name, k+1)
		}
		used[name] = true
		for i, l := range g.leaves {
			rules = append(rules, l.rule(fmt.Sprintf("%s-%d", name, i+1), g.types, authority))
		}
	}
	for i, l := range other {
		r := l.rule(fmt.Sprintf("other-%d", i+1), nil, authority)
		if i == len(other)-1 {
			r.Default, r.Match = true, aggregation.Match{}
		}
		rules = append(rules, r)
	}
	return rules
}

// shortType names a type's rules: the message name, lower case.
func shortType(t string) string {
	return strings.ToLower(t[strings.LastIndex(t, ".")+1:])
}

// rule writes a leaf as a rule named name for types (nil: any type).
func (l leaf) rule(name string, types []string, authority string) aggregation.Rule {
	r := aggregation.Rule{Name: name}
	r.Match = l.match(types)
	if l.refuse != "" {
		r.Result.Refuse = &aggregation.Refuse{Reason: l.refuse}
		return r
	}
	r.Result.Authority = authority
	for _, p := range l.key {
		r.Result.Group = append(r.Result.Group, p.part)
	}
	return r
}

// match writes the leaf's conditions as a match for types (nil: any type).
func (l leaf) match(types []string) aggregation.Match {
	m := aggregation.Match{TypeURLs: types}
	node := &aggregation.NodeMatch{}
	fields, byField := l.stringMatchers()
	for _, f := range fields {
		ms := byField[f]
		sm := &ms[0]
		if len(ms) > 1 {
			sm = &aggregation.StringMatcher{AllOf: ms}
		}
		setField(&m, node, f, sm)
	}
	l.metadataConds(node)
	if node.ID != nil || node.Cluster != nil || node.Locality != nil || node.Metadata != nil || node.HasMetadata != nil {
		m.Node = node
	}
	return m
}

// stringMatchers are the matchers of the leaf's string conditions by
// field, and the fields in the order first met.
func (l leaf) stringMatchers() ([]string, map[string][]aggregation.StringMatcher) {
	byField := map[string][]aggregation.StringMatcher{}
	var fields []string
	for _, a := range l.conds {
		if a.kind != atomString {
			continue
		}
		if byField[a.field] == nil {
			fields = append(fields, a.field)
		}
		byField[a.field] = append(byField[a.field], *a.matcher())
	}
	return fields, byField
}

// metadataConds writes the leaf's metadata conditions into node, in order.
func (l leaf) metadataConds(node *aggregation.NodeMatch) {
	for _, a := range l.conds {
		switch a.kind {
		case atomString:
		case atomHasMetadata:
			t := true
			node.HasMetadata = &t
		default:
			mm := aggregation.MetadataMatch{}
			mm.Path, mm.Keys = metadataPath(a.keys)
			t := true
			switch a.kind {
			case atomMetaString:
				mm.String = a.matcher()
			case atomMetaBool:
				mm.Bool = &t
			case atomMetaPresent:
				mm.Present = &t
			}
			node.Metadata = append(node.Metadata, mm)
		}
	}
}

// setField sets the matcher of field f: the resource name's in m, a node
// field's in node.
func setField(m *aggregation.Match, node *aggregation.NodeMatch, f string, sm *aggregation.StringMatcher) {
	switch f {
	case fieldResourceName:
		m.ResourceName = sm
	case fieldID:
		node.ID = sm
	case fieldCluster:
		node.Cluster = sm
	default:
		if node.Locality == nil {
			node.Locality = &aggregation.LocalityMatch{}
		}
		switch f {
		case fieldRegion:
			node.Locality.Region = sm
		case fieldZone:
			node.Locality.Zone = sm
		default:
			node.Locality.SubZone = sm
		}
	}
}
