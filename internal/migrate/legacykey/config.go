package legacykey

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"

	"go.yaml.in/yaml/v3"
)

// The earlier relay's rules file, field for field (snake_case names; its
// loader also took camelCase, which this one does not). Decoding is strict.

// Config is a KeyerConfiguration: the fragments of the key, in order.
type Config struct {
	Fragments []Fragment `yaml:"fragments,omitempty"`
}

// Fragment is one piece of the key.
type Fragment struct {
	Rules []FragmentRule `yaml:"rules,omitempty"`
}

// FragmentRule (a legacy fragment's rule) contributes its result to its
// fragment when its match is true.
type FragmentRule struct {
	Match  *MatchPredicate  `yaml:"match,omitempty"`
	Result *ResultPredicate `yaml:"result,omitempty"`
}

// StringMatch is exact_match or regex_match (unanchored: a match anywhere).
// An empty exact_match counts as unset, as in the earlier relay.
type StringMatch struct {
	ExactMatch *string `yaml:"exact_match,omitempty"`
	RegexMatch *string `yaml:"regex_match,omitempty"`
}

// BoolMatch compares a metadata value's bool (false for a non-bool).
type BoolMatch struct {
	ValueMatch bool `yaml:"value_match,omitempty"`
}

// LocalityMatch tests the locality fields it sets.
type LocalityMatch struct {
	Region  *StringMatch `yaml:"region,omitempty"`
	Zone    *StringMatch `yaml:"zone,omitempty"`
	SubZone *StringMatch `yaml:"sub_zone,omitempty"`
}

// PathSegment is one key of a metadata path.
type PathSegment struct {
	Key string `yaml:"key,omitempty"`
}

// StructValueMatch is string_match or bool_match.
type StructValueMatch struct {
	StringMatch *StringMatch `yaml:"string_match,omitempty"`
	BoolMatch   *BoolMatch   `yaml:"bool_match,omitempty"`
}

// NodeMetadataMatch tests the metadata value at Path.
type NodeMetadataMatch struct {
	Path  []PathSegment     `yaml:"path,omitempty"`
	Match *StructValueMatch `yaml:"match,omitempty"`
}

// MatchPredicate is exactly one of its fields.
type MatchPredicate struct {
	AndMatch         *MatchSet         `yaml:"and_match,omitempty"`
	OrMatch          *MatchSet         `yaml:"or_match,omitempty"`
	NotMatch         *MatchPredicate   `yaml:"not_match,omitempty"`
	AnyMatch         *bool             `yaml:"any_match,omitempty"`
	RequestTypeMatch *RequestTypeMatch `yaml:"request_type_match,omitempty"`
	RequestNodeMatch *RequestNodeMatch `yaml:"request_node_match,omitempty"`
}

// MatchSet is the operands of and_match and or_match.
type MatchSet struct {
	Rules []MatchPredicate `yaml:"rules,omitempty"`
}

// RequestTypeMatch holds when the request's type URL is one of Types.
type RequestTypeMatch struct {
	Types []string `yaml:"types,omitempty"`
}

// RequestNodeMatch is exactly one node field test.
type RequestNodeMatch struct {
	IDMatch           *StringMatch       `yaml:"id_match,omitempty"`
	ClusterMatch      *StringMatch       `yaml:"cluster_match,omitempty"`
	LocalityMatch     *LocalityMatch     `yaml:"locality_match,omitempty"`
	NodeMetadataMatch *NodeMetadataMatch `yaml:"node_metadata_match,omitempty"`
}

// ResultPredicate is exactly one of its fields.
type ResultPredicate struct {
	AndResult             *AndResult             `yaml:"and_result,omitempty"`
	RequestNodeFragment   *RequestNodeFragment   `yaml:"request_node_fragment,omitempty"`
	ResourceNamesFragment *ResourceNamesFragment `yaml:"resource_names_fragment,omitempty"`
	StringFragment        *string                `yaml:"string_fragment,omitempty"`
}

// ResultAction is exact (the value itself) or regex_action.
type ResultAction struct {
	Exact       *bool        `yaml:"exact,omitempty"`
	RegexAction *RegexAction `yaml:"regex_action,omitempty"`
}

// RegexAction replaces every match of Pattern (unanchored) with Replace.
type RegexAction struct {
	Pattern string `yaml:"pattern,omitempty"`
	Replace string `yaml:"replace,omitempty"`
}

// LocalityResultAction takes the locality fields it sets, joined with "|".
type LocalityResultAction struct {
	RegionAction  *ResultAction `yaml:"region_action,omitempty"`
	ZoneAction    *ResultAction `yaml:"zone_action,omitempty"`
	SubzoneAction *ResultAction `yaml:"subzone_action,omitempty"`
}

// NodeMetadataAction takes the string at Path.
type NodeMetadataAction struct {
	Path   []PathSegment `yaml:"path,omitempty"`
	Action *ResultAction `yaml:"action,omitempty"`
}

