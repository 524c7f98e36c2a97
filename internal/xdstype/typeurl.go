package xdstype

import (
	"slices"
	"strings"

	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
)

// ResourceWrapperURL is the type URL of envoy.service.discovery.v3.Resource,
// the wrapper a SotW response uses for a resource that carries a TTL (or
// for a heartbeat, without the resource).
const ResourceWrapperURL = resourcev3.APITypePrefix + "envoy.service.discovery.v3.Resource"

// OtherLabel is the type label of every type URL that is not a known xDS
// resource type.
const OtherLabel = "other"

// known are the types a type label names: the resource types the relay
// serves (see the top-level README, "Served variants and types").
var known = map[string]bool{
	resourcev3.ListenerType: true, resourcev3.RouteType: true, resourcev3.ScopedRouteType: true,
	resourcev3.VirtualHostType: true, resourcev3.ClusterType: true, resourcev3.EndpointType: true,
	resourcev3.SecretType: true, resourcev3.RuntimeType: true, resourcev3.ExtensionConfigType: true,
}

// Label is the metric label of a type URL: a known resource type without
// "type.googleapis.com/" ("envoy.config.cluster.v3.Cluster"), anything else
// OtherLabel. ADS carries any type URL a client or an origin chooses; the
// label set stays bounded whatever they send.
func Label(typeURL string) string {
	if !known[typeURL] {
		return OtherLabel
	}
	return strings.TrimPrefix(typeURL, resourcev3.APITypePrefix)
}

// IsServed reports whether typeURL is one of the resource types the relay
// serves (what a label names).
func IsServed(typeURL string) bool { return known[typeURL] }

// Served returns the type URLs of the resource types the relay serves,
// sorted.
func Served() []string {
	out := make([]string, 0, len(known))
	for t := range known {
		out = append(out, t)
	}
	slices.Sort(out)
	return out
}

// Labels returns every value Label can return: the served types' labels,
// sorted, then OtherLabel. Metrics create their type series from it at
// start, so each exists at zero before the first event.
func Labels() []string {
	out := make([]string, 0, len(known)+1)
	for _, t := range Served() {
		out = append(out, Label(t))
	}
	return append(out, OtherLabel)
}
