package aggregation

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
)

// Rules is a compiled, immutable rule set, safe for concurrent use.
type Rules struct {
	rules []compiledRule // read-only after Compile
}

// compiledRule is a Rule with its regexes compiled and references resolved.
type compiledRule struct {
	name      string
	typeURLs  []string    // empty: any type
	conds     []condition // all must hold
	authority string
	parts     []keyPart
	fixedKey  string       // the key when every part is a literal, else ""
	node      *corev3.Node // the rule's result.node, or nil
	slots     []nodeSlot   // the node fields the key takes values from (upstreamnode.go)
}

// condition tests one field of a request.
type condition struct {
	field field
	m     matcher
}

type matchKind uint8

const (
	matchExact matchKind = iota
	matchPrefix
	matchRegex
)

// matcher is a compiled StringMatcher.
type matcher struct {
	kind matchKind
	s    string         // exact or prefix
	re   *regexp.Regexp // anchored, for matchRegex
}

func (m *matcher) match(v string) bool {
	switch m.kind {
	case matchExact:
		return v == m.s
	case matchPrefix:
		return strings.HasPrefix(v, m.s)
	}
	return m.re.MatchString(v)
}

type partKind uint8

const (
	partLiteral partKind = iota
	partField
	partCapture
)

// keyPart is a compiled GroupPart.
type keyPart struct {
	kind    partKind
	literal string
	field   field          // partField, partCapture
	re      *regexp.Regexp // partCapture: the condition's regex
	group   int            // partCapture: submatch index
}

// Compile compiles rules. It checks everything Validate checks except that
// authorities exist (Compile does not know them), and returns an error
// wrapping ErrInvalidRules that lists every problem.
func Compile(rules []Rule) (*Rules, error) {
	compiled, problems := compile(rules, nil, false)
	if len(problems) > 0 {
		errs := make([]error, len(problems))
		for i, p := range problems {
			errs[i] = p
		}
		return nil, fmt.Errorf("%w: %w", ErrInvalidRules, errors.Join(errs...))
	}
	return &Rules{rules: compiled}, nil
}

// checker collects problems while rules are compiled.
type checker struct {
	problems []FieldError
}

func (c *checker) add(path, format string, args ...any) {
	c.problems = append(c.problems, FieldError{Path: path, Problem: fmt.Sprintf(format, args...)})
}

// regexCondition is a regex condition that captures may refer to.
type regexCondition struct {
	field field
	path  string // of the regex, for problems
	re    *regexp.Regexp
}

// compile walks every rule, compiling what is valid and recording every
// problem with its path. authorities are checked only if checkAuthorities.
func compile(rules []Rule, authorities []string, checkAuthorities bool) ([]compiledRule, []FieldError) {
	c := &checker{}
	out := make([]compiledRule, 0, len(rules))
	names := make(map[string]int, len(rules))
	for i := range rules {
		r := &rules[i]
		p := fmt.Sprintf("rules[%d]", i)
		cr := compiledRule{name: r.Name}

		switch prev, dup := names[r.Name]; {
		case r.Name == "":
			c.add(p+".name", "required")
		case dup:
			c.add(p+".name", "%q is already the name of rules[%d]", r.Name, prev)
		default:
			names[r.Name] = i
		}
		if r.Default && i != len(rules)-1 {
			c.add(p+".default", "the default rule must be the last rule: the rules after it could never match")
		}

		regexes := c.match(&cr, p+".match", &r.Match)
		switch written := r.Match.hasConditions(); {
		case r.Default && written:
			c.add(p+".match", "a default rule matches every request and has no conditions")
		case !r.Default && !written:
			c.add(p+".match", "no conditions: a rule that matches every request is written default: true, as the last rule")
		}
		c.target(&cr, p+".result", &r.Result, regexes, authorities, checkAuthorities)
		out = append(out, cr)
	}
	return out, c.problems
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
	return n.ID != nil || n.Cluster != nil || len(n.Metadata) > 0 ||
		(l != nil && (l.Region != nil || l.Zone != nil || l.SubZone != nil))
}

