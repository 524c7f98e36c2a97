package migrate

import (
	"fmt"
	"reflect"
	"regexp"
	"strings"

	"github.com/xds-relay/xds-relay/internal/migrate/legacykey"
)

// leaf is one converted rule: the atoms its path found true, and its key
// or its refusal.
type leaf struct {
	conds  []atom
	refuse string
	key    []keyPart
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

// decision is one atom decided on a path: true or false.
type decision struct {
	atom atom
	val  bool
}

// state is a path through the legacy rules.
type state struct {
	decided []decision
	results [][]keyPart // one per matched legacy rule, in order
}

func (s state) with(a atom, v bool) state {
	d := make([]decision, len(s.decided), len(s.decided)+1)
	copy(d, s.decided)
	s.decided = append(d, decision{a, v})
	return s
}

func (s state) withResult(parts []keyPart) state {
	r := make([][]keyPart, len(s.results), len(s.results)+1)
	copy(r, s.results)
	s.results = append(r, parts)
	return s
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
func implied(a atom, decided []decision) (bool, bool) {
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
