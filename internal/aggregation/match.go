package aggregation

import (
	"fmt"
	"regexp"
	"strings"
)

// Match returns the result of the first rule that matches req, or an error
// wrapping ErrNoMatch that names the type, resource and node. It allocates
// only to build a key that is not fixed (once) and for regex captures.
func (r *Rules) Match(req Request) (Result, error) {
	if r != nil {
		for i := range r.rules {
			cr := &r.rules[i]
			if cr.matches(&req) {
				return Result{Rule: cr.name, Authority: cr.authority, Group: cr.key(&req), Node: cr.node}, nil
			}
		}
	}
	return Result{}, fmt.Errorf("%w: type %s, resource %q, node id %q, cluster %q",
		ErrNoMatch, req.TypeURL, req.Name, req.Node.GetId(), req.Node.GetCluster())
}

// matches reports whether every condition of the rule holds for req.
func (cr *compiledRule) matches(req *Request) bool {
	if len(cr.typeURLs) > 0 && !contains(cr.typeURLs, req.TypeURL) {
		return false
	}
	for i := range cr.conds {
		c := &cr.conds[i]
		v, ok := c.field.value(req)
		if !ok || !c.m.match(v) {
			return false
		}
	}
	return true
}

// maxStackParts is how many key parts are gathered without allocating.
const maxStackParts = 8

// key builds the group key of a request the rule matched.
func (cr *compiledRule) key(req *Request) string {
	if cr.fixedKey != "" {
		return cr.fixedKey
	}
	var buf [maxStackParts]string
	vals := buf[:0]
	n := 0
	var sub submatches
	for i := range cr.parts {
		v := cr.parts[i].value(req, &sub)
		vals = append(vals, v)
		n += len(v)
	}
	var b strings.Builder
	b.Grow(n)
	for _, v := range vals {
		b.WriteString(v)
	}
	return b.String()
}

// submatches remembers the last regex run while building one key, so that
// several captures of one condition run its regex once.
type submatches struct {
	re  *regexp.Regexp
	v   string
	loc []int
}

// value is the part's contribution to the key of a request the rule matched.
func (p *keyPart) value(req *Request, sub *submatches) string {
	switch p.kind {
	case partLiteral:
		return p.literal
	case partField:
		v, _ := p.field.value(req)
		return v
	}
	v, _ := p.field.value(req)
	if sub.re != p.re || sub.v != v || sub.loc == nil {
		sub.re, sub.v, sub.loc = p.re, v, p.re.FindStringSubmatchIndex(v)
	}
	loc := sub.loc
	if loc == nil || loc[2*p.group] < 0 {
		return ""
	}
	return v[loc[2*p.group]:loc[2*p.group+1]]
}
