package migrate

import (
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/xds-relay/xds-relay/internal/migrate/legacykey"
)

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

// allRefuse reports whether every leaf refuses.
func allRefuse(ls []leaf) bool {
	for _, l := range ls {
		if l.refuse == "" {
			return false
		}
	}
	return true
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
