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
