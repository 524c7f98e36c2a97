package aggregation

import (
	"fmt"
	"regexp"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
)

// Match returns the result of the first rule that matches req, or an error
// wrapping ErrNoMatch that names the type, resource and node. It allocates
// only to build a key that is not fixed (once) and for regex captures.
func (r *Rules) Match(req Request) (Result, error) {
	if r != nil {
		for i := range r.rules {
			cr := &r.rules[i]
			if cr.matches(&req) {
				node := cr.node
				if node == nil {
					node = cr.groupNode(&req)
				}
				return Result{Rule: cr.name, Authority: cr.authority, Group: cr.key(&req), Node: node}, nil
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

// groupNode is the Node a group's upstream stream presents when its rule
// sets none: only the node fields the group key is built from (node_field
// parts, and the fields captures are taken from), copied from the client's
// Node. They are what defines the group, so whichever client of the group
// comes first, the origin is shown nothing else: no id, metadata or
// locality outside the key. An empty id means the relay's own (the
// upstream fills it in). They remain the client's claim: the README says
// how access control binds them.
func (cr *compiledRule) groupNode(req *Request) *corev3.Node {
	n := &corev3.Node{}
	for _, p := range cr.parts {
		if p.kind == partLiteral {
			continue
		}
		switch p.field.kind {
		case fieldNodeID:
			n.Id = req.Node.GetId()
		case fieldNodeCluster:
			n.Cluster = req.Node.GetCluster()
		case fieldRegion, fieldZone, fieldSubZone:
			if n.Locality == nil {
				n.Locality = &corev3.Locality{}
			}
			switch p.field.kind {
			case fieldRegion:
				n.Locality.Region = req.Node.GetLocality().GetRegion()
			case fieldZone:
				n.Locality.Zone = req.Node.GetLocality().GetZone()
			default:
				n.Locality.SubZone = req.Node.GetLocality().GetSubZone()
			}
		}
	}
	return n
}
