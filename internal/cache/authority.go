package cache

import (
	"slices"

	"go.uber.org/zap"

	"github.com/xds-relay/xds-relay/internal/xdsname"
)

// No origin writes outside its authority. Each link (an authority, and
// for plain names an aggregation group) holds only names it owns (Owns);
// the upstream NACKs an origin response naming another authority, and
// the cache refuses, as a second line, whatever still does: in an Apply
// (ownedOnly), a snapshot's Restore, and an alias (aliasKeys). A client is
// fed each name from one key only: that is package downstream's part
// (onekey.go), since which link serves a plain name is the aggregation
// rules' answer for that client.

// Owns reports whether link id may hold name (as an origin spelled it, or
// canonical): a plain name, or an xdstp name of id's own authority. A plain
// name names no authority (the aggregation rules say, per client, which
// link serves it); an xdstp name's authority is its own trust domain,
// which no other authority's origin may write into: not as a resource, a
// removal, an alias nor a resource error (docs/protocol.md, "Authorities
// kept apart").
func (id LinkID) Owns(name string) bool {
	a, xdstp := AuthorityOf(name)
	return !xdstp || a == id.Authority
}

// AuthorityOf returns the authority of an xdstp name, and whether name is
// one ("?" for one whose authority does not parse: owned by no link).
func AuthorityOf(name string) (authority string, xdstp bool) {
	if !xdsname.IsXDSTP(name) {
		return "", false
	}
	a, err := xdsname.AuthorityOf(name)
	if err != nil {
		return "?", true
	}
	return a, true
}

// ownedOnly returns u without the resources, removals and errors whose
// names u.Link does not own, logging what it left out. The upstream
// refuses such a response before it gets here; what remains is a file
// source's file, or a bug. u's slices are the caller's: never modified.
func (c *Cache) ownedOnly(u Update) Update {
	var refused []string
	u.Resources = owned(u.Link, u.Resources, resourceName, &refused)
	u.Removed = owned(u.Link, u.Removed, func(n string) string { return n }, &refused)
	u.Errors = owned(u.Link, u.Errors, func(re ResourceError) string { return re.Name }, &refused)
	if len(refused) > 0 {
		c.lg.Warn("update names another authority; those names refused",
			zap.String("authority", u.Link.Authority), zap.String("group", u.Link.Group),
			zap.String("type_url", u.TypeURL), zap.Int("refused", len(refused)), zap.String("first", refused[0]))
	}
	return u
}

// owned returns the items of xs whose names (name) id owns: xs itself when
// it owns them all, else a copy; the others' names are added to refused.
func owned[T any](id LinkID, xs []T, name func(T) string, refused *[]string) []T {
	for i, x := range xs {
		if id.Owns(name(x)) {
			continue
		}
		out := slices.Clone(xs[:i])
		*refused = append(*refused, name(x))
		for _, y := range xs[i+1:] {
			if id.Owns(name(y)) {
				out = append(out, y)
			} else {
				*refused = append(*refused, name(y))
			}
		}
		return out
	}
	return xs
}

// resourceName is r's name ("" for nil, which Apply skips).
func resourceName(r *Resource) string {
	if r == nil {
		return ""
	}
	return r.Name
}
