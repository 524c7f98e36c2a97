package xdstype

import (
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
)

// ResourceWrapperURL is the type URL of envoy.service.discovery.v3.Resource,
// the wrapper a SotW response uses for a resource that carries a TTL (or
// for a heartbeat, without the resource).
const ResourceWrapperURL = resourcev3.APITypePrefix + "envoy.service.discovery.v3.Resource"
