package csds

import (
	"fmt"
	"regexp"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	statusv3 "github.com/envoyproxy/go-control-plane/envoy/service/status/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/protobuf/types/known/structpb"
)

// Limits on what one request's selection may ask for: checked before
// anything is compiled, so a request cannot make the relay build much.
const (
	// MaxNodeMatchers bounds node_matchers in one request.
	MaxNodeMatchers = 64
	// maxMatcherDepth bounds the nesting of list_match and or_match, and
	// the path length of a node_metadatas matcher.
	maxMatcherDepth = 16
	// maxRegexLength bounds a safe_regex pattern (Go's RE2 matches in
	// linear time; this bounds the compile).
	maxRegexLength = 4096
)

// selector decides which clients a request selects.
type selector func(*corev3.Node) bool

// compileRequest builds the selector of a ClientStatusRequest: a client
// is selected when any node matcher matches its node (none: every client)
// and, when the request sets node, its node id and cluster equal the
// request's (each only when set). Errors name the field.
func compileRequest(req *statusv3.ClientStatusRequest) (selector, error) {
	ms := req.GetNodeMatchers()
	if len(ms) > MaxNodeMatchers {
		return nil, fmt.Errorf("%w: node_matchers: %d, at most %d", ErrBadRequest, len(ms), MaxNodeMatchers)
	}
	var any []selector
	for i, m := range ms {
		s, err := compileNodeMatcher(m)
		if err != nil {
			return nil, fmt.Errorf("%w: node_matchers[%d].%v", ErrBadRequest, i, err)
		}
		any = append(any, s)
	}
	id, cluster := req.GetNode().GetId(), req.GetNode().GetCluster()
	return func(n *corev3.Node) bool {
		if id != "" && n.GetId() != id {
			return false
		}
		if cluster != "" && n.GetCluster() != cluster {
			return false
		}
		if len(any) == 0 {
			return true
		}
		for _, s := range any {
			if s(n) {
				return true
			}
		}
		return false
	}, nil
}

// compileNodeMatcher: node_id (when set) and every node_metadatas entry
// must match.
func compileNodeMatcher(m *matcherv3.NodeMatcher) (selector, error) {
	var id func(string) bool
	if m.GetNodeId() != nil {
		f, err := compileString(m.GetNodeId())
		if err != nil {
			return nil, fmt.Errorf("node_id: %v", err)
		}
		id = f
	}
	var mds []func(*structpb.Struct) bool
	for j, sm := range m.GetNodeMetadatas() {
		f, err := compileStruct(sm)
		if err != nil {
			return nil, fmt.Errorf("node_metadatas[%d].%v", j, err)
		}
		mds = append(mds, f)
	}
	return func(n *corev3.Node) bool {
		if id != nil && !id(n.GetId()) {
			return false
		}
		for _, f := range mds {
			if !f(n.GetMetadata()) {
				return false
			}
		}
		return true
	}, nil
}

// compileString follows StringMatcher: exact, prefix, suffix, contains
// (each with ignore_case) and safe_regex (the whole string must match).
// custom matchers are extensions the relay does not have.
func compileString(m *matcherv3.StringMatcher) (func(string) bool, error) {
	fold := m.GetIgnoreCase()
	norm := func(s string) string {
		if fold {
			return strings.ToLower(s)
		}
		return s
	}
	switch p := m.GetMatchPattern().(type) {
	case *matcherv3.StringMatcher_Exact:
		want := p.Exact
		if fold {
			return func(s string) bool { return strings.EqualFold(s, want) }, nil
		}
		return func(s string) bool { return s == want }, nil
	case *matcherv3.StringMatcher_Prefix:
		want := norm(p.Prefix)
		return func(s string) bool { return strings.HasPrefix(norm(s), want) }, nil
	case *matcherv3.StringMatcher_Suffix:
		want := norm(p.Suffix)
		return func(s string) bool { return strings.HasSuffix(norm(s), want) }, nil
	case *matcherv3.StringMatcher_Contains:
		want := norm(p.Contains)
		return func(s string) bool { return strings.Contains(norm(s), want) }, nil
	case *matcherv3.StringMatcher_SafeRegex:
		expr := p.SafeRegex.GetRegex()
		if len(expr) > maxRegexLength {
			return nil, fmt.Errorf("safe_regex: %d bytes, at most %d", len(expr), maxRegexLength)
		}
		re, err := regexp.Compile(`^(?:` + expr + `)$`)
		if err != nil {
			return nil, fmt.Errorf("safe_regex: %v", err)
		}
		// ignore_case does not apply to safe_regex (as in Envoy): say (?i).
		return re.MatchString, nil
	case *matcherv3.StringMatcher_Custom:
		return nil, fmt.Errorf("custom: extension matchers are not supported")
	default:
		return nil, fmt.Errorf("no match pattern set")
	}
}

