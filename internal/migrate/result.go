package migrate

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/xds-relay/xds-relay/internal/aggregation"
	"github.com/xds-relay/xds-relay/internal/migrate/legacykey"
)

// keyPart is one part of a converted key.
type keyPart struct {
	literal bool
	part    aggregation.GroupPart
}

// text is the text of a literal part.
func (p keyPart) text() string { return *p.part.Literal }

// lit is a literal key part.
func lit(s string) keyPart {
	return keyPart{literal: true, part: aggregation.GroupPart{Literal: &s}}
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
