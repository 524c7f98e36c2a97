package xdsname

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Parse parses an xdstp name. It returns ErrNotXDSTP for a name without the
// "xdstp://" prefix, and otherwise an error (wrapping one of the sentinels in
// errors.go) that quotes the name and says what is wrong and where. Parse
// never panics.
//
// Percent-escapes are decoded everywhere; '+' in the query is a space (as
// net/url and grpc-go read it). Parsing follows grpc-go where grpc-go accepts
// a name, with these deliberate differences: the type and the id must be
// non-empty, a context-parameter key may not be empty or repeated, processing
// directives are checked, control characters are rejected, and an authority
// may have any percent-escape.
func Parse(s string) (Name, error) {
	if !IsXDSTP(s) {
		return Name{}, ErrNotXDSTP
	}
	for i := 0; i < len(s); i++ {
		if isControl(s[i]) {
			return Name{}, parseErr(s, ErrControlChar, fmt.Sprintf("control character %q at offset %d", s[i], i))
		}
	}
	rest := s[len(scheme):]
	frag, hasFrag := "", false
	if i := strings.IndexByte(rest, '#'); i >= 0 {
		rest, frag, hasFrag = rest[:i], rest[i+1:], true
	}
	query := ""
	if i := strings.IndexByte(rest, '?'); i >= 0 {
		rest, query = rest[:i], rest[i+1:]
	}
	slash := strings.IndexByte(rest, '/')
	if slash < 0 {
		return Name{}, parseErr(s, ErrNoType, "no type: want xdstp://[authority]/type/id")
	}

	var n Name
	var err error
	if n.Authority, err = parseAuthority(s, rest[:slash]); err != nil {
		return Name{}, err
	}
	if err = n.parsePath(s, rest[slash+1:]); err != nil {
		return Name{}, err
	}
	if n.Params, err = parseQuery(s, query); err != nil {
		return Name{}, err
	}
	if hasFrag {
		if err = n.parseDirectives(s, frag); err != nil {
			return Name{}, err
		}
	}
	return n, nil
}

// AuthorityOf returns the decoded authority of xdstp name s, as Parse
// would, without parsing the rest: what access rules are looked up by. It
// allocates only for an authority with percent-escapes. An error wraps
// ErrNotXDSTP, or says what is wrong with the authority.
func AuthorityOf(s string) (string, error) {
	if !IsXDSTP(s) {
		return "", ErrNotXDSTP
	}
	rest := s[len(scheme):]
	end := strings.IndexAny(rest, "/?#")
	if end < 0 || rest[end] != '/' {
		return "", parseErr(s, ErrNoType, "no type: want xdstp://[authority]/type/id")
	}
	for i := 0; i < end; i++ {
		if isControl(rest[i]) {
			return "", parseErr(s, ErrControlChar, fmt.Sprintf("control character %q in authority", rest[i]))
		}
	}
	return parseAuthority(s, rest[:end])
}

// parseAuthority validates and decodes the authority: the bytes net/url
// accepts in a host, non-ASCII bytes, and percent-escapes.
func parseAuthority(s, raw string) (string, error) {
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		switch {
		case c == '%':
			if bad := badEscapeAt(raw, i); bad != "" {
				return "", parseErr(s, ErrBadEscape, fmt.Sprintf("bad escape %q in authority", bad))
			}
		case c < 0x80 && !hostSafe[c]:
			return "", parseErr(s, ErrBadAuthority, fmt.Sprintf("invalid character %q in authority", c))
		}
	}
	return unescape(raw, false), nil
}

// parsePath parses raw, the path after the authority's "/": the type, then
// the id. The path is decoded as a whole and split at its first "/", as
// grpc-go does. A glob is a last raw segment "*"; a last segment that only
// decodes to "*" ("%2A") is a literal star.
func (n *Name) parsePath(s, raw string) error {
	typeEnd := strings.IndexByte(raw, '/')
	if bad, i := firstBadEscape(raw); bad != "" {
		where := "id"
		if typeEnd < 0 || i < typeEnd {
			where = "type"
		}
		return parseErr(s, ErrBadEscape, fmt.Sprintf("bad escape %q in %s", bad, where))
	}
	lastSeg := raw[strings.LastIndexByte(raw, '/')+1:]
	if strings.HasPrefix(raw, "*/") || strings.Contains(raw, "/*/") {
		return parseErr(s, ErrGlobNotLast, `glob "*" not in last path segment`)
	}
	typ, id, hasID := strings.Cut(unescape(raw, false), "/")
	switch {
	case typ == "":
		return parseErr(s, ErrNoType, "no type: want xdstp://[authority]/type/id")
	case !hasID:
		return parseErr(s, ErrNoID, fmt.Sprintf("no id after type %q", short(typ)))
	case id == "":
		return parseErr(s, ErrEmptyID, fmt.Sprintf("empty id after type %q", short(typ)))
	}
	n.Type, n.ID = typ, id
	endsInStar := id == "*" || strings.HasSuffix(id, "/*")
	n.LiteralStar = endsInStar && lastSeg != "*"
	return nil
}

