package downstream

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"

	"github.com/xds-relay/xds-relay/internal/aggregation"
	"github.com/xds-relay/xds-relay/internal/cache"
	"github.com/xds-relay/xds-relay/internal/xdsname"
	"github.com/xds-relay/xds-relay/internal/xdstype"
)

// Resolution is where a requested name is served from.
type Resolution struct {
	Key cache.Key
	// Collection: Key names a wildcard or glob collection; its members
	// are served.
	Collection bool
	// Node is the Node to present upstream if Key's stream must be opened:
	// the one the aggregation rule sets; nil: the client's.
	Node *corev3.Node
}

// Resolver maps a requested name ("*" for the wildcard) of typeURL, as
// node asked for it, to a cache key. Errors wrap ErrMalformedName,
// ErrUnknownAuthority or ErrNoRule, or are aggregation.ErrRefused (a rule
// refuses the request). An xdstp name's resolution must not depend on
// node: the Server keeps it for every client that asks for the name
// (nametable.go), until the resolver is replaced.
type Resolver interface {
	Resolve(typeURL, name string, node *corev3.Node) (Resolution, error)
}

// Matcher is the aggregation side of resolving; *aggregation.Rules
// implements it.
type Matcher interface {
	Match(req aggregation.Request) (aggregation.Result, error)
}

// NameResolver resolves xdstp names by their authority and canonical form,
// and legacy names (and the wildcard) through aggregation rules.
type NameResolver struct {
	authorities map[string]struct{} // read-only after NewResolver
	rules       Matcher             // read-only after NewResolver
	// types: authority → the type URLs it carries (CarryTypes); an
	// authority not in it carries the served types. read-only once serving
	types map[string]map[string]bool
}

// NewResolver returns a resolver for the configured authorities and rules.
func NewResolver(authorities []string, rules Matcher) *NameResolver {
	r := &NameResolver{authorities: make(map[string]struct{}, len(authorities)), rules: rules}
	for _, a := range authorities {
		r.authorities[a] = struct{}{}
	}
	return r
}

// CarryTypes limits what each authority is asked for: types maps an
// authority to the type URLs it carries (config authorities[].types); an
// authority not in it carries every served type (xdstype.Served). A name
// of another type is answered as not existing (ErrTypeNotCarried) and
// never reaches an origin. A listed type need not be served (an
// operator's own or a newer type): it is carried over ADS like a served
// one, and labelled by its own name (xdstype.List). Call before serving.
func (r *NameResolver) CarryTypes(types map[string][]string) *NameResolver {
	r.types = make(map[string]map[string]bool, len(types))
	for a, ts := range types {
		set := make(map[string]bool, len(ts))
		for _, t := range ts {
			set[t] = true
		}
		r.types[a] = set
		xdstype.List(ts...)
	}
	return r
}

// carries reports whether authority is asked for typeURL.
func (r *NameResolver) carries(authority, typeURL string) bool {
	if set, ok := r.types[authority]; ok {
		return set[typeURL]
	}
	return xdstype.IsServed(typeURL)
}

// Resolve implements Resolver.
func (r *NameResolver) Resolve(typeURL, name string, node *corev3.Node) (Resolution, error) {
	if xdsname.IsXDSTP(name) {
		n, err := xdsname.Parse(name)
		if err != nil {
			return Resolution{}, fmt.Errorf("%w: %v", ErrMalformedName, err)
		}
		if !n.IsURN() && !n.IsGlob() {
			return Resolution{}, fmt.Errorf("%w: %s carries processing directives; a client requests URNs or globs", ErrMalformedName, quoteShort(name))
		}
		if t, ok := strings.CutPrefix(typeURL, resourcev3.APITypePrefix); !ok || t != n.Type {
			// Exactly: "x/<type>" is not the type, and must never reach
			// an origin as a subscription of that type.
			return Resolution{}, fmt.Errorf("%w: %s names type %s, requested as %s", ErrMalformedName, quoteShort(name), quoteShort(n.Type), quoteShort(typeURL))
		}
		if _, ok := r.authorities[n.Authority]; !ok {
			return Resolution{}, fmt.Errorf("%w: %s: authority %s", ErrUnknownAuthority, quoteShort(name), quoteShort(n.Authority))
		}
		if !r.carries(n.Authority, typeURL) {
			return Resolution{}, fmt.Errorf("%w: %s: authority %s carries no %s", ErrTypeNotCarried, quoteShort(name), quoteShort(n.Authority), quoteShort(typeURL))
		}
		// The caller's string when canonical (shared by every session
		// that asked for it), not a fresh copy per client.
		canonical := n.CanonicalFrom(name)
		return Resolution{
			Key:        cache.Key{Link: cache.LinkID{Authority: n.Authority}, TypeURL: typeURL, Name: canonical},
			Collection: n.IsGlob(),
		}, nil
	}
	req := aggregation.Request{TypeURL: typeURL, Name: name, Node: node}
	if name == cache.Wildcard {
		req.Name = ""
	}
	if r.rules == nil {
		return Resolution{}, fmt.Errorf("%w: no rules configured", ErrNoRule)
	}
	res, err := r.rules.Match(req)
	if errors.Is(err, aggregation.ErrRefused) {
		return Resolution{}, err // names the rule and its reason
	}
	if err != nil {
		// err repeats ErrNoRule's text; statusFor names type, name and node.
		return Resolution{}, ErrNoRule
	}
	if !r.carries(res.Authority, typeURL) {
		return Resolution{}, fmt.Errorf("%w: %s: authority %s carries no %s", ErrTypeNotCarried, quoteShort(name), quoteShort(res.Authority), quoteShort(typeURL))
	}
	return Resolution{
		Key:        cache.Key{Link: cache.LinkID{Authority: res.Authority, Group: res.Group}, TypeURL: typeURL, Name: name},
		Collection: name == cache.Wildcard,
		Node:       res.Node,
	}, nil
}

// quoteShort quotes s, cut as clientText cuts it: what a status or an
// error quotes of a client's name or type URL.
func quoteShort(s string) string { return strconv.Quote(clientText(s)) }
