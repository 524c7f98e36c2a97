package aggregation

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
)

type condKind uint8

const (
	condValue       condKind = iota // the field's value matches m
	condPresent                     // a metadata path has any value (want)
	condHasMetadata                 // the node carries metadata (want)
)

// condition tests one field of a request.
type condition struct {
	kind  condKind
	field field
	m     matcher // condValue
	want  bool    // condPresent, condHasMetadata
}

type matchKind uint8

const (
	matchExact matchKind = iota
	matchPrefix
	matchRegex
	matchNot
	matchAll
)

// matcher is a compiled StringMatcher.
type matcher struct {
	kind matchKind
	s    string         // exact or prefix
	re   *regexp.Regexp // anchored, for matchRegex
	subs []matcher      // matchNot: one; matchAll: every one
}

func (m *matcher) match(v string) bool {
	switch m.kind {
	case matchExact:
		return v == m.s
	case matchPrefix:
		return strings.HasPrefix(v, m.s)
	case matchNot:
		return !m.subs[0].match(v)
	case matchAll:
		for i := range m.subs {
			if !m.subs[i].match(v) {
				return false
			}
		}
		return true
	}
	return m.re.MatchString(v)
}

// regexCondition is a regex condition that captures may refer to.
type regexCondition struct {
	field field
	path  string // of the regex, for problems
	re    *regexp.Regexp
}

// hasConditions reports whether any condition is written, valid or not.
func (m *Match) hasConditions() bool {
	if len(m.TypeURLs) > 0 || m.ResourceName != nil {
		return true
	}
	n := m.Node
	if n == nil {
		return false
	}
	l := n.Locality
	return n.ID != nil || n.Cluster != nil || len(n.Metadata) > 0 || n.HasMetadata != nil ||
		(l != nil && (l.Region != nil || l.Zone != nil || l.SubZone != nil))
}

// match compiles a rule's conditions into cr and returns its regex
// conditions, for captures.
func (c *checker) match(cr *compiledRule, p string, m *Match) []regexCondition {
	c.typeURLs(cr, p, m.TypeURLs)
	regexes := c.stringCond(cr, field{kind: fieldResourceName}, p+".resource_name", m.ResourceName)
	n := m.Node
	if n == nil {
		return regexes
	}
	return append(regexes, c.nodeMatch(cr, p+".node", n)...)
}

// typeURLs compiles a match's type URLs into cr, each one a type URL.
func (c *checker) typeURLs(cr *compiledRule, p string, types []string) {
	for j, t := range types {
		tp := fmt.Sprintf("%s.type_urls[%d]", p, j)
		if rest, ok := strings.CutPrefix(t, resourcev3.APITypePrefix); !ok || rest == "" {
			c.add(tp, "%q is not a type URL (want %s<message>, e.g. %s)", t, resourcev3.APITypePrefix, resourcev3.ClusterType)
			continue
		}
		cr.typeURLs = append(cr.typeURLs, t)
	}
}

// stringCond compiles a condition on field f, if written (sm not nil),
// into cr, and returns it if it is a regex condition.
func (c *checker) stringCond(cr *compiledRule, f field, path string, sm *StringMatcher) []regexCondition {
	if sm == nil {
		return nil
	}
	cm, ok := c.matcher(path, sm)
	if !ok {
		return nil
	}
	cr.conds = append(cr.conds, condition{field: f, m: cm})
	if cm.kind == matchRegex {
		return []regexCondition{{field: f, path: path + ".regex", re: cm.re}}
	}
	return nil
}

// nodeMatch compiles a match's node conditions (at np) into cr and
// returns its regex conditions.
func (c *checker) nodeMatch(cr *compiledRule, np string, n *NodeMatch) []regexCondition {
	var regexes []regexCondition
	regexes = append(regexes, c.stringCond(cr, field{kind: fieldNodeID}, np+".id", n.ID)...)
	regexes = append(regexes, c.stringCond(cr, field{kind: fieldNodeCluster}, np+".cluster", n.Cluster)...)
	if l := n.Locality; l != nil {
		regexes = append(regexes, c.stringCond(cr, field{kind: fieldRegion}, np+".locality.region", l.Region)...)
		regexes = append(regexes, c.stringCond(cr, field{kind: fieldZone}, np+".locality.zone", l.Zone)...)
		regexes = append(regexes, c.stringCond(cr, field{kind: fieldSubZone}, np+".locality.sub_zone", l.SubZone)...)
	}
	if n.HasMetadata != nil {
		cr.conds = append(cr.conds, condition{kind: condHasMetadata, want: *n.HasMetadata})
	}
	for j := range n.Metadata {
		regexes = append(regexes, c.metadataCond(cr, fmt.Sprintf("%s.metadata[%d]", np, j), &n.Metadata[j])...)
	}
	return regexes
}

