package migrate

import (
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"strings"

	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"go.yaml.in/yaml/v3"

	"github.com/xds-relay/xds-relay/internal/aggregation"
	"github.com/xds-relay/xds-relay/internal/migrate/legacykey"
)

// KeyPrefix starts every converted group key: the earlier relay's key may
// be a value alone, and a group key needs a literal. The same prefix on
// every key groups requests exactly as the keys without it.
const KeyPrefix = "legacy:"

// MaxRules bounds a conversion: rules whose combinations would need more
// converted rules are refused.
const MaxRules = 1000

// Refusal is a rule that cannot be converted, and why.
type Refusal struct {
	Fragment, Rule int
	Path           string // inside the rule, e.g. result.and_result
	Reason         string
}

func (r Refusal) Error() string {
	return fmt.Sprintf("fragments[%d].rules[%d].%s: %s", r.Fragment, r.Rule, r.Path, r.Reason)
}

// ErrNotConvertible is wrapped by Convert's error when some rule cannot be
// converted; the error joins a Refusal for each.
var ErrNotConvertible = errors.New("cannot be converted")

// Converted is a conversion's result: rules for one authority.
type Converted struct {
	Rules []aggregation.Rule
}

// edsTypes are refused without names by the earlier relay.
var edsTypes = []string{"type.googleapis.com/envoy.api.v2.ClusterLoadAssignment", resourcev3.EndpointType}

// Convert converts a legacy rules file into first-match rules whose
// results name authority. A request is grouped with another by the
// converted rules exactly when the earlier relay built both the same key,
// and refused exactly when it refused it, as one request per resource
// name (the relay groups each name by itself; the earlier relay grouped a
// request by its first name).
func Convert(c *legacykey.Config, authority string) (*Converted, error) {
	if refusals := check(c); len(refusals) > 0 {
		return nil, refusalsError(refusals)
	}
	cv := &converter{c: c, authority: authority}
	other, err := cv.tree("")
	if err != nil {
		return nil, err
	}
	groups, err := cv.typeGroups(namedTypes(c), signature(other))
	if err != nil {
		return nil, err
	}
	if allRefuse(other) {
		groups = dropAllRefuse(groups)
	}
	out := &Converted{Rules: assemble(groups, other, authority)}
	if len(out.Rules) > MaxRules {
		return nil, fmt.Errorf("%w: the rules' combinations need %d converted rules (more than %d)", ErrNotConvertible, len(out.Rules), MaxRules)
	}
	return out, nil
}

// refusalsError is Convert's error for what check refused: ErrNotConvertible
// and every refusal, joined.
func refusalsError(refusals []Refusal) error {
	errs := make([]error, len(refusals))
	for i := range refusals {
		errs[i] = refusals[i]
	}
	return fmt.Errorf("%w: %w", ErrNotConvertible, errors.Join(errs...))
}

// namedTypes are the types that get a subtree of their own: every type the
// rules name, in rule order, then EDS. (Every other type gets the subtree
// for type "".)
func namedTypes(c *legacykey.Config) []string {
	var types []string
	seen := map[string]bool{}
	addType := func(t string) {
		if !seen[t] {
			seen[t] = true
			types = append(types, t)
		}
	}
	for i := range c.Fragments {
		for j := range c.Fragments[i].Rules {
			walkTypes(c.Fragments[i].Rules[j].Match, addType)
		}
	}
	for _, t := range edsTypes {
		addType(t)
	}
	return types
}

// typeGroup is types whose subtrees are the same, and so share their rules.
type typeGroup struct {
	types  []string
	leaves []leaf
	sig    string
}

// typeGroups walks the subtree of each type (types named by the same
// request_type_match lists share one walk) and groups types whose leaves
// are the same, in the order of types. Types served alike by the subtree
// for every other type (signature otherSig) get no group.
func (cv *converter) typeGroups(types []string, otherSig string) ([]*typeGroup, error) {
	var groups []*typeGroup
	// A type's rules depend only on which request_type_match lists name
	// it: types named by the same lists share one walk.
	typeSets := typeMatches(cv.c)
	walked := map[string][]leaf{}
	for _, t := range types {
		member := membership(typeSets, t)
		if !strings.Contains(member, "1") {
			continue // named by no list (EDS): the rules for every other type
		}
		leaves, ok := walked[member]
		if !ok {
			var err error
			if leaves, err = cv.tree(t); err != nil {
				return nil, err
			}
			walked[member] = leaves
		}
		sig := signature(leaves)
		if sig == otherSig {
			continue // the rules for every other type serve it alike
		}
		groups = addToGroup(groups, t, leaves, sig)
	}
	return groups, nil
}

