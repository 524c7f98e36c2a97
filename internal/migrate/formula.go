package migrate

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/xds-relay/xds-relay/internal/aggregation"
	"github.com/xds-relay/xds-relay/internal/migrate/legacykey"
)

type atomKind uint8

const (
	atomString      atomKind = iota // a request field's matcher (anchored, ours)
	atomMetaString                  // the metadata value at keys is a string that m matches
	atomMetaBool                    // the metadata value at keys is the bool true
	atomMetaPresent                 // the metadata path holds a value
	atomHasMetadata                 // the node carries metadata
)

// Request fields, as converted rules name them.
const (
	fieldID           = "id"
	fieldCluster      = "cluster"
	fieldRegion       = "locality.region"
	fieldZone         = "locality.zone"
	fieldSubZone      = "locality.sub_zone"
	fieldResourceName = "resource_name"
)

// atom is one condition a converted rule can state.
type atom struct {
	kind  atomKind
	field string   // atomString
	keys  []string // metadata atoms
	exact *string  // atomString, atomMetaString: exact, or
	regex *string  // an anchored regex
}

// id identifies an atom, to tell a path that already decided it.
func (a atom) id() string {
	s := fmt.Sprintf("%d|%s|%q", a.kind, a.field, a.keys)
	if a.exact != nil {
		s += "|=" + *a.exact
	}
	if a.regex != nil {
		s += "|~" + *a.regex
	}
	return s
}

func (a atom) matcher() *aggregation.StringMatcher {
	if a.exact != nil {
		return &aggregation.StringMatcher{Exact: a.exact}
	}
	return &aggregation.StringMatcher{Regex: a.regex}
}

type formulaKind uint8

const (
	fTrue formulaKind = iota
	fFalse
	fAtom
	fAnd
	fOr
	fNot
	fErr
)

// formula is a legacy predicate with the request type decided.
type formula struct {
	kind   formulaKind
	atom   atom
	subs   []formula
	reason string // fErr: why the earlier relay refused a request reaching it
}

var (
	fmTrue  = formula{kind: fTrue}
	fmFalse = formula{kind: fFalse}
)

func fmAtom(a atom) formula       { return formula{kind: fAtom, atom: a} }
func fmAnd(fs ...formula) formula { return formula{kind: fAnd, subs: fs} }
func fmOr(fs ...formula) formula  { return formula{kind: fOr, subs: fs} }
func fmNot(f formula) formula     { return formula{kind: fNot, subs: []formula{f}} }
func fmErr(format string, args ...any) formula {
	return formula{kind: fErr, reason: fmt.Sprintf(format, args...)}
}

// unanchored turns the earlier relay's regex (a match anywhere) into ours
// (the whole value must match), keeping its meaning.
func unanchored(re string) string { return `(?s:.*)(?:` + re + `)(?s:.*)` }

// anyString is the anchored regex every string matches.
const anyString = `(?s:.*)`

// predicate decides m for requests of type typeURL.
func predicate(m *legacykey.MatchPredicate, typeURL, path string) formula {
	switch {
	case m.RequestNodeMatch != nil:
		return nodePredicate(m.RequestNodeMatch, path+".request_node_match")
	case m.AndMatch != nil:
		var fs []formula
		for i := range m.AndMatch.Rules {
			fs = append(fs, predicate(&m.AndMatch.Rules[i], typeURL, fmt.Sprintf("%s.and_match.rules[%d]", path, i)))
		}
		return fmAnd(fs...)
	case m.OrMatch != nil:
		var fs []formula
		for i := range m.OrMatch.Rules {
			fs = append(fs, predicate(&m.OrMatch.Rules[i], typeURL, fmt.Sprintf("%s.or_match.rules[%d]", path, i)))
		}
		return fmOr(fs...)
	case m.NotMatch != nil:
		return fmNot(predicate(m.NotMatch, typeURL, path+".not_match"))
	case m.RequestTypeMatch != nil:
		for _, t := range m.RequestTypeMatch.Types {
			if t == typeURL {
				return fmTrue
			}
		}
		return fmFalse
	}
	if m.AnyMatch != nil && *m.AnyMatch {
		return fmTrue
	}
	return fmFalse
}

