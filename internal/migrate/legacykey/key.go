package legacykey

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/types/known/structpb"
)

// Request is what the earlier relay keyed: one discovery request, with all
// of its resource names.
type Request struct {
	TypeURL string
	Names   []string
	Node    *corev3.Node
}

// Errors the earlier relay refused a request with. Others wrap a regex's
// compile error.
var (
	ErrNoTypeURL        = errors.New("typeURL is empty")
	ErrEDSWithoutNames  = errors.New("resource names is empty")
	ErrNoFragment       = errors.New("no fragment matched: cannot map the request to a key")
	ErrNoMetadata       = errors.New("node metadata is empty")
	ErrEmptyFragment    = errors.New("a result is empty")
	ErrNoSuchElement    = errors.New("resource_names_fragment element is out of range")
	ErrNoSuchPath       = errors.New("metadata path does not exist")
	ErrNoLocalityAction = errors.New("locality_action sets no field")
)

// edsTypes are the types whose requests without names were refused.
var edsTypes = map[string]bool{
	"type.googleapis.com/envoy.api.v2.ClusterLoadAssignment":             true,
	"type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment": true,
}

// Separator joins the fragments' results.
const Separator = "_"

// Keyer builds keys from a Config. Safe for concurrent use.
type Keyer struct {
	c       *Config
	mu      sync.Mutex
	regexes map[string]*regexp.Regexp // guarded by mu; compile results, for speed only
	bad     map[string]error          // guarded by mu
}

// New returns a Keyer for c.
func New(c *Config) *Keyer {
	return &Keyer{c: c, regexes: map[string]*regexp.Regexp{}, bad: map[string]error{}}
}

// regex compiles pattern (cached); the earlier relay compiled at each use,
// so a pattern that does not compile fails each request that reaches it.
func (k *Keyer) regex(pattern string) (*regexp.Regexp, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if re, ok := k.regexes[pattern]; ok {
		return re, nil
	}
	if err, ok := k.bad[pattern]; ok {
		return nil, err
	}
	re, err := regexp.Compile(pattern)
	if err != nil {
		k.bad[pattern] = err
		return nil, err
	}
	k.regexes[pattern] = re
	return re, nil
}

// Key returns the key the earlier relay built for req, or the error it
// refused req with. Every rule of every fragment is tried in order; each
// that matches contributes its result; the results are joined with "_".
func (k *Keyer) Key(req Request) (string, error) {
	if req.TypeURL == "" {
		return "", ErrNoTypeURL
	}
	if edsTypes[req.TypeURL] && len(req.Names) == 0 {
		return "", ErrEDSWithoutNames
	}
	var results []string
	for i := range k.c.Fragments {
		for j := range k.c.Fragments[i].Rules {
			r := &k.c.Fragments[i].Rules[j]
			ok, err := k.match(r.Match, &req)
			if err != nil {
				return "", fmt.Errorf("fragments[%d].rules[%d].match: %w", i, j, err)
			}
			if !ok {
				continue
			}
			s, err := k.result(r.Result, &req)
			if err != nil {
				return "", fmt.Errorf("fragments[%d].rules[%d].result: %w", i, j, err)
			}
			results = append(results, s)
		}
	}
	if len(results) == 0 {
		return "", ErrNoFragment
	}
	return strings.Join(results, Separator), nil
}

// match evaluates a predicate; and/or stop at the first operand that
// decides, so an error in a later operand is not reached.
func (k *Keyer) match(m *MatchPredicate, req *Request) (bool, error) {
	switch {
	case m.RequestNodeMatch != nil:
		return k.nodeMatch(m.RequestNodeMatch, req.Node)
	case m.AndMatch != nil:
		for i := range m.AndMatch.Rules {
			ok, err := k.match(&m.AndMatch.Rules[i], req)
			if err != nil || !ok {
				return false, err
			}
		}
		return true, nil
	case m.OrMatch != nil:
		for i := range m.OrMatch.Rules {
			ok, err := k.match(&m.OrMatch.Rules[i], req)
			if err != nil || ok {
				return ok, err
			}
		}
		return false, nil
	case m.NotMatch != nil:
		ok, err := k.match(m.NotMatch, req)
		return !ok && err == nil, err
	case m.RequestTypeMatch != nil:
		for _, t := range m.RequestTypeMatch.Types {
			if t == req.TypeURL {
				return true, nil
			}
		}
		return false, nil
	}
	return m.AnyMatch != nil && *m.AnyMatch, nil
}

func (k *Keyer) nodeMatch(n *RequestNodeMatch, node *corev3.Node) (bool, error) {
	switch {
	case n.IDMatch != nil:
		return k.stringMatch(n.IDMatch, node.GetId())
	case n.ClusterMatch != nil:
		return k.stringMatch(n.ClusterMatch, node.GetCluster())
	case n.LocalityMatch != nil:
		// The locality is never absent: an unset one has empty fields.
		l := node.GetLocality()
		for _, f := range []struct {
			m *StringMatch
			v string
		}{{n.LocalityMatch.Region, l.GetRegion()}, {n.LocalityMatch.Zone, l.GetZone()}, {n.LocalityMatch.SubZone, l.GetSubZone()}} {
			if f.m == nil {
				continue
			}
			ok, err := k.stringMatch(f.m, f.v)
			if err != nil || !ok {
				return false, err
			}
		}
		return true, nil
	case n.NodeMetadataMatch != nil:
		return k.metadataMatch(n.NodeMetadataMatch, node.GetMetadata())
	}
	return false, errors.New("request_node_match is empty")
}