// AndResult concatenates its results with nothing between them.
type AndResult struct {
	ResultPredicates []ResultPredicate `yaml:"result_predicates,omitempty"`
}

// RequestNodeFragment is exactly one node field action.
type RequestNodeFragment struct {
	IDAction           *ResultAction         `yaml:"id_action,omitempty"`
	ClusterAction      *ResultAction         `yaml:"cluster_action,omitempty"`
	LocalityAction     *LocalityResultAction `yaml:"locality_action,omitempty"`
	NodeMetadataAction *NodeMetadataAction   `yaml:"node_metadata_action,omitempty"`
}

// ResourceNamesFragment takes the resource name at Element.
type ResourceNamesFragment struct {
	Element int32         `yaml:"element,omitempty"`
	Action  *ResultAction `yaml:"action,omitempty"`
}

// Parse decodes a rules file strictly and checks what the earlier relay's
// loader checked (required fields, one of each oneof, list minimums),
// returning every problem with its path.
func Parse(data []byte) (*Config, error) {
	var c Config
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("fragments: required (the file is empty)")
		}
		return nil, readable(err)
	}
	v := &validator{}
	v.config(&c)
	if len(v.problems) > 0 {
		return nil, errors.Join(v.problems...)
	}
	return &c, nil
}

type validator struct{ problems []error }

func (v *validator) add(path, format string, args ...any) {
	v.problems = append(v.problems, fmt.Errorf("%s: %s", path, fmt.Sprintf(format, args...)))
}

// oneOf checks that exactly one of set is true.
func (v *validator) oneOf(path string, names []string, set ...bool) {
	n := 0
	for _, s := range set {
		if s {
			n++
		}
	}
	switch {
	case n == 0:
		v.add(path, "one of %v is required", names)
	case n > 1:
		v.add(path, "only one of %v may be set", names)
	}
}

func (v *validator) config(c *Config) {
	if len(c.Fragments) == 0 {
		v.add("fragments", "at least one fragment is required")
	}
	for i, f := range c.Fragments {
		fp := fmt.Sprintf("fragments[%d]", i)
		if len(f.Rules) == 0 {
			v.add(fp+".rules", "at least one rule is required")
		}
		for j, r := range f.Rules {
			rp := fmt.Sprintf("%s.rules[%d]", fp, j)
			if r.Match == nil {
				v.add(rp+".match", "required")
			} else {
				v.match(rp+".match", r.Match)
			}
			if r.Result == nil {
				v.add(rp+".result", "required")
			} else {
				v.result(rp+".result", r.Result)
			}
		}
	}
}

func (v *validator) match(p string, m *MatchPredicate) {
	v.oneOf(p, []string{"and_match", "or_match", "not_match", "any_match", "request_type_match", "request_node_match"},
		m.AndMatch != nil, m.OrMatch != nil, m.NotMatch != nil, m.AnyMatch != nil, m.RequestTypeMatch != nil, m.RequestNodeMatch != nil)
	switch {
	case m.AndMatch != nil:
		v.set(p+".and_match", m.AndMatch)
	case m.OrMatch != nil:
		v.set(p+".or_match", m.OrMatch)
	case m.NotMatch != nil:
		v.match(p+".not_match", m.NotMatch)
	case m.AnyMatch != nil:
		if !*m.AnyMatch {
			v.add(p+".any_match", "must be true")
		}
	case m.RequestTypeMatch != nil:
		if len(m.RequestTypeMatch.Types) == 0 {
			v.add(p+".request_type_match.types", "at least one type is required")
		}
	case m.RequestNodeMatch != nil:
		n, np := m.RequestNodeMatch, p+".request_node_match"
		v.oneOf(np, []string{"id_match", "cluster_match", "locality_match", "node_metadata_match"},
			n.IDMatch != nil, n.ClusterMatch != nil, n.LocalityMatch != nil, n.NodeMetadataMatch != nil)
		v.stringMatch(np+".id_match", n.IDMatch)
		v.stringMatch(np+".cluster_match", n.ClusterMatch)
		if l := n.LocalityMatch; l != nil {
			v.stringMatch(np+".locality_match.region", l.Region)
			v.stringMatch(np+".locality_match.zone", l.Zone)
			v.stringMatch(np+".locality_match.sub_zone", l.SubZone)
		}
		if md := n.NodeMetadataMatch; md != nil {
			mp := np + ".node_metadata_match"
			v.path(mp+".path", md.Path)
			if md.Match == nil {
				v.add(mp+".match", "required")
			} else {
				v.oneOf(mp+".match", []string{"string_match", "bool_match"}, md.Match.StringMatch != nil, md.Match.BoolMatch != nil)
				v.stringMatch(mp+".match.string_match", md.Match.StringMatch)
			}
		}
	}
}

func (v *validator) set(p string, s *MatchSet) {
	if len(s.Rules) < 2 {
		v.add(p+".rules", "at least two rules are required")
	}
	for i := range s.Rules {
		v.match(fmt.Sprintf("%s.rules[%d]", p, i), &s.Rules[i])
	}
}