// addToGroup adds type t to the group with the same signature, or as a
// new group at the end.
func addToGroup(groups []*typeGroup, t string, leaves []leaf, sig string) []*typeGroup {
	for _, g := range groups {
		if g.sig == sig {
			g.types = append(g.types, t)
			return groups
		}
	}
	return append(groups, &typeGroup{types: []string{t}, leaves: leaves, sig: sig})
}

// dropAllRefuse drops the groups whose requests are all refused: when
// every other type's are too, they need no rules of their own.
func dropAllRefuse(groups []*typeGroup) []*typeGroup {
	kept := groups[:0]
	for _, g := range groups {
		if !allRefuse(g.leaves) {
			kept = append(kept, g)
		}
	}
	return kept
}

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

// allRefuse reports whether every leaf refuses.
func allRefuse(ls []leaf) bool {
	for _, l := range ls {
		if l.refuse == "" {
			return false
		}
	}
	return true
}

// shortType names a type's rules: the message name, lower case.
func shortType(t string) string {
	return strings.ToLower(t[strings.LastIndex(t, ".")+1:])
}

// typeMatches lists the type lists of every request_type_match, in rule
// order.
func typeMatches(c *legacykey.Config) [][]string {
	var out [][]string
	var walk func(m *legacykey.MatchPredicate)
	walk = func(m *legacykey.MatchPredicate) {
		if m == nil {
			return
		}
		if m.RequestTypeMatch != nil {
			out = append(out, m.RequestTypeMatch.Types)
		}
		for _, set := range []*legacykey.MatchSet{m.AndMatch, m.OrMatch} {
			if set != nil {
				for i := range set.Rules {
					walk(&set.Rules[i])
				}
			}
		}
		walk(m.NotMatch)
	}
	for i := range c.Fragments {
		for j := range c.Fragments[i].Rules {
			walk(c.Fragments[i].Rules[j].Match)
		}
	}
	return out
}

// membership writes which of the lists name t, one digit per list.
func membership(lists [][]string, t string) string {
	b := make([]byte, len(lists))
	for i, l := range lists {
		b[i] = '0'
		if contains(l, t) {
			b[i] = '1'
		}
	}
	return string(b)
}

func walkTypes(m *legacykey.MatchPredicate, add func(string)) {
	if m == nil {
		return
	}
	if m.RequestTypeMatch != nil {
		for _, t := range m.RequestTypeMatch.Types {
			add(t)
		}
	}
	if m.AndMatch != nil {
		for i := range m.AndMatch.Rules {
			walkTypes(&m.AndMatch.Rules[i], add)
		}
	}
	if m.OrMatch != nil {
		for i := range m.OrMatch.Rules {
			walkTypes(&m.OrMatch.Rules[i], add)
		}
	}
	walkTypes(m.NotMatch, add)
}

// check lists what cannot be converted.
func check(c *legacykey.Config) []Refusal {
	var out []Refusal
	for i := range c.Fragments {
		for j := range c.Fragments[i].Rules {
			checkTypes(c.Fragments[i].Rules[j].Match, "match", func(path, reason string) {
				out = append(out, Refusal{Fragment: i, Rule: j, Path: path, Reason: reason})
			})
			var parts []keyPart
			checkResult(c.Fragments[i].Rules[j].Result, "result", &parts, func(path, reason string) {
				out = append(out, Refusal{Fragment: i, Rule: j, Path: path, Reason: reason})
			})
		}
	}
	return out
}

// checkTypes refuses type names that are not type URLs: no request of
// such a type reaches this relay's rules.
func checkTypes(m *legacykey.MatchPredicate, path string, refuse func(path, reason string)) {
	if m == nil {
		return
	}
	if m.RequestTypeMatch != nil {
		for i, t := range m.RequestTypeMatch.Types {
			if rest, ok := strings.CutPrefix(t, resourcev3.APITypePrefix); !ok || rest == "" {
				refuse(fmt.Sprintf("%s.request_type_match.types[%d]", path, i), fmt.Sprintf("%q is not a type URL (%s<message>): this relay refuses requests of such a type before any rule", t, resourcev3.APITypePrefix))
			}
		}
	}
	for _, set := range []struct {
		name string
		s    *legacykey.MatchSet
	}{{"and_match", m.AndMatch}, {"or_match", m.OrMatch}} {
		if set.s != nil {
			for i := range set.s.Rules {
				checkTypes(&set.s.Rules[i], fmt.Sprintf("%s.%s.rules[%d]", path, set.name, i), refuse)
			}
		}
	}
	checkTypes(m.NotMatch, path+".not_match", refuse)
}

