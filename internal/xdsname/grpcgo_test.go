package xdsname

import (
	"maps"
	"net/url"
	"slices"
	"strings"
)

// grpcName is how grpc-go's xDS client (xdsresource.ParseName) sees a name:
// net/url parses it, the decoded path splits into "/type/id", the query is
// decoded with url.Values (first value of a key wins, pairs with ';' are
// dropped), the fragment is dropped on output.
type grpcName struct {
	authority, typ, id string
	params             map[string]string
}

// grpcParse mirrors grpc-go's ParseName for xdstp names; ok is false where
// grpc-go would fall back to treating the name as a legacy name.
func grpcParse(s string) (grpcName, bool) {
	u, err := url.Parse(s)
	if err != nil || u.Scheme != "xdstp" {
		return grpcName{}, false
	}
	parts := strings.SplitN(u.Path, "/", 3)
	if len(parts) < 3 {
		return grpcName{}, false
	}
	// u.Query() silently drops pairs it cannot parse (those with ';'):
	// grpc-go then subscribes to another name. Call that not handled.
	query, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return grpcName{}, false
	}
	g := grpcName{authority: u.Host, typ: parts[1], id: parts[2], params: map[string]string{}}
	for k, vs := range query {
		if len(vs) > 0 {
			g.params[k] = vs[0]
		}
	}
	return g, true
}

// String mirrors grpc-go's Name.String: sorted "k=v" pairs joined raw, and
// url.URL{Scheme, Host, Path, RawQuery}.String().
func (g grpcName) String() string {
	var pairs []string
	for _, k := range slices.Sorted(maps.Keys(g.params)) {
		pairs = append(pairs, k+"="+g.params[k])
	}
	path := g.typ
	if g.id != "" {
		path = "/" + g.typ + "/" + g.id
	}
	u := url.URL{Scheme: "xdstp", Host: g.authority, Path: path, RawQuery: strings.Join(pairs, "&")}
	return u.String()
}

// grpcHandles reports whether grpc-go parses s as an xdstp name and reads
// its own canonical string back as the same name; it returns that string.
func grpcHandles(s string) (string, bool) {
	g, ok := grpcParse(s)
	if !ok {
		return "", false
	}
	out := g.String()
	back, ok := grpcParse(out)
	if !ok || back.authority != g.authority || back.typ != g.typ || back.id != g.id || !maps.Equal(back.params, g.params) {
		return "", false
	}
	return out, true
}