// stringPredicate converts a legacy string match on field: an empty (or
// unset) exact_match or regex_match matches nothing; a regex matches
// anywhere; one that does not compile refuses the request.
func stringPredicate(m *legacykey.StringMatch, path string, mk func(exact, regex *string) atom) formula {
	if m.ExactMatch != nil && *m.ExactMatch != "" {
		return fmAtom(mk(m.ExactMatch, nil))
	}
	if m.RegexMatch != nil && *m.RegexMatch != "" {
		if _, err := regexp.Compile(*m.RegexMatch); err != nil {
			return fmErr("%s.regex_match does not compile: %v", path, err)
		}
		re := unanchored(*m.RegexMatch)
		return fmAtom(mk(nil, &re))
	}
	return fmFalse
}

func fieldAtom(field string) func(exact, regex *string) atom {
	return func(exact, regex *string) atom {
		return atom{kind: atomString, field: field, exact: exact, regex: regex}
	}
}

func nodePredicate(n *legacykey.RequestNodeMatch, path string) formula {
	switch {
	case n.IDMatch != nil:
		return stringPredicate(n.IDMatch, path+".id_match", fieldAtom(fieldID))
	case n.ClusterMatch != nil:
		return stringPredicate(n.ClusterMatch, path+".cluster_match", fieldAtom(fieldCluster))
	case n.LocalityMatch != nil:
		l, lp := n.LocalityMatch, path+".locality_match"
		fs := []formula{}
		if l.Region != nil {
			fs = append(fs, stringPredicate(l.Region, lp+".region", fieldAtom(fieldRegion)))
		}
		if l.Zone != nil {
			fs = append(fs, stringPredicate(l.Zone, lp+".zone", fieldAtom(fieldZone)))
		}
		if l.SubZone != nil {
			fs = append(fs, stringPredicate(l.SubZone, lp+".sub_zone", fieldAtom(fieldSubZone)))
		}
		return fmAnd(fs...)
	}
	md, mp := n.NodeMetadataMatch, path+".node_metadata_match"
	keys := pathKeys(md.Path)
	// A node without metadata was refused before anything else was tested.
	noMetadata := fmNot(fmAtom(atom{kind: atomHasMetadata}))
	refuse := fmErr("%s: the node has no metadata (the earlier relay refused the request)", mp)
	var value formula
	if sm := md.Match.StringMatch; sm != nil {
		value = stringPredicate(sm, mp+".match.string_match", func(exact, regex *string) atom {
			return atom{kind: atomMetaString, keys: keys, exact: exact, regex: regex}
		})
		if value.kind == fErr {
			// The regex is compiled only for a value that is there.
			value = fmAnd(fmAtom(atom{kind: atomMetaPresent, keys: keys}), value)
		}
		if value.kind == fAtom && value.atom.regex != nil {
			// A non-string value was tested as "": it matches when the
			// regex matches "".
			if regexp.MustCompile(*sm.RegexMatch).MatchString("") {
				any := anyString
				value = fmOr(value, fmAnd(
					fmAtom(atom{kind: atomMetaPresent, keys: keys}),
					fmNot(fmAtom(atom{kind: atomMetaString, keys: keys, regex: &any}))))
			}
		}
	} else if md.Match.BoolMatch.ValueMatch {
		value = fmAtom(atom{kind: atomMetaBool, keys: keys})
	} else {
		// A non-bool value was tested as false.
		value = fmAnd(fmAtom(atom{kind: atomMetaPresent, keys: keys}), fmNot(fmAtom(atom{kind: atomMetaBool, keys: keys})))
	}
	return formula{kind: fOr, subs: []formula{fmAnd(noMetadata, refuse), value}}
}

func pathKeys(segs []legacykey.PathSegment) []string {
	keys := make([]string, len(segs))
	for i, s := range segs {
		keys[i] = s.Key
	}
	return keys
}

// metadataMatch writes a metadata atom's path: dotted when no key has a
// dot, else as keys.
func metadataPath(keys []string) (string, []string) {
	for _, k := range keys {
		if strings.Contains(k, ".") {
			return "", keys
		}
	}
	return strings.Join(keys, "."), nil
}