// checkResult refuses resource names other than the first, and two values
// side by side in an and_result. parts are the shapes of the parts so far
// (only literal or not matters).
func checkResult(r *legacykey.ResultPredicate, path string, parts *[]keyPart, refuse func(path, reason string)) {
	value := func(p string) {
		if n := len(*parts); n > 0 && !(*parts)[n-1].literal {
			refuse(p, "and_result puts this value right after another with nothing between them, so the earlier relay gave clients with different values the same key (\"ab\"+\"c\" and \"a\"+\"bc\"); this relay's keys need a literal between two values: add a string_fragment between them (which separates those clients) and convert again")
		}
		*parts = append(*parts, keyPart{})
	}
	switch {
	case r.StringFragment != nil:
		if *r.StringFragment != "" {
			*parts = append(*parts, keyPart{literal: true})
		}
	case r.AndResult != nil:
		for i := range r.AndResult.ResultPredicates {
			checkResult(&r.AndResult.ResultPredicates[i], fmt.Sprintf("%s.and_result.result_predicates[%d]", path, i), parts, refuse)
		}
	case r.ResourceNamesFragment != nil:
		if e := r.ResourceNamesFragment.Element; e != 0 {
			refuse(path+".resource_names_fragment.element", fmt.Sprintf("is %d: this relay groups each resource name of a request by itself, so only element 0 (the name) can be converted", e))
		}
		value(path + ".resource_names_fragment")
	case r.RequestNodeFragment != nil:
		if l := r.RequestNodeFragment.LocalityAction; l != nil {
			n := 0
			for _, a := range []*legacykey.ResultAction{l.RegionAction, l.ZoneAction, l.SubzoneAction} {
				if a == nil {
					continue
				}
				if n > 0 {
					*parts = append(*parts, keyPart{literal: true}) // "|"
				}
				value(path + ".request_node_fragment.locality_action")
				n++
			}
			return
		}
		value(path + ".request_node_fragment")
	}
}

// keyPart is one part of a converted key.
type keyPart struct {
	literal bool
	part    aggregation.GroupPart
}

// literal is the text of a literal part.
func (p keyPart) text() string { return *p.part.Literal }

// lit is a literal key part.
func lit(s string) keyPart {
	return keyPart{literal: true, part: aggregation.GroupPart{Literal: &s}}
}

// literal is one decided atom on a path.
type literal struct {
	atom atom
	val  bool
}

// leaf is one converted rule: the atoms its path found true, and its key
// or its refusal.
type leaf struct {
	conds  []atom
	refuse string
	key    []keyPart
}

// state is a path through the legacy rules.
type state struct {
	decided []literal
	results [][]keyPart // one per matched legacy rule, in order
}

func (s state) with(a atom, v bool) state {
	d := make([]literal, len(s.decided), len(s.decided)+1)
	copy(d, s.decided)
	s.decided = append(d, literal{a, v})
	return s
}

func (s state) withResult(parts []keyPart) state {
	r := make([][]keyPart, len(s.results), len(s.results)+1)
	copy(r, s.results)
	s.results = append(r, parts)
	return s
}

// converter walks the legacy rules for one type.
type converter struct {
	c         *legacykey.Config
	authority string
	leaves    []leaf
	typeURL   string
	emitted   int // paths walked by the conversion, bounded by maxPaths
	overflow  bool
}

// maxPaths bounds the paths walked by one conversion (each undecided atom
// doubles them), and so its time.
const maxPaths = 1 << 15

// tree returns the leaves for requests of typeURL ("" for a type no rule
// names), in first-match order. (EDS without names is refused by a rule
// before every tree.)
func (cv *converter) tree(typeURL string) ([]leaf, error) {
	cv.leaves, cv.typeURL = nil, typeURL
	cv.walk(0, 0, state{})
	if len(cv.leaves) > MaxRules {
		// Every tree is written out, or is the same as the one for the
		// other types, which is.
		return nil, fmt.Errorf("%w: the rules' combinations need more than %d converted rules", ErrNotConvertible, MaxRules)
	}
	if cv.overflow {
		return nil, fmt.Errorf("%w: the rules' combinations are more than %d paths", ErrNotConvertible, maxPaths)
	}
	return cv.leaves, nil
}