// parseQuery parses the context parameters: "&"-separated key=value pairs
// (empty pairs are skipped, a missing "=" means an empty value), sorted.
func parseQuery(s, raw string) ([]Param, error) {
	if raw == "" {
		return nil, nil
	}
	if bad, _ := firstBadEscape(raw); bad != "" {
		return nil, parseErr(s, ErrBadEscape, fmt.Sprintf("bad escape %q in context parameters", bad))
	}
	params := make([]Param, 0, strings.Count(raw, "&")+1)
	for pair := range strings.SplitSeq(raw, "&") {
		if pair == "" {
			continue
		}
		k, v, _ := strings.Cut(pair, "=")
		if k == "" {
			return nil, parseErr(s, ErrBadQuery, fmt.Sprintf("malformed query: context parameter %q has an empty key", short(pair)))
		}
		params = append(params, Param{Key: unescape(k, true), Value: unescape(v, true)})
	}
	if len(params) == 0 {
		return nil, nil
	}
	slices.SortFunc(params, compareParams)
	for i := 1; i < len(params); i++ {
		if params[i].Key == params[i-1].Key {
			return nil, parseErr(s, ErrRepeatedParam, fmt.Sprintf("context parameter %q repeated", short(params[i].Key)))
		}
	}
	return params, nil
}

// compareParams orders params by key, then value.
func compareParams(a, b Param) int {
	if c := cmp.Compare(a.Key, b.Key); c != 0 {
		return c
	}
	return cmp.Compare(a.Value, b.Value)
}

// sortedParams returns params sorted: params itself when it already is (as
// after Parse), else a sorted copy.
func sortedParams(params []Param) []Param {
	if slices.IsSortedFunc(params, compareParams) {
		return params
	}
	params = slices.Clone(params)
	slices.SortFunc(params, compareParams)
	return params
}

// parseDirectives parses the fragment: comma-separated alt=<xdstp URL> and
// entry=<name>, each at most once.
func (n *Name) parseDirectives(s, frag string) error {
	seenAlt, seenEntry := false, false
	for d := range strings.SplitSeq(frag, ",") {
		key, val, ok := strings.Cut(d, "=")
		if !ok || val == "" {
			return parseErr(s, ErrBadDirective, fmt.Sprintf("processing directive %q is not key=value", short(d)))
		}
		switch key {
		case "alt":
			if seenAlt {
				return parseErr(s, ErrRepeatedDirective, `processing directive "alt" repeated`)
			}
			seenAlt = true
			alt, err := parseAlt(val)
			if err != nil {
				return parseErr(s, ErrBadAlt, "bad alt URL: "+err.Error())
			}
			n.Alt = alt
		case "entry":
			if seenEntry {
				return parseErr(s, ErrRepeatedDirective, `processing directive "entry" repeated`)
			}
			seenEntry = true
			for i := 0; i < len(val); i++ {
				if !entrySafe[val[i]] {
					return parseErr(s, ErrBadEntry, fmt.Sprintf("entry %q: invalid character %q (want [a-zA-Z0-9_-./~:]+)", short(val), val[i]))
				}
			}
			n.Entry = val
		default:
			return parseErr(s, ErrUnknownDirective, fmt.Sprintf("unknown processing directive %q (want alt or entry)", short(key)))
		}
	}
	return nil
}

// parseAlt parses the value of an alt directive: an xdstp name without
// directives of its own. It returns its canonical form. A value with a
// fragment is refused before it is parsed, so nested alt directives cost
// one pass over the name, not one per level.
func parseAlt(val string) (string, error) {
	if strings.IndexByte(val, '#') >= 0 {
		return "", fmt.Errorf("%q has processing directives of its own", short(val))
	}
	alt, err := Parse(val)
	switch {
	case err == ErrNotXDSTP:
		return "", fmt.Errorf("%q is not an xdstp URL", short(val))
	case err != nil:
		return "", err
	}
	return alt.String(), nil
}

// maxQuoted bounds how much of a name an error message quotes.
const maxQuoted = 200

// maxQuotedPart bounds how much of one part of a name (a type, a
// parameter, a directive) an error message quotes besides the name.
const maxQuotedPart = 64

// short returns s, or its first maxQuotedPart bytes and "…".
func short(s string) string {
	if len(s) <= maxQuotedPart {
		return s
	}
	return s[:maxQuotedPart] + "…"
}

// parseError is a malformed xdstp name: the name, what is wrong, and the
// sentinel it wraps.
type parseError struct {
	name   string
	kind   error
	detail string
}

func parseErr(name string, kind error, detail string) error {
	return &parseError{name: name, kind: kind, detail: detail}
}

func (e *parseError) Error() string {
	name := e.name
	if len(name) > maxQuoted {
		return "xdstp name " + strconv.Quote(name[:maxQuoted]) + "…: " + e.detail
	}
	return "xdstp name " + strconv.Quote(name) + ": " + e.detail
}

func (e *parseError) Unwrap() error { return e.kind }
