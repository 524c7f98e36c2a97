package downstream

import (
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"

	"github.com/xds-relay/xds-relay/internal/xdstype"
)

// fullStateTypes are the types whose SotW responses carry every resource
// the client subscribed to (spec: "Grouping Resources into Responses";
// Envoy also treats scoped route configurations as state of the world).
var fullStateTypes = map[string]bool{
	resourcev3.ListenerType:    true,
	resourcev3.ClusterType:     true,
	resourcev3.ScopedRouteType: true,
}

// typeOrder sequences responses built on one wake-up "make before break"
// (spec: "Eventual consistency considerations"): clusters, endpoints,
// listeners, routes, then the rest. LEDS endpoints go with endpoints.
func typeOrder(typeURL string) int {
	switch typeURL {
	case resourcev3.ClusterType:
		return 0
	case resourcev3.EndpointType, xdstype.LbEndpointType:
		return 1
	case resourcev3.ListenerType:
		return 2
	case resourcev3.RouteType:
		return 3
	case resourcev3.ScopedRouteType:
		return 4
	case resourcev3.VirtualHostType:
		return 5
	}
	return 6
}