// walk continues the path s at fragment i, rule j.
func (cv *converter) walk(i, j int, s state) {
	if cv.overflow {
		return
	}
	if i == len(cv.c.Fragments) {
		cv.finish(s)
		return
	}
	if j == len(cv.c.Fragments[i].Rules) {
		cv.walk(i+1, 0, s)
		return
	}
	r := &cv.c.Fragments[i].Rules[j]
	path := fmt.Sprintf("fragments[%d].rules[%d]", i, j)
	cv.eval(predicate(r.Match, cv.typeURL, path+".match"), s, func(s state, matched bool) {
		if !matched {
			cv.walk(i, j+1, s)
			return
		}
		cv.result(r.Result, path+".result", s, nil, func(s state, parts []keyPart) {
			cv.walk(i, j+1, s.withResult(parts))
		})
	})
}

// finish ends a path: the key of the results, or the refusal of none.
func (cv *converter) finish(s state) {
	if len(s.results) == 0 {
		cv.emit(s, "no fragment of the earlier relay's rules matches: it refused the request", nil)
		return
	}
	key := []keyPart{lit(KeyPrefix)}
	for i, r := range s.results {
		if i > 0 {
			key = append(key, lit(legacykey.Separator))
		}
		key = append(key, r...)
	}
	cv.emit(s, "", mergeLiterals(key))
}

func (cv *converter) emit(s state, refuse string, key []keyPart) {
	if cv.emitted++; cv.emitted > maxPaths {
		cv.overflow = true
		return
	}
	var conds []atom
	for _, d := range s.decided {
		if d.val {
			conds = append(conds, d.atom)
		}
	}
	cv.leaves = append(cv.leaves, leaf{conds: conds, refuse: refuse, key: key})
}

// eval decides f on the path s, branching on each undecided atom (true
// first), and calls k with each outcome; an error ends the path refused.
// and/or stop at the first operand that decides, as the earlier relay.
func (cv *converter) eval(f formula, s state, k func(state, bool)) {
	switch f.kind {
	case fTrue:
		k(s, true)
	case fFalse:
		k(s, false)
	case fErr:
		cv.emit(s, f.reason, nil)
	case fNot:
		cv.eval(f.subs[0], s, func(s state, v bool) { k(s, !v) })
	case fAnd, fOr:
		stopOn := f.kind == fOr
		var step func(i int, s state)
		step = func(i int, s state) {
			if i == len(f.subs) {
				k(s, !stopOn)
				return
			}
			cv.eval(f.subs[i], s, func(s state, v bool) {
				if v == stopOn {
					k(s, v)
					return
				}
				step(i+1, s)
			})
		}
		step(0, s)
	case fAtom:
		id := f.atom.id()
		if v, ok := implied(f.atom, s.decided); ok {
			k(s, v)
			return
		}
		// Both branches, apart; when they end the same way but for the
		// atom, the atom does not matter there: keep one branch, without it.
		saved := cv.leaves
		cv.leaves = nil
		k(s.with(f.atom, true), true)
		whenTrue := cv.leaves
		cv.leaves = nil
		k(s.with(f.atom, false), false)
		whenFalse := cv.leaves
		cv.leaves = saved
		if !sameWithout(whenTrue, whenFalse, id) {
			cv.leaves = append(cv.leaves, whenTrue...)
		}
		cv.leaves = append(cv.leaves, whenFalse...)
	}
}

// implied decides a from what the path already decided, if it can: the
// same atom; a field (or metadata path) found equal to a value decides
// every other test of it; a metadata value of a type makes the path
// present and other types' tests false; an absent path fails every test.
func implied(a atom, decided []literal) (bool, bool) {
	id := a.id()
	for _, d := range decided {
		if d.atom.id() == id {
			return d.val, true
		}
	}
	for _, d := range decided {
		b := d.atom
		if a.kind == atomHasMetadata || b.kind == atomHasMetadata {
			continue
		}
		sameField := a.kind == atomString && b.kind == atomString && a.field == b.field
		sameKeys := a.kind != atomString && b.kind != atomString && strings.Join(a.keys, "\x00") == strings.Join(b.keys, "\x00") && len(a.keys) == len(b.keys)
		switch {
		case sameField && d.val && b.exact != nil:
			return a.test(*b.exact), true
		case !sameKeys:
			continue
		case b.kind == atomMetaPresent && !d.val:
			return false, true // absent: no value to test
		case a.kind == atomMetaPresent && d.val && b.kind != atomMetaPresent:
			return true, true // a value of a type is there
		case b.kind == atomMetaString && d.val && b.exact != nil && a.kind == atomMetaString:
			return a.test(*b.exact), true
		case d.val && (b.kind == atomMetaString && a.kind == atomMetaBool || b.kind == atomMetaBool && a.kind == atomMetaString):
			return false, true // a string is not a bool
		}
	}
	return false, false
}

