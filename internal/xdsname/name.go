package xdsname

import (
	"strings"
)

// scheme is the prefix of every xdstp name.
const scheme = "xdstp://"

// Param is one context parameter (a query key and its value), decoded.
type Param struct{ Key, Value string }

// Name is a parsed xdstp:// resource name (TP1):
//
//	xdstp://[{authority}]/{resource type}/{id/*}?{context parameters}{#processing directive,*}
//
// Every component is kept decoded (no percent-escapes); String re-encodes.
// A Name is a value: Parse builds it, nothing mutates it afterwards, and
// names derived from it (GlobOf) may share its Params slice.
type Name struct {
	// Authority may be empty ("xdstp:///type/id").
	Authority string
	// Type is the resource type, e.g. "envoy.config.listener.v3.Listener";
	// never empty after Parse.
	Type string
	// ID is the decoded id path without the leading "/". A glob keeps its
	// trailing "/*" ("dir/*" or just "*").
	ID string
	// Params are the context parameters, sorted by key then value; keys are
	// unique after Parse. (String and Matches also accept a hand-built
	// Name's params in any order.)
	Params []Param
	// Alt is the "alt=<xdstp URL>" processing directive (URLs only); Parse
	// stores the alt URL in canonical form.
	Alt string
	// Entry is the "entry=<name>" processing directive (URLs only),
	// [a-zA-Z0-9_\-./~:]+.
	Entry string
	// LiteralStar is set by Parse when ID's last segment is a literal "*"
	// that arrived percent-encoded ("…/%2A", as grpc-go sends it): the name
	// is then a URN, not a glob. It has no effect unless ID is "*" or ends
	// in "/*".
	LiteralStar bool
}

// IsXDSTP reports whether s is an xdstp name (a cheap prefix check).
func IsXDSTP(s string) bool { return strings.HasPrefix(s, scheme) }

// String returns the canonical form of n:
//
//	"xdstp://" + authority + "/" + type + "/" + id
//	  + ("?" + "k=v&k2=v2" in sorted order) + ("#" + "alt=…,entry=…")
//
// Authority, type, id and the query are escaped exactly as grpc-go's xDS
// client escapes them (net/url rules: a literal "*" in an id becomes %2A),
// so a name that grpc-go canonicalises comes out byte-for-byte the same.
// The one difference: a glob keeps its bare trailing "/*".
func (n Name) String() string {
	var stack [256]byte
	buf := stack[:0]
	if size := n.sizeHint(); size > len(stack) {
		buf = make([]byte, 0, size)
	}
	return string(n.appendTo(buf))
}

// CanonicalFrom returns n.String() for n parsed from s: s itself, not a
// copy, when s already is canonical (as clients' names nearly always
// are), so that resolving a name allocates nothing for it.
func (n Name) CanonicalFrom(s string) string {
	var stack [256]byte
	buf := stack[:0]
	if size := n.sizeHint(); size > len(stack) {
		buf = make([]byte, 0, size)
	}
	if b := n.appendTo(buf); string(b) != s {
		return string(b)
	}
	return s
}

// sizeHint is a generous estimate of the canonical length of n.
func (n Name) sizeHint() int {
	size := len(scheme) + len(n.Authority) + 2 + len(n.Type) + len(n.ID) + 2 + len(n.Alt) + len(n.Entry) + 16
	for _, p := range n.Params {
		size += len(p.Key) + len(p.Value) + 2
	}
	return size
}

// appendTo appends the canonical form of n to buf.
func (n Name) appendTo(buf []byte) []byte {
	buf = append(buf, scheme...)
	buf = appendEscaped(buf, n.Authority, hostSafe)
	buf = append(buf, '/')
	buf = appendEscaped(buf, n.Type, pathSafe)
	buf = append(buf, '/')
	if n.IsGlob() {
		buf = appendEscaped(buf, n.ID[:len(n.ID)-1], pathSafe)
		buf = append(buf, '*')
	} else {
		buf = appendEscaped(buf, n.ID, pathSafe)
	}
	for i, p := range sortedParams(n.Params) {
		if i == 0 {
			buf = append(buf, '?')
		} else {
			buf = append(buf, '&')
		}
		buf = appendEscaped(buf, p.Key, queryKeySafe)
		buf = append(buf, '=')
		buf = appendEscaped(buf, p.Value, queryValueSafe)
	}
	sep := byte('#')
	if n.Alt != "" {
		buf = append(buf, sep)
		buf = append(buf, "alt="...)
		buf = appendEscaped(buf, n.Alt, altSafe)
		sep = ','
	}
	if n.Entry != "" {
		buf = append(buf, sep)
		buf = append(buf, "entry="...)
		buf = append(buf, n.Entry...)
	}
	return buf
}

// Canonical returns the canonical form of an xdstp name (Parse, then
// String). A legacy (non-xdstp) name is returned unchanged with a nil error:
// legacy names are opaque and compared literally.
func Canonical(s string) (string, error) {
	if !IsXDSTP(s) {
		return s, nil
	}
	n, err := Parse(s)
	if err != nil {
		return "", err
	}
	return n.CanonicalFrom(s), nil
}