// stringMatch: an empty exact_match counts as unset, and an unset (or
// empty) regex_match matches nothing; a regex matches anywhere in v.
func (k *Keyer) stringMatch(m *StringMatch, v string) (bool, error) {
	if m.ExactMatch != nil && *m.ExactMatch != "" {
		return v == *m.ExactMatch, nil
	}
	if m.RegexMatch != nil && *m.RegexMatch != "" {
		re, err := k.regex(*m.RegexMatch)
		if err != nil {
			return false, err
		}
		return re.MatchString(v), nil
	}
	return false, nil
}

// metadataMatch: a node without metadata is an error; an absent path, or a
// non-struct on the way, does not match; string_match sees a non-string
// as "", bool_match sees a non-bool as false.
func (k *Keyer) metadataMatch(m *NodeMetadataMatch, md *structpb.Struct) (bool, error) {
	if md == nil {
		return false, ErrNoMetadata
	}
	var v *structpb.Value
	for i, seg := range m.Path {
		if i > 0 {
			if md = v.GetStructValue(); md == nil {
				return false, nil
			}
		}
		if v = md.GetFields()[seg.Key]; v == nil {
			return false, nil
		}
	}
	if m.Match.StringMatch != nil {
		return k.stringMatch(m.Match.StringMatch, v.GetStringValue())
	}
	return v.GetBoolValue() == m.Match.BoolMatch.ValueMatch, nil
}

// result computes a matching rule's contribution.
func (k *Keyer) result(r *ResultPredicate, req *Request) (string, error) {
	switch {
	case r.RequestNodeFragment != nil:
		return k.nodeFragment(r.RequestNodeFragment, req.Node)
	case r.AndResult != nil:
		var b strings.Builder
		for i := range r.AndResult.ResultPredicates {
			s, err := k.result(&r.AndResult.ResultPredicates[i], req)
			if err != nil {
				return "", err
			}
			b.WriteString(s)
		}
		return b.String(), nil
	case r.ResourceNamesFragment != nil:
		e := r.ResourceNamesFragment.Element
		if e < 0 || int(e) >= len(req.Names) {
			return "", ErrNoSuchElement
		}
		return k.action(r.ResourceNamesFragment.Action, req.Names[e])
	case r.StringFragment != nil:
		return *r.StringFragment, nil
	}
	return "", nil
}

func (k *Keyer) nodeFragment(f *RequestNodeFragment, node *corev3.Node) (string, error) {
	switch {
	case f.IDAction != nil:
		return k.action(f.IDAction, node.GetId())
	case f.ClusterAction != nil:
		return k.action(f.ClusterAction, node.GetCluster())
	case f.LocalityAction != nil:
		l := node.GetLocality()
		var parts []string
		for _, a := range []struct {
			a *ResultAction
			v string
		}{{f.LocalityAction.RegionAction, l.GetRegion()}, {f.LocalityAction.ZoneAction, l.GetZone()}, {f.LocalityAction.SubzoneAction, l.GetSubZone()}} {
			if a.a == nil {
				continue
			}
			s, err := k.action(a.a, a.v)
			if err != nil {
				return "", err
			}
			parts = append(parts, s)
		}
		if len(parts) == 0 {
			return "", ErrNoLocalityAction
		}
		return strings.Join(parts, "|"), nil
	case f.NodeMetadataAction != nil:
		md := node.GetMetadata()
		var v *structpb.Value
		for _, seg := range f.NodeMetadataAction.Path {
			if v = md.GetFields()[seg.Key]; v == nil {
				return "", ErrNoSuchPath
			}
			md = v.GetStructValue()
		}
		return k.action(f.NodeMetadataAction.Action, v.GetStringValue())
	}
	return "", nil
}

// action: exact is the value, an error when empty; regex_action replaces
// every match of its pattern, an error when the result is empty.
func (k *Keyer) action(a *ResultAction, v string) (string, error) {
	if a.Exact != nil && *a.Exact {
		if v == "" {
			return "", ErrEmptyFragment
		}
		return v, nil
	}
	re, err := k.regex(a.RegexAction.GetPattern())
	if err != nil {
		return "", err
	}
	out := re.ReplaceAllString(v, a.RegexAction.GetReplace())
	if out == "" {
		return "", ErrEmptyFragment
	}
	return out, nil
}

// GetPattern returns the pattern, "" for nil.
func (r *RegexAction) GetPattern() string {
	if r == nil {
		return ""
	}
	return r.Pattern
}

// GetReplace returns the replacement, "" for nil.
func (r *RegexAction) GetReplace() string {
	if r == nil {
		return ""
	}
	return r.Replace
}