// test reports whether a string-valued atom holds for the value v.
func (a atom) test(v string) bool {
	if a.exact != nil {
		return v == *a.exact
	}
	return regexp.MustCompile(`^(?:` + *a.regex + `)$`).MatchString(v)
}

// sameWithout reports whether the leaves a (found on the branch where the
// atom id holds) are b with that atom among their conditions.
func sameWithout(a, b []leaf, id string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].refuse != b[i].refuse || len(a[i].key) != len(b[i].key) {
			return false
		}
		for j := range a[i].key {
			if !reflect.DeepEqual(a[i].key[j], b[i].key[j]) {
				return false
			}
		}
		var conds []string
		for _, c := range a[i].conds {
			if c.id() != id {
				conds = append(conds, c.id())
			}
		}
		if len(conds) != len(b[i].conds) {
			return false
		}
		for j, c := range b[i].conds {
			if conds[j] != c.id() {
				return false
			}
		}
	}
	return true
}

// result converts a matching rule's result, appending to parts, and calls
// k with the path and the parts (or ends the path refused).
func (cv *converter) result(r *legacykey.ResultPredicate, path string, s state, parts []keyPart, k func(state, []keyPart)) {
	switch {
	case r.StringFragment != nil:
		if *r.StringFragment == "" {
			k(s, parts)
			return
		}
		k(s, extend(parts, lit(*r.StringFragment)))
	case r.AndResult != nil:
		cv.andResult(r.AndResult, path, s, parts, k)
	case r.ResourceNamesFragment != nil:
		cv.namesResult(r.ResourceNamesFragment, path+".resource_names_fragment", s, parts, k)
	case r.RequestNodeFragment != nil:
		cv.nodeResult(r.RequestNodeFragment, path+".request_node_fragment", s, parts, k)
	}
}

// extend returns parts with ps appended, in a new slice: parts is shared by
// the paths that branch from it.
func extend(parts []keyPart, ps ...keyPart) []keyPart {
	out := make([]keyPart, len(parts), len(parts)+len(ps))
	copy(out, parts)
	return append(out, ps...)
}

// andResult converts an and_result's results one after another, each
// appending to the parts of the one before, and calls k with the last.
func (cv *converter) andResult(a *legacykey.AndResult, path string, s state, parts []keyPart, k func(state, []keyPart)) {
	var step func(i int, s state, parts []keyPart)
	step = func(i int, s state, ps []keyPart) {
		if i == len(a.ResultPredicates) {
			k(s, ps)
			return
		}
		cv.result(&a.ResultPredicates[i], fmt.Sprintf("%s.and_result.result_predicates[%d]", path, i), s, ps, func(s state, ps []keyPart) {
			step(i+1, s, ps)
		})
	}
	step(0, s, parts)
}

// namesResult converts a resource_names_fragment (at path rp): refused for
// a wildcard request, else the name through its action.
func (cv *converter) namesResult(f *legacykey.ResourceNamesFragment, rp string, s state, parts []keyPart, k func(state, []keyPart)) {
	empty := ""
	cv.eval(fmAtom(atom{kind: atomString, field: fieldResourceName, exact: &empty}), s, func(s state, wildcard bool) {
		if wildcard {
			cv.emit(s, rp+": a wildcard request has no resource name (the earlier relay refused it)", nil)
			return
		}
		p, err := actionPart(f.Action, "resource_name", nil, "")
		if err != "" {
			cv.emit(s, rp+".action: "+err, nil)
			return
		}
		k(s, extend(parts, p))
	})
}

