package upstream

import (
	"slices"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/proto"

	"github.com/xds-relay/xds-relay/internal/xdstype"
)

// clientFeatures are what the relay, as an xDS client, advertises to
// origins in node.client_features: it takes TTLs and heartbeats (delta
// and SotW) and unwraps SotW Resource wrappers, so an origin or a relay
// above that follows what clients advertise sends them.
var clientFeatures = []string{xdstype.FeatureResourceTTL, xdstype.FeatureResourceInSotW}

// withClientFeatures returns a copy of n that advertises clientFeatures
// besides its own; nil stays nil.
func withClientFeatures(n *corev3.Node) *corev3.Node {
	if n == nil {
		return nil
	}
	out := proto.Clone(n).(*corev3.Node)
	for _, f := range clientFeatures {
		if !slices.Contains(out.ClientFeatures, f) {
			out.ClientFeatures = append(out.ClientFeatures, f)
		}
	}
	return out
}
