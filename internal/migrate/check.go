package migrate

import (
	"fmt"
	"strings"

	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"

	"github.com/xds-relay/xds-relay/internal/migrate/legacykey"
)

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