// nodeResult converts a request_node_fragment (at path np): the node field
// its one action names, through the action.
func (cv *converter) nodeResult(n *legacykey.RequestNodeFragment, np string, s state, parts []keyPart, k func(state, []keyPart)) {
	switch {
	case n.IDAction != nil, n.ClusterAction != nil:
		a, from := n.IDAction, "node.id"
		if a == nil {
			a, from = n.ClusterAction, "node.cluster"
		}
		p, err := actionPart(a, from, nil, "")
		if err != "" {
			cv.emit(s, np+": "+err, nil)
			return
		}
		k(s, extend(parts, p))
	case n.LocalityAction != nil:
		ps, refuse := localityParts(n.LocalityAction)
		if refuse != "" {
			cv.emit(s, np+refuse, nil)
			return
		}
		k(s, extend(parts, ps...))
	default:
		cv.metadataResult(n.NodeMetadataAction, np, s, parts, k)
	}
}

// localityParts converts a locality_action: the fields it sets, joined
// with "|"; or, when it cannot, the refusal's path suffix and reason.
func localityParts(l *legacykey.LocalityResultAction) ([]keyPart, string) {
	var ps []keyPart
	for _, f := range []struct {
		a    *legacykey.ResultAction
		from string
	}{{l.RegionAction, "node.locality.region"}, {l.ZoneAction, "node.locality.zone"}, {l.SubzoneAction, "node.locality.sub_zone"}} {
		if f.a == nil {
			continue
		}
		p, err := actionPart(f.a, f.from, nil, "")
		if err != "" {
			return nil, ".locality_action: " + err
		}
		if len(ps) > 0 {
			ps = append(ps, lit("|"))
		}
		ps = append(ps, p)
	}
	if len(ps) == 0 {
		return nil, ".locality_action sets no field: the earlier relay refused every request it matched"
	}
	return ps, ""
}

// metadataResult converts a node_metadata_action (under path np): refused
// when the node's metadata has no such path, else the value through the
// action.
func (cv *converter) metadataResult(md *legacykey.NodeMetadataAction, np string, s state, parts []keyPart, k func(state, []keyPart)) {
	keys := pathKeys(md.Path)
	cv.eval(fmAtom(atom{kind: atomMetaPresent, keys: keys}), s, func(s state, present bool) {
		if !present {
			cv.emit(s, np+".node_metadata_action: the node's metadata has no such path (the earlier relay refused the request)", nil)
			return
		}
		p, err := actionPart(md.Action, "node.metadata", keys, "string")
		if err != "" {
			cv.emit(s, np+".node_metadata_action.action: "+err, nil)
			return
		}
		k(s, extend(parts, p))
	})
}

// actionPart converts an action on a value into a key part that refuses
// the request when empty, as the earlier relay did; a regex that does not
// compile refuses every request that reaches it (the returned reason).
func actionPart(a *legacykey.ResultAction, from string, keys []string, typ string) (keyPart, string) {
	if a.Exact != nil && *a.Exact {
		switch {
		case from == "resource_name":
			// The whole name, through a rewrite that keeps it.
			return keyPart{part: aggregation.GroupPart{Rewrite: &aggregation.Rewrite{From: from, Regex: `(?s).*`, Replace: "$0"}, RefuseEmpty: true}}, ""
		case keys != nil:
			return keyPart{part: aggregation.GroupPart{Metadata: &aggregation.MetadataPart{Keys: keys, Type: typ}, RefuseEmpty: true}}, ""
		}
		f := strings.TrimPrefix(from, "node.")
		return keyPart{part: aggregation.GroupPart{NodeField: &f, RefuseEmpty: true}}, ""
	}
	re, err := regexp.Compile(a.RegexAction.Pattern)
	if err != nil {
		return keyPart{}, fmt.Sprintf("regex_action.pattern does not compile: %v (the earlier relay refused every request it reached)", err)
	}
	rw := &aggregation.Rewrite{From: from, Keys: keys, Type: typ, Regex: a.RegexAction.Pattern, Replace: normalizeTemplate(a.RegexAction.Replace, re)}
	return keyPart{part: aggregation.GroupPart{Rewrite: rw, RefuseEmpty: true}}, ""
}

// mergeLiterals joins adjacent literals and drops empty ones.
func mergeLiterals(ps []keyPart) []keyPart {
	var out []keyPart
	for _, p := range ps {
		if p.literal {
			if p.text() == "" {
				continue
			}
			if n := len(out); n > 0 && out[n-1].literal {
				out[n-1] = lit(out[n-1].text() + p.text())
				continue
			}
		}
		out = append(out, p)
	}
	return out
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

// signature identifies a list of leaves, to share rules between types.
func signature(ls []leaf) string {
	var b strings.Builder
	for _, l := range ls {
		out, _ := yaml.Marshal(l.rule("", nil, ""))
		b.Write(out)
		b.WriteString("---\n")
	}
	return b.String()
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
