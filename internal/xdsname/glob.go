package xdsname

import (
	"slices"
	"strings"
)

// IsGlob reports whether n names a glob collection: its ID is "*" or ends
// in "/*" (and that star is not a literal one, see LiteralStar).
func (n Name) IsGlob() bool {
	return (n.ID == "*" || strings.HasSuffix(n.ID, "/*")) && !n.LiteralStar
}

// IsURN reports whether n names one resource: no processing directives and
// not a glob.
func (n Name) IsURN() bool {
	return n.Alt == "" && n.Entry == "" && !n.IsGlob()
}

// GlobOf returns the glob collection n belongs to: same authority, type and
// context parameters, ID dir(ID)+"/*" ("*" when ID has no "/"), no
// directives. The result shares n's Params.
func (n Name) GlobOf() Name {
	id := "*"
	if i := strings.LastIndexByte(n.ID, '/'); i >= 0 {
		id = n.ID[:i+1] + "*"
	}
	return Name{Authority: n.Authority, Type: n.Type, ID: id, Params: n.Params}
}

// Matches reports whether the glob g contains urn: urn is a URN with g's
// authority and type, directly in g's directory (not deeper), with exactly
// g's context parameters. For a URN u, g.Matches(u) is true exactly when
// g and u.GlobOf() have the same canonical form.
func (g Name) Matches(urn Name) bool {
	if !g.IsGlob() || !urn.IsURN() || g.Alt != "" || g.Entry != "" ||
		g.Authority != urn.Authority || g.Type != urn.Type {
		return false
	}
	dir := g.ID[:len(g.ID)-1] // "dir/" or ""
	if !strings.HasPrefix(urn.ID, dir) || strings.IndexByte(urn.ID[len(dir):], '/') >= 0 {
		return false
	}
	return slices.Equal(sortedParams(g.Params), sortedParams(urn.Params))
}