func (v *validator) stringMatch(p string, s *StringMatch) {
	if s != nil {
		v.oneOf(p, []string{"exact_match", "regex_match"}, s.ExactMatch != nil, s.RegexMatch != nil)
	}
}

func (v *validator) path(p string, segs []PathSegment) {
	if len(segs) == 0 {
		v.add(p, "at least one segment is required")
	}
	for i, s := range segs {
		if s.Key == "" {
			v.add(fmt.Sprintf("%s[%d].key", p, i), "required")
		}
	}
}

func (v *validator) result(p string, r *ResultPredicate) {
	v.oneOf(p, []string{"and_result", "request_node_fragment", "resource_names_fragment", "string_fragment"},
		r.AndResult != nil, r.RequestNodeFragment != nil, r.ResourceNamesFragment != nil, r.StringFragment != nil)
	switch {
	case r.AndResult != nil:
		if len(r.AndResult.ResultPredicates) < 2 {
			v.add(p+".and_result.result_predicates", "at least two results are required")
		}
		for i := range r.AndResult.ResultPredicates {
			v.result(fmt.Sprintf("%s.and_result.result_predicates[%d]", p, i), &r.AndResult.ResultPredicates[i])
		}
	case r.RequestNodeFragment != nil:
		n, np := r.RequestNodeFragment, p+".request_node_fragment"
		v.oneOf(np, []string{"id_action", "cluster_action", "locality_action", "node_metadata_action"},
			n.IDAction != nil, n.ClusterAction != nil, n.LocalityAction != nil, n.NodeMetadataAction != nil)
		v.action(np+".id_action", n.IDAction, false)
		v.action(np+".cluster_action", n.ClusterAction, false)
		if l := n.LocalityAction; l != nil {
			v.action(np+".locality_action.region_action", l.RegionAction, false)
			v.action(np+".locality_action.zone_action", l.ZoneAction, false)
			v.action(np+".locality_action.subzone_action", l.SubzoneAction, false)
		}
		if md := n.NodeMetadataAction; md != nil {
			v.path(np+".node_metadata_action.path", md.Path)
			v.action(np+".node_metadata_action.action", md.Action, true)
		}
	case r.ResourceNamesFragment != nil:
		rp := p + ".resource_names_fragment"
		if r.ResourceNamesFragment.Element < 0 {
			v.add(rp+".element", "must not be negative")
		}
		v.action(rp+".action", r.ResourceNamesFragment.Action, true)
	}
}

func (v *validator) action(p string, a *ResultAction, required bool) {
	if a == nil {
		if required {
			v.add(p, "required")
		}
		return
	}
	v.oneOf(p, []string{"exact", "regex_action"}, a.Exact != nil, a.RegexAction != nil)
	if a.Exact != nil && !*a.Exact {
		v.add(p+".exact", "must be true")
	}
	if a.RegexAction != nil && a.RegexAction.Pattern == "" {
		v.add(p+".regex_action.pattern", "required")
	}
}

// readable rewrites the decoder's errors, which name this package's Go
// types ("field x not found in type legacykey.FragmentRule"), in the file's own
// terms: `line 5: unknown key "x"`, `line 4: a list where a string goes`.
func readable(err error) error {
	te, ok := err.(*yaml.TypeError)
	if !ok {
		return fmt.Errorf("%s", strings.TrimPrefix(err.Error(), "yaml: "))
	}
	msgs := make([]string, len(te.Errors))
	for i, m := range te.Errors {
		if sub := unknownField.FindStringSubmatch(m); sub != nil {
			m = fmt.Sprintf("%s: unknown key %q", sub[1], sub[2])
		} else if sub := wrongKind.FindStringSubmatch(m); sub != nil {
			m = fmt.Sprintf("%s: %s where %s goes", sub[1], kindName(sub[2], sub[3]), goTypeName(sub[4]))
		}
		msgs[i] = m
	}
	return errors.New(strings.Join(msgs, "; "))
}

var (
	unknownField = regexp.MustCompile(`^(line \d+): field (\S+) not found in type \S+$`)
	wrongKind    = regexp.MustCompile("^(line \\d+): cannot unmarshal (!!\\w+)(?: `(.*)`)? into (\\S+)$")
)

// kindName says what a YAML tag is, with its text for a scalar.
func kindName(tag, text string) string {
	switch tag {
	case "!!seq":
		return "a list"
	case "!!map":
		return "a mapping"
	}
	return fmt.Sprintf("%s %q", strings.TrimPrefix(tag, "!!"), text)
}

// goTypeName says what a Go type holds: a string, a number, a list, a
// mapping (this package's structs), a bool.
func goTypeName(t string) string {
	switch {
	case strings.HasPrefix(t, "[]"):
		return "a list"
	case t == "string":
		return "a string"
	case t == "bool":
		return "true or false"
	case strings.HasPrefix(t, "int") || strings.HasPrefix(t, "uint"):
		return "a whole number"
	}
	return "a mapping"
}