// metadataCond compiles one metadata condition (at mp) into cr, and
// returns it if it is a regex condition on a path (written as path).
func (c *checker) metadataCond(cr *compiledRule, mp string, mm *MetadataMatch) []regexCondition {
	keys, ok := c.metadataPath(mp, mm.Path, mm.Keys)
	if !c.oneMetadataTest(mp, mm) {
		return nil
	}
	f := field{kind: fieldMetadata, path: keys}
	switch {
	case mm.Present != nil:
		if ok {
			cr.conds = append(cr.conds, condition{kind: condPresent, field: f, want: *mm.Present})
		}
	case mm.Bool != nil:
		if ok {
			f.typ = typeBool
			cr.conds = append(cr.conds, condition{field: f, m: matcher{kind: matchExact, s: strconv.FormatBool(*mm.Bool)}})
		}
	default:
		sm, sp := mm.Value, mp+".value"
		if mm.String != nil {
			sm, sp, f.typ = mm.String, mp+".string", typeString
		}
		cm, mok := c.matcher(sp, sm)
		if !ok || !mok {
			return nil
		}
		cr.conds = append(cr.conds, condition{field: f, m: cm})
		if cm.kind == matchRegex && mm.Path != "" {
			return []regexCondition{{field: f, path: sp + ".regex", re: cm.re}}
		}
	}
	return nil
}

// oneMetadataTest checks that a metadata condition sets exactly one of
// value, string, bool or present.
func (c *checker) oneMetadataTest(mp string, mm *MetadataMatch) bool {
	var set []string
	for _, t := range []struct {
		name string
		set  bool
	}{{"value", mm.Value != nil}, {"string", mm.String != nil}, {"bool", mm.Bool != nil}, {"present", mm.Present != nil}} {
		if t.set {
			set = append(set, t.name)
		}
	}
	return c.exactlyOne(mp, "value, string, bool or present", set)
}

// matcher compiles one StringMatcher.
func (c *checker) matcher(p string, sm *StringMatcher) (matcher, bool) {
	if !c.oneMatcherKind(p, sm) {
		return matcher{}, false
	}
	switch {
	case sm.Exact != nil:
		return matcher{kind: matchExact, s: *sm.Exact}, true
	case sm.Prefix != nil:
		if *sm.Prefix == "" {
			c.add(p+".prefix", "empty: it would match everything; leave the condition out instead")
			return matcher{}, false
		}
		return matcher{kind: matchPrefix, s: *sm.Prefix}, true
	case sm.Not != nil:
		sub, ok := c.matcher(p+".not", sm.Not)
		return matcher{kind: matchNot, subs: []matcher{sub}}, ok
	case sm.AllOf != nil:
		return c.allOf(p, sm.AllOf)
	}
	return c.regexMatcher(p, *sm.Regex)
}

// oneMatcherKind checks that a StringMatcher sets exactly one of exact,
// prefix, regex, not or all_of.
func (c *checker) oneMatcherKind(p string, sm *StringMatcher) bool {
	var set []string
	if sm.Exact != nil {
		set = append(set, "exact")
	}
	if sm.Prefix != nil {
		set = append(set, "prefix")
	}
	if sm.Regex != nil {
		set = append(set, "regex")
	}
	if sm.Not != nil {
		set = append(set, "not")
	}
	if sm.AllOf != nil {
		set = append(set, "all_of")
	}
	return c.exactlyOne(p, "exact, prefix, regex, not or all_of", set)
}

// allOf compiles an all_of matcher: every one of its matchers, at least one.
func (c *checker) allOf(p string, all []StringMatcher) (matcher, bool) {
	if len(all) == 0 {
		c.add(p+".all_of", "empty: list the matchers that must all hold")
		return matcher{}, false
	}
	m, ok := matcher{kind: matchAll}, true
	for i := range all {
		sub, sok := c.matcher(fmt.Sprintf("%s.all_of[%d]", p, i), &all[i])
		ok = ok && sok
		m.subs = append(m.subs, sub)
	}
	return m, ok
}

// regexMatcher compiles a regex matcher, anchored.
func (c *checker) regexMatcher(p, regex string) (matcher, bool) {
	if _, err := regexp.Compile(regex); err != nil {
		c.add(p+".regex", "does not compile: %v", err)
		return matcher{}, false
	}
	// Anchored, as Envoy's safe_regex: the whole value must match. The
	// non-capturing group keeps the operator's group numbers.
	re, err := regexp.Compile(`^(?:` + regex + `)$`)
	if err != nil {
		c.add(p+".regex", "does not compile anchored: %v", err)
		return matcher{}, false
	}
	return matcher{kind: matchRegex, re: re}, true
}
