package aggregation

import (
	"fmt"
	"regexp"
	"strings"
)

// Match returns the result of the first rule that matches req, or an error
// wrapping ErrNoMatch that names the type, resource and node, or a
// *RefusedError (wrapping ErrRefused) when the first rule that matches
// refuses it. It allocates only for regex captures and rewrites, and to
// build the key and upstream node of a group the first time (groupmemo.go).
func (r *Rules) Match(req Request) (Result, error) {
	if r != nil {
		for i := range r.rules {
			cr := &r.rules[i]
			if cr.matches(&req) {
				if cr.refuse != "" {
					return Result{}, &RefusedError{Rule: cr.name, Reason: cr.refuse}
				}
				var buf [maxStackParts]string
				vals := cr.values(&req, buf[:0])
				for j := range vals {
					if vals[j] == "" && cr.parts[j].refuseEmpty {
						return Result{}, &RefusedError{Rule: cr.name, Reason: cr.parts[j].path + " is empty (refuse_empty)"}
					}
				}
				var key string
				node := cr.node
				if node == nil {
					key, node = cr.keyAndNode(vals) // groupmemo.go
				} else {
					key = cr.key(vals)
				}
				return Result{Rule: cr.name, Authority: cr.authority, Group: key, Node: node}, nil
			}
		}
	}
	return Result{}, fmt.Errorf("%w: type %s, resource %q, node id %q, cluster %q",
		ErrNoMatch, req.TypeURL, req.Name, req.Node.GetId(), req.Node.GetCluster())
}

// matches reports whether req meets every condition of the rule.
func (cr *compiledRule) matches(req *Request) bool {
	if len(cr.typeURLs) > 0 && !contains(cr.typeURLs, req.TypeURL) {
		return false
	}
	for i := range cr.conds {
		if !cr.conds[i].met(req) {
			return false
		}
	}
	return true
}

// met reports whether req meets the condition.
func (c *condition) met(req *Request) bool {
	switch c.kind {
	case condPresent:
		return (metadataLookup(req.Node.GetMetadata(), c.field.path) != nil) == c.want
	case condHasMetadata:
		return (req.Node.GetMetadata() != nil) == c.want
	}
	v, ok := c.field.value(req)
	return ok && c.m.match(v)
}

// maxStackParts is how many key parts are gathered without allocating.
const maxStackParts = 8

// values appends to vals the value of each key part of a request the rule
// matched; none for a key of literals only.
func (cr *compiledRule) values(req *Request, vals []string) []string {
	if cr.fixedKey != "" {
		return vals
	}
	var sub submatches
	for i := range cr.parts {
		vals = append(vals, cr.parts[i].value(req, &sub))
	}
	return vals
}

// key builds the group key from the values of the rule's key parts.
func (cr *compiledRule) key(vals []string) string {
	if cr.fixedKey != "" {
		return cr.fixedKey
	}
	return strings.Join(vals, "")
}

// appendKey appends the group key of vals to b.
func (cr *compiledRule) appendKey(b []byte, vals []string) []byte {
	if cr.fixedKey != "" {
		return append(b, cr.fixedKey...)
	}
	for _, v := range vals {
		b = append(b, v...)
	}
	return b
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
	case partRewrite:
		v, _ := p.field.value(req)
		return p.re.ReplaceAllString(v, p.replace)
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