// match compiles a rule's conditions into cr and returns its regex
// conditions, for captures.
func (c *checker) match(cr *compiledRule, p string, m *Match) []regexCondition {
	var regexes []regexCondition
	addCond := func(f field, path string, sm *StringMatcher) {
		if sm == nil {
			return
		}
		cm, ok := c.matcher(path, sm)
		if !ok {
			return
		}
		cr.conds = append(cr.conds, condition{field: f, m: cm})
		if cm.kind == matchRegex {
			regexes = append(regexes, regexCondition{field: f, path: path + ".regex", re: cm.re})
		}
	}

	for j, t := range m.TypeURLs {
		tp := fmt.Sprintf("%s.type_urls[%d]", p, j)
		if rest, ok := strings.CutPrefix(t, resourcev3.APITypePrefix); !ok || rest == "" {
			c.add(tp, "%q is not a type URL (want %s<message>, e.g. %s)", t, resourcev3.APITypePrefix, resourcev3.ClusterType)
			continue
		}
		cr.typeURLs = append(cr.typeURLs, t)
	}
	addCond(field{kind: fieldResourceName}, p+".resource_name", m.ResourceName)
	n := m.Node
	if n == nil {
		return regexes
	}
	np := p + ".node"
	addCond(field{kind: fieldNodeID}, np+".id", n.ID)
	addCond(field{kind: fieldNodeCluster}, np+".cluster", n.Cluster)
	if l := n.Locality; l != nil {
		addCond(field{kind: fieldRegion}, np+".locality.region", l.Region)
		addCond(field{kind: fieldZone}, np+".locality.zone", l.Zone)
		addCond(field{kind: fieldSubZone}, np+".locality.sub_zone", l.SubZone)
	}
	for j := range n.Metadata {
		mm := &n.Metadata[j]
		mp := fmt.Sprintf("%s.metadata[%d]", np, j)
		keys, ok := splitPath(mm.Path)
		switch {
		case mm.Path == "":
			c.add(mp+".path", "required")
		case !ok:
			c.add(mp+".path", "%q has an empty key (want dot-separated keys, e.g. team.name)", mm.Path)
		}
		if !ok {
			keys = nil
		}
		cm, mok := c.matcher(mp+".value", &mm.Value)
		if !ok || !mok {
			continue
		}
		f := field{kind: fieldMetadata, path: keys}
		cr.conds = append(cr.conds, condition{field: f, m: cm})
		if cm.kind == matchRegex {
			regexes = append(regexes, regexCondition{field: f, path: mp + ".value.regex", re: cm.re})
		}
	}
	return regexes
}

// matcher compiles one StringMatcher.
func (c *checker) matcher(p string, sm *StringMatcher) (matcher, bool) {
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
	switch len(set) {
	case 0:
		c.add(p, "one of exact, prefix or regex is required")
		return matcher{}, false
	case 1:
	default:
		c.add(p, "exactly one of exact, prefix or regex may be set, found %s", strings.Join(set, " and "))
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
	}
	if _, err := regexp.Compile(*sm.Regex); err != nil {
		c.add(p+".regex", "does not compile: %v", err)
		return matcher{}, false
	}
	// Anchored, as Envoy's safe_regex: the whole value must match. The
	// non-capturing group keeps the operator's group numbers.
	re, err := regexp.Compile(`^(?:` + *sm.Regex + `)$`)
	if err != nil {
		c.add(p+".regex", "does not compile anchored: %v", err)
		return matcher{}, false
	}
	return matcher{kind: matchRegex, re: re}, true
}

