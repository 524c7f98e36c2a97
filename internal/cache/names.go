package cache

import (
	"fmt"

	"github.com/xds-relay/xds-relay/internal/xdsname"
)

// IsCollection reports whether k names a collection (the legacy Wildcard or
// an xdstp glob URL) rather than one resource.
func (k Key) IsCollection() bool {
	return isCollectionName(k.Name)
}

func isCollectionName(name string) bool {
	if name == Wildcard {
		return true
	}
	if !xdsname.IsXDSTP(name) {
		return false
	}
	n, err := xdsname.Parse(name)
	return err == nil && n.IsGlob()
}

// CanonicalName returns the cache key name of a resource name as an origin
// or client spelled it: xdsname's canonical form for xdstp names, the name
// itself otherwise.
func CanonicalName(name string) (string, error) {
	if !xdsname.IsXDSTP(name) {
		return name, nil
	}
	c, err := xdsname.Canonical(name)
	if err != nil {
		return "", fmt.Errorf("resource name %q: %w", name, err)
	}
	return c, nil
}

// globOf returns the canonical glob collection a canonical resource name is
// a member of ("xdstp://a/T/dir/x?p" → "xdstp://a/T/dir/*?p"), or "" for a
// legacy name, a glob itself, or a name that does not parse.
func globOf(canonical string) string {
	if !xdsname.IsXDSTP(canonical) {
		return ""
	}
	n, err := xdsname.Parse(canonical)
	if err != nil || n.IsGlob() {
		return ""
	}
	return n.GlobOf().String()
}

// GlobOf returns the canonical glob collection a canonical resource name is
// a member of, or "" (see globOf).
func GlobOf(canonical string) string { return globOf(canonical) }
