package downstream

import (
	"fmt"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"

	"github.com/xds-relay/xds-relay/internal/aggregation"
	"github.com/xds-relay/xds-relay/internal/cache"
)

// Resolution is where a requested name is served from.
type Resolution struct {
	Key cache.Key
	// Collection: Key names a wildcard or glob collection; its members
	// are served.
	Collection bool
}

// Resolver maps a requested name ("*" for the wildcard) of typeURL, as
// node asked for it, to a cache key. Errors wrap ErrMalformedName,
// ErrUnknownAuthority or ErrNoRule.
type Resolver interface {
	Resolve(typeURL, name string, node *corev3.Node) (Resolution, error)
}

// Matcher is the aggregation side of resolving; *aggregation.Rules
// implements it.
type Matcher interface {
	Match(req aggregation.Request) (aggregation.Result, error)
}

// xdstpName is what resolving needs of a parsed xdstp name.
type xdstpName struct {
	authority    string
	resourceType string // e.g. envoy.config.listener.v3.Listener
	canonical    string
	glob         bool
}

// NameResolver resolves xdstp names by their authority and canonical form,
// and legacy names (and the wildcard) through aggregation rules.
type NameResolver struct {
	authorities map[string]struct{} // read-only after NewResolver
	rules       Matcher             // read-only after NewResolver
	parse       func(string) (xdstpName, error)
}

// NewResolver returns a resolver for the configured authorities and rules.
func NewResolver(authorities []string, rules Matcher) *NameResolver {
	r := &NameResolver{authorities: make(map[string]struct{}, len(authorities)), rules: rules, parse: parseXDSTP}
	for _, a := range authorities {
		r.authorities[a] = struct{}{}
	}
	return r
}

const xdstpScheme = "xdstp:"

// Resolve implements Resolver.
func (r *NameResolver) Resolve(typeURL, name string, node *corev3.Node) (Resolution, error) {
	if strings.HasPrefix(name, xdstpScheme) {
		n, err := r.parse(name)
		if err != nil {
			return Resolution{}, fmt.Errorf("%w: %q: %v", ErrMalformedName, name, err)
		}
		if want := typeURL[strings.LastIndexByte(typeURL, '/')+1:]; n.resourceType != want {
			return Resolution{}, fmt.Errorf("%w: %q names type %s, requested as %s", ErrMalformedName, name, n.resourceType, want)
		}
		if _, ok := r.authorities[n.authority]; !ok {
			return Resolution{}, fmt.Errorf("%w: %q: authority %q", ErrUnknownAuthority, name, n.authority)
		}
		return Resolution{
			Key:        cache.Key{Stream: cache.StreamID{Authority: n.authority}, TypeURL: typeURL, Name: n.canonical},
			Collection: n.glob,
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
	if err != nil {
		return Resolution{}, fmt.Errorf("%w: %v", ErrNoRule, err)
	}
	return Resolution{
		Key:        cache.Key{Stream: cache.StreamID{Authority: res.Authority, Group: res.Group}, TypeURL: typeURL, Name: name},
		Collection: name == cache.Wildcard,
	}, nil
}