// compileStruct follows StructMatcher over node.metadata: the value at
// path (each segment a key into a Struct) must match value.
func compileStruct(m *matcherv3.StructMatcher) (func(*structpb.Struct) bool, error) {
	path := m.GetPath()
	if len(path) == 0 {
		return nil, fmt.Errorf("path: empty")
	}
	if len(path) > maxMatcherDepth {
		return nil, fmt.Errorf("path: %d segments, at most %d", len(path), maxMatcherDepth)
	}
	keys := make([]string, len(path))
	for i, seg := range path {
		k, ok := seg.GetSegment().(*matcherv3.StructMatcher_PathSegment_Key)
		if !ok {
			return nil, fmt.Errorf("path[%d]: no key", i)
		}
		keys[i] = k.Key
	}
	if m.GetValue() == nil {
		return nil, fmt.Errorf("value: not set")
	}
	val, err := compileValue(m.GetValue(), 0)
	if err != nil {
		return nil, fmt.Errorf("value.%v", err)
	}
	return func(st *structpb.Struct) bool { return val(lookup(st, keys)) }, nil
}

// lookup returns the value at keys in st, nil when the path does not lead
// to one.
func lookup(st *structpb.Struct, keys []string) *structpb.Value {
	var v *structpb.Value
	for i, k := range keys {
		if i > 0 {
			st = v.GetStructValue()
		}
		if st == nil {
			return nil
		}
		next, ok := st.GetFields()[k]
		if !ok {
			return nil
		}
		v = next
	}
	return v
}

// compileValue follows ValueMatcher. A path that leads nowhere (v nil)
// matches nothing, present_match included.
func compileValue(m *matcherv3.ValueMatcher, depth int) (func(*structpb.Value) bool, error) {
	if depth > maxMatcherDepth {
		return nil, fmt.Errorf("nested more than %d deep", maxMatcherDepth)
	}
	switch p := m.GetMatchPattern().(type) {
	case *matcherv3.ValueMatcher_NullMatch_:
		return func(v *structpb.Value) bool {
			_, ok := v.GetKind().(*structpb.Value_NullValue)
			return ok
		}, nil
	case *matcherv3.ValueMatcher_DoubleMatch:
		return compileDouble(p.DoubleMatch), nil
	case *matcherv3.ValueMatcher_StringMatch:
		return compileStringValue(p.StringMatch)
	case *matcherv3.ValueMatcher_BoolMatch:
		want := p.BoolMatch
		return func(v *structpb.Value) bool {
			b, ok := v.GetKind().(*structpb.Value_BoolValue)
			return ok && b.BoolValue == want
		}, nil
	case *matcherv3.ValueMatcher_PresentMatch:
		want := p.PresentMatch
		return func(v *structpb.Value) bool { return want && v.GetKind() != nil }, nil
	case *matcherv3.ValueMatcher_ListMatch:
		return compileList(p.ListMatch, depth)
	case *matcherv3.ValueMatcher_OrMatch:
		return compileOr(p.OrMatch, depth)
	default:
		return nil, fmt.Errorf("no match pattern set")
	}
}

// compileDouble follows DoubleMatcher: a number equal to exact, or in
// range (start inclusive, end exclusive).
func compileDouble(d *matcherv3.DoubleMatcher) func(*structpb.Value) bool {
	return func(v *structpb.Value) bool {
		n, ok := v.GetKind().(*structpb.Value_NumberValue)
		if !ok {
			return false
		}
		switch dm := d.GetMatchPattern().(type) {
		case *matcherv3.DoubleMatcher_Exact:
			return n.NumberValue == dm.Exact
		case *matcherv3.DoubleMatcher_Range:
			return n.NumberValue >= dm.Range.GetStart() && n.NumberValue < dm.Range.GetEnd()
		}
		return false
	}
}

// compileStringValue: a string value that the StringMatcher matches.
func compileStringValue(sm *matcherv3.StringMatcher) (func(*structpb.Value) bool, error) {
	f, err := compileString(sm)
	if err != nil {
		return nil, fmt.Errorf("string_match.%v", err)
	}
	return func(v *structpb.Value) bool {
		s, ok := v.GetKind().(*structpb.Value_StringValue)
		return ok && f(s.StringValue)
	}, nil
}

// compileList follows ListMatcher: a list with an element one_of matches.
func compileList(lm *matcherv3.ListMatcher, depth int) (func(*structpb.Value) bool, error) {
	one, err := compileValue(lm.GetOneOf(), depth+1)
	if err != nil {
		return nil, fmt.Errorf("list_match.one_of.%v", err)
	}
	return func(v *structpb.Value) bool {
		for _, e := range v.GetListValue().GetValues() {
			if one(e) {
				return true
			}
		}
		return false
	}, nil
}

// compileOr follows OrMatcher: any of its value matchers matches.
func compileOr(om *matcherv3.OrMatcher, depth int) (func(*structpb.Value) bool, error) {
	var fs []func(*structpb.Value) bool
	for i, vm := range om.GetValueMatchers() {
		f, err := compileValue(vm, depth+1)
		if err != nil {
			return nil, fmt.Errorf("or_match.value_matchers[%d].%v", i, err)
		}
		fs = append(fs, f)
	}
	return func(v *structpb.Value) bool {
		for _, f := range fs {
			if f(v) {
				return true
			}
		}
		return false
	}, nil
}
