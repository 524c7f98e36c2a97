package downstream

import (
	"slices"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"

	"github.com/xds-relay/xds-relay/internal/xdstype"
)

// supportsTTL reports whether the client of node advertised
// xdstype.FeatureResourceTTL: it takes per-resource TTLs, over SotW in the
// Resource wrapper, and heartbeats (a TTL refresh without the body) on
// either variant. Envoy advertises it; gRPC's clients do not. A client that did not is sent no heartbeat, and its
// SotW resources bare, never in the TTL wrapper.
func supportsTTL(node *corev3.Node) bool {
	return slices.Contains(node.GetClientFeatures(), xdstype.FeatureResourceTTL)
}

// sotwWrap is which SotW resources a client is sent in the
// envoy.service.discovery.v3.Resource wrapper rather than bare: a set of
// the bits below, none for a client that advertised neither feature (it
// may not unwrap), so every resource bare.
type sotwWrap uint8

const (
	wrapNone sotwWrap = 0
	// wrapFields: xdstype.FeatureResourceInSotW (or the TTL feature):
	// resources the origin sent with aliases, metadata or cache control,
	// so they reach the client.
	wrapFields sotwWrap = 1 << iota
	// wrapTTL: xdstype.FeatureResourceTTL: resources with a TTL, and
	// heartbeats.
	wrapTTL
	// wrapAll: every resource, for a client taking the wrapper, of a type
	// whose message carries no name the relay can read (xdstype.Named: an
	// operator's type with no name field, a google.protobuf.Struct): the
	// wrapper names it; bare, the client could not tell which it is.
	wrapAll
)

// sotwWrapOf returns what the client of node takes in the wrapper.
func sotwWrapOf(node *corev3.Node) sotwWrap {
	switch {
	case supportsTTL(node):
		return wrapFields | wrapTTL
	case slices.Contains(node.GetClientFeatures(), xdstype.FeatureResourceInSotW):
		return wrapFields
	}
	return wrapNone
}

// typeWrap is what a client taking wrap takes in the wrapper of typeURL:
// a client that takes the wrapper takes every resource of a nameless type
// in it.
func typeWrap(wrap sotwWrap, typeURL string) sotwWrap {
	if wrap != wrapNone && !xdstype.Named(typeURL) {
		return wrap | wrapAll
	}
	return wrap
}
