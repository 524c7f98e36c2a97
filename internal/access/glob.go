package access

import "strings"

// Pattern is a compiled glob: '*' matches any run of characters ('/'
// included, so "spiffe://fleet.example/ns/prod/*" matches
// "spiffe://fleet.example/ns/prod/sa/app"); everything else is literal.
// Compile once, match often: Match allocates nothing.
type Pattern struct {
	src string
	// parts are the literal runs between stars; parts[0] must start the
	// value, parts[len-1] end it (when there is a star at all).
	parts []string
	star  bool // the pattern has at least one '*'
}

// Compile compiles a glob pattern. Every string is a valid pattern.
func Compile(glob string) Pattern {
	p := Pattern{src: glob}
	if !strings.Contains(glob, "*") {
		p.parts = []string{glob}
		return p
	}
	p.star = true
	p.parts = strings.Split(glob, "*")
	return p
}

// String returns the pattern as written.
func (p Pattern) String() string { return p.src }

// Match reports whether s matches the whole pattern.
func (p Pattern) Match(s string) bool {
	if !p.star {
		return s == p.src
	}
	return matchParts(p.parts, s)
}

// matchParts matches s against literal parts separated by stars: the first
// part is a prefix, the last a suffix, the ones between occur in order.
// Taking the leftmost occurrence of each middle part is enough: a star
// absorbs whatever an earlier choice left.
func matchParts(parts []string, s string) bool {
	first, last := parts[0], parts[len(parts)-1]
	if len(s) < len(first)+len(last) || !strings.HasPrefix(s, first) || !strings.HasSuffix(s, last) {
		return false
	}
	s = s[len(first) : len(s)-len(last)]
	for _, mid := range parts[1 : len(parts)-1] {
		i := strings.Index(s, mid)
		if i < 0 {
			return false
		}
		s = s[i+len(mid):]
	}
	return true
}
