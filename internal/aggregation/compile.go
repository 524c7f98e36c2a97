package aggregation

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/types/known/structpb"
)

// Rules is a compiled, immutable rule set, safe for concurrent use.
type Rules struct {
	rules     []compiledRule // read-only after Compile
	keep      []keptPath     // the metadata KeepNode keeps; read-only after Compile
	keepEmpty bool           // KeepNode keeps an empty metadata (has_metadata); read-only after Compile
}

// compiledRule is a Rule with its regexes compiled and references resolved.
type compiledRule struct {
	name      string
	typeURLs  []string    // empty: any type
	conds     []condition // all must hold
	refuse    string      // the reason, for a rule whose result refuses
	authority string
	parts     []keyPart
	fixedKey  string       // the key when every part is a literal, else ""
	node      *corev3.Node // the rule's result.node, or nil
	slots     []nodeSlot   // the node fields the key takes values from (upstreamnode.go)
	memo      *groupMemo   // the groups built, when node is nil (groupmemo.go)
}

type condKind uint8

const (
	condValue       condKind = iota // the field's value holds m
	condPresent                     // a metadata path holds any value (want)
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

type partKind uint8

const (
	partLiteral partKind = iota
	partField
	partCapture
	partRewrite
)

// keyPart is a compiled GroupPart.
type keyPart struct {
	kind        partKind
	literal     string
	field       field          // partField, partCapture, partRewrite
	re          *regexp.Regexp // partCapture: the condition's regex; partRewrite: its own
	group       int            // partCapture: submatch index
	replace     string         // partRewrite: the template
	refuseEmpty bool           // an empty value refuses the request
	path        string         // of the part, for refusals
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
	r := &Rules{rules: compiled}
	r.keep, r.keepEmpty = keptPaths(compiled)
	return r, nil
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
		cr := compiledRule{name: r.Name, memo: &groupMemo{}}

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

// exactlyOne checks that set, the names of the fields written at p, has
// exactly one of choices.
func (c *checker) exactlyOne(p, choices string, set []string) bool {
	switch len(set) {
	case 0:
		c.add(p, "one of %s is required", choices)
		return false
	case 1:
		return true
	}
	c.add(p, "exactly one of %s may be set, found %s", choices, strings.Join(set, " and "))
	return false
}

// metadataPath checks a metadata path written as path (dot-separated) or
// keys (a list), exactly one of them, and returns its keys.
func (c *checker) metadataPath(p, path string, keys []string) ([]string, bool) {
	switch {
	case path == "" && len(keys) == 0:
		c.add(p+".path", "required (or keys, a list of keys)")
		return nil, false
	case path != "" && len(keys) > 0:
		c.add(p, "exactly one of path or keys may be set, found path and keys")
		return nil, false
	case path != "":
		k, ok := splitPath(path)
		if !ok {
			c.add(p+".path", "%q has an empty key (want dot-separated keys, e.g. team.name)", path)
		}
		return k, ok
	}
	for i, k := range keys {
		if k == "" {
			c.add(fmt.Sprintf("%s.keys[%d]", p, i), "empty")
			return nil, false
		}
	}
	return keys, true
}

// metadataKeys checks a metadata path written as keys only (a key part,
// a rewrite's from: node.metadata).
func (c *checker) metadataKeys(p string, keys []string, why string) ([]string, bool) {
	if len(keys) == 0 {
		c.add(p+".keys", "required%s", why)
		return nil, false
	}
	return c.metadataPath(p, "", keys)
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

// target compiles a rule's result into cr.
func (c *checker) target(cr *compiledRule, p string, t *Target, regexes []regexCondition, authorities []string, checkAuthorities bool) {
	if t.Refuse != nil {
		c.refuse(cr, p, t)
		return
	}
	switch {
	case t.Authority == "":
		c.add(p+".authority", "required")
	case checkAuthorities && !contains(authorities, t.Authority):
		c.add(p+".authority", "%q is not a configured authority (have: %s)", t.Authority, strings.Join(authorities, ", "))
	}
	cr.authority = t.Authority
	c.group(cr, p+".group", t.Group, regexes)
	cr.slots = nodeSlots(cr.parts)
	if n := t.Node; n != nil {
		c.resultNode(cr, p+".node", n)
	}
}

// refuse compiles a result that refuses (at p) into cr: a reason, and
// nothing served.
func (c *checker) refuse(cr *compiledRule, p string, t *Target) {
	if t.Refuse.Reason == "" {
		c.add(p+".refuse.reason", "required: what the refused client is told")
	}
	cr.refuse = t.Refuse.Reason
	if cr.refuse == "" {
		cr.refuse = "refused"
	}
	for _, f := range []struct {
		name string
		set  bool
	}{{"authority", t.Authority != ""}, {"group", len(t.Group) > 0}, {"node", t.Node != nil}} {
		if f.set {
			c.add(p+"."+f.name, "a rule that refuses serves nothing: leave %s out", f.name)
		}
	}
}

// group compiles a result's group parts (at gp) into cr: at least one
// literal, never two value parts side by side; the key itself when every
// part is a literal.
func (c *checker) group(cr *compiledRule, gp string, group []GroupPart, regexes []regexCondition) {
	if len(group) == 0 {
		c.add(gp, "required: at least one part (a literal alone puts every client the rule matches in one group)")
	}
	literals, fixed := 0, true
	var key strings.Builder
	for j := range group {
		part, ok := c.part(fmt.Sprintf("%s[%d]", gp, j), &group[j], regexes)
		if !ok {
			continue
		}
		if part.kind == partLiteral {
			literals++
			key.WriteString(part.literal)
		} else {
			fixed = false
			if j > 0 && group[j-1].Literal == nil {
				c.add(fmt.Sprintf("%s[%d]", gp, j), "follows another value part with no literal between them: the key would be ambiguous (add e.g. - literal: \"/\")")
			}
		}
		cr.parts = append(cr.parts, part)
	}
	if len(group) > 0 && literals == 0 {
		c.add(gp, "needs at least one literal part, so that no group key is empty (the empty group is the authority's xdstp stream)")
	}
	if fixed {
		cr.fixedKey = key.String()
	}
}

// resultNode compiles a result's node (at np) into cr: the node presented
// upstream, with its metadata as a struct.
func (c *checker) resultNode(cr *compiledRule, np string, n *UpstreamNode) {
	if n.ID == "" && n.Cluster == "" && len(n.Metadata) == 0 {
		c.add(np, "set id, cluster or metadata, or leave node out to present the node built from the group key")
	}
	cr.node = &corev3.Node{Id: n.ID, Cluster: n.Cluster}
	if len(n.Metadata) > 0 {
		m := normalizeYAML(n.Metadata).(map[string]any)
		if at, v := unsupported("", m); at != "" {
			c.add(np+".metadata."+at, "a %T is not a metadata value (want a string, number, bool, null, list or map)", v)
		} else if md, err := structpb.NewStruct(m); err == nil {
			cr.node.Metadata = md
		}
	}
}

// normalizeYAML turns what YAML decodes into what structpb takes: maps
// with non-string keys get string keys, integers stay numbers.
func normalizeYAML(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = normalizeYAML(e)
		}
		return out
	case map[any]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[fmt.Sprint(k)] = normalizeYAML(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = normalizeYAML(e)
		}
		return out
	}
	return v
}

// unsupported returns the path and value of the first value in v that
// is not a metadata value, or "".
func unsupported(path string, v any) (string, any) {
	switch x := v.(type) {
	case nil, string, bool, int, int64, uint64, float64:
		return "", nil
	case map[string]any:
		for k, e := range x {
			p := k
			if path != "" {
				p = path + "." + k
			}
			if at, bad := unsupported(p, e); at != "" {
				return at, bad
			}
		}
		return "", nil
	case []any:
		for i, e := range x {
			if at, bad := unsupported(fmt.Sprintf("%s[%d]", path, i), e); at != "" {
				return at, bad
			}
		}
		return "", nil
	}
	if path == "" {
		path = "."
	}
	return path, v
}

// partChoices lists the kinds of group part, for problems.
const partChoices = "literal, node_field, capture, rewrite or metadata"

// part compiles one GroupPart.
func (c *checker) part(p string, g *GroupPart, regexes []regexCondition) (keyPart, bool) {
	var set []string
	for _, k := range []struct {
		name string
		set  bool
	}{{"literal", g.Literal != nil}, {"node_field", g.NodeField != nil}, {"capture", g.Capture != nil}, {"rewrite", g.Rewrite != nil}, {"metadata", g.Metadata != nil}} {
		if k.set {
			set = append(set, k.name)
		}
	}
	if !c.exactlyOne(p, partChoices, set) {
		return keyPart{}, false
	}
	if g.Literal != nil {
		if g.RefuseEmpty {
			c.add(p+".refuse_empty", "a literal is never empty: refuse_empty is for value parts")
		}
		if *g.Literal == "" {
			c.add(p+".literal", "empty")
			return keyPart{}, false
		}
		return keyPart{kind: partLiteral, literal: *g.Literal}, true
	}
	part, ok := c.valuePart(p, g, regexes)
	part.refuseEmpty, part.path = g.RefuseEmpty, p
	return part, ok
}

// valuePart compiles a GroupPart that takes a value from the request.
func (c *checker) valuePart(p string, g *GroupPart, regexes []regexCondition) (keyPart, bool) {
	switch {
	case g.NodeField != nil:
		f, ok := parseNodeField(*g.NodeField)
		if !ok {
			c.add(p+".node_field", "%q is not a node field (want %s)", *g.NodeField, nodeFieldChoices)
			return keyPart{}, false
		}
		return keyPart{kind: partField, field: f}, true
	case g.Metadata != nil:
		keys, ok := c.metadataKeys(p+".metadata", g.Metadata.Keys, ": the path, a list of keys")
		typ, tok := c.valueType(p+".metadata.type", g.Metadata.Type)
		if !ok || !tok {
			return keyPart{}, false
		}
		return keyPart{kind: partField, field: field{kind: fieldMetadata, path: keys, typ: typ}}, true
	case g.Rewrite != nil:
		return c.rewrite(p+".rewrite", g.Rewrite)
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
	return keyPart{kind: partCapture, field: rc.field, re: rc.re, group: idx}, true
}

// valueType parses a metadata value type.
func (c *checker) valueType(p, t string) (valueType, bool) {
	switch t {
	case "string":
		return typeString, true
	case "bool":
		return typeBool, true
	case "number":
		return typeNumber, true
	case "":
		c.add(p, "required: string, bool or number")
	default:
		c.add(p, "%q is not a metadata type (want string, bool or number)", t)
	}
	return typeAny, false
}

// rewrite compiles a rewrite part.
func (c *checker) rewrite(p string, rw *Rewrite) (keyPart, bool) {
	ok := true
	var f field
	switch {
	case rw.From == "":
		c.add(p+".from", "required (one of %s, or node.metadata with keys and type)", captureChoices)
		ok = false
	case rw.From == nodePrefix+"metadata":
		keys, kok := c.metadataKeys(p, rw.Keys, " with from: node.metadata")
		typ, tok := c.valueType(p+".type", rw.Type)
		f, ok = field{kind: fieldMetadata, path: keys, typ: typ}, kok && tok
	default:
		var fok bool
		f, fok = parseCaptureFrom(rw.From)
		if !fok {
			c.add(p+".from", "%q is not a request field (want %s, or node.metadata with keys and type)", rw.From, captureChoices)
			ok = false
		}
		if len(rw.Keys) > 0 || rw.Type != "" {
			c.add(p, "keys and type are for from: node.metadata")
			ok = false
		}
	}
	if rw.Regex == "" {
		c.add(p+".regex", "required")
		return keyPart{}, false
	}
	re, err := regexp.Compile(rw.Regex)
	if err != nil {
		c.add(p+".regex", "does not compile: %v", err)
		return keyPart{}, false
	}
	for _, ref := range templateRefs(rw.Replace) {
		if _, err := strconv.Atoi(ref); err == nil {
			if n, _ := strconv.Atoi(ref); n <= re.NumSubexp() {
				continue
			}
		} else if re.SubexpIndex(ref) >= 0 {
			continue
		}
		c.add(p+".replace", "refers to group %q, which the regex does not have (it has %d; write ${1}x for group 1 followed by x)", ref, re.NumSubexp())
		ok = false
	}
	return keyPart{kind: partRewrite, field: f, re: re, replace: rw.Replace}, ok
}

// templateRefs lists the group names and numbers a replacement template
// refers to, as Regexp.Expand reads it: $name takes the longest run of
// letters, digits and underscores; ${name} is braced; $$ is a "$".
func templateRefs(t string) []string {
	var refs []string
	for i := 0; i < len(t); i++ {
		if t[i] != '$' || i+1 >= len(t) {
			continue
		}
		i++
		if t[i] == '$' {
			continue
		}
		if t[i] == '{' {
			end := strings.IndexByte(t[i:], '}')
			if end < 0 {
				continue // not a reference: Expand copies it
			}
			if name := t[i+1 : i+end]; IsTemplateName(name) {
				refs = append(refs, name)
			}
			i += end
			continue
		}
		j := i
		for j < len(t) && IsTemplateNameByte(t[j]) {
			j++
		}
		if j > i {
			refs = append(refs, t[i:j])
			i = j - 1
		}
	}
	return refs
}

// IsTemplateName reports whether s is a group name or number a
// replacement template may refer to (Regexp.Expand's rule: letters,
// digits and underscores).
func IsTemplateName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !IsTemplateNameByte(s[i]) {
			return false
		}
	}
	return true
}

// IsTemplateNameByte reports whether b may be part of a template's group
// name: $name takes the longest run of such bytes.
func IsTemplateNameByte(b byte) bool {
	return b == '_' || b >= '0' && b <= '9' || b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z'
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
