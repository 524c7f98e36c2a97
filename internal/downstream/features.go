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
// envoy.service.discovery.v3.Resource wrapper rather than bare.
type sotwWrap uint8

const (
	// wrapNone: every resource bare (the client advertised neither
	// feature: it may not unwrap).
	wrapNone sotwWrap = iota
	// wrapFields: xdstype.FeatureResourceInSotW: resources the origin sent
	// with aliases, metadata or cache control, so they reach the client.
	wrapFields
	// wrapTTL: xdstype.FeatureResourceTTL: those, resources with a TTL,
	// and heartbeats.
	wrapTTL
)

// sotwWrapOf returns what the client of node takes in the wrapper.
func sotwWrapOf(node *corev3.Node) sotwWrap {
	switch {
	case supportsTTL(node):
		return wrapTTL
	case slices.Contains(node.GetClientFeatures(), xdstype.FeatureResourceInSotW):
		return wrapFields
	}
	return wrapNone
}