// target compiles a rule's result into cr.
func (c *checker) target(cr *compiledRule, p string, t *Target, regexes []regexCondition, authorities []string, checkAuthorities bool) {
	switch {
	case t.Authority == "":
		c.add(p+".authority", "required")
	case checkAuthorities && !contains(authorities, t.Authority):
		c.add(p+".authority", "%q is not a configured authority (have: %s)", t.Authority, strings.Join(authorities, ", "))
	}
	cr.authority = t.Authority

	gp := p + ".group"
	if len(t.Group) == 0 {
		c.add(gp, "required: at least one part (a literal alone puts every client the rule matches in one group)")
	}
	literals, fixed := 0, true
	var key strings.Builder
	for j := range t.Group {
		part, ok := c.part(fmt.Sprintf("%s[%d]", gp, j), &t.Group[j], regexes)
		if !ok {
			continue
		}
		if part.kind == partLiteral {
			literals++
			key.WriteString(part.literal)
		} else {
			fixed = false
			if j > 0 && t.Group[j-1].Literal == nil {
				c.add(fmt.Sprintf("%s[%d]", gp, j), "follows another value part with no literal between them: the key would be ambiguous (add e.g. - literal: \"/\")")
			}
		}
		cr.parts = append(cr.parts, part)
	}
	if len(t.Group) > 0 && literals == 0 {
		c.add(gp, "needs at least one literal part, so that no group key is empty (the empty group is the authority's xdstp stream)")
	}
	if fixed {
		cr.fixedKey = key.String()
	}
	cr.slots = nodeSlots(cr.parts)

	if n := t.Node; n != nil {
		if n.ID == "" && n.Cluster == "" {
			c.add(p+".node", "set id or cluster, or leave node out to present the node built from the group key")
		}
		cr.node = &corev3.Node{Id: n.ID, Cluster: n.Cluster}
	}
}

// part compiles one GroupPart.
func (c *checker) part(p string, g *GroupPart, regexes []regexCondition) (keyPart, bool) {
	var set []string
	if g.Literal != nil {
		set = append(set, "literal")
	}
	if g.NodeField != nil {
		set = append(set, "node_field")
	}
	if g.Capture != nil {
		set = append(set, "capture")
	}
	switch len(set) {
	case 0:
		c.add(p, "one of literal, node_field or capture is required")
		return keyPart{}, false
	case 1:
	default:
		c.add(p, "exactly one of literal, node_field or capture may be set, found %s", strings.Join(set, " and "))
		return keyPart{}, false
	}

	switch {
	case g.Literal != nil:
		if *g.Literal == "" {
			c.add(p+".literal", "empty")
			return keyPart{}, false
		}
		return keyPart{kind: partLiteral, literal: *g.Literal}, true
	case g.NodeField != nil:
		f, ok := parseNodeField(*g.NodeField)
		if !ok {
			c.add(p+".node_field", "%q is not a node field (want %s)", *g.NodeField, nodeFieldChoices)
			return keyPart{}, false
		}
		return keyPart{kind: partField, field: f}, true
	}

	cp := g.Capture
	f, ok := parseCaptureFrom(cp.From)
	if !ok {
		if cp.From == "" {
			c.add(p+".capture.from", "required (one of %s)", captureChoices)
		} else {
			c.add(p+".capture.from", "%q is not a request field (want %s)", cp.From, captureChoices)
		}
		return keyPart{}, false
	}
	var rc *regexCondition
	for k := range regexes {
		if regexes[k].field.kind == f.kind && samePath(regexes[k].field.path, f.path) {
			rc = &regexes[k]
			break
		}
	}
	if rc == nil {
		c.add(p+".capture.from", "this rule's match has no valid regex condition on %s", cp.From)
		return keyPart{}, false
	}
	if cp.Group == "" {
		c.add(p+".capture.group", "required: a group number or name of %s", rc.path)
		return keyPart{}, false
	}
	idx, err := strconv.Atoi(cp.Group)
	if err != nil {
		idx = rc.re.SubexpIndex(cp.Group)
		if idx < 0 {
			c.add(p+".capture.group", "%s has no group named %q", rc.path, cp.Group)
			return keyPart{}, false
		}
	} else if idx < 0 || idx > rc.re.NumSubexp() {
		c.add(p+".capture.group", "%s has %d capture groups, not %d", rc.path, rc.re.NumSubexp(), idx)
		return keyPart{}, false
	}
	return keyPart{kind: partCapture, field: f, re: rc.re, group: idx}, true
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
