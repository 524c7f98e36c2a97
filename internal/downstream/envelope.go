package downstream

import (
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/xds-relay/xds-relay/internal/cache"
)

// resourceWrapperType is the type URL of envoy.service.discovery.v3.Resource,
// the SotW wrapper that carries a TTL (spec: "SotW TTL").
var resourceWrapperType = "type.googleapis.com/" + string((&discoveryv3.Resource{}).ProtoReflect().Descriptor().FullName())

// deltaEnvelope wraps r for a delta client under the name it asked for. The
// body is r's shared Any: nothing is decoded or re-encoded. heartbeat sends
// name, version and TTL only. Nil when there is nothing to send.
func deltaEnvelope(name string, r *cache.Resource, heartbeat bool) *discoveryv3.Resource {
	env := &discoveryv3.Resource{Name: name, Version: r.Version, Ttl: r.TTL}
	if !heartbeat {
		if r.Body == nil {
			return nil
		}
		env.Resource = r.Body
	}
	return env
}

// sotwEnvelope returns what goes in DiscoveryResponse.resources for r: its
// shared Any as is, or, when r has a TTL, the Resource wrapper (heartbeat:
// without the body). Nil when there is nothing to send.
func sotwEnvelope(name string, r *cache.Resource, heartbeat bool) *anypb.Any {
	if r.TTL == nil && !heartbeat {
		return r.Body
	}
	env := deltaEnvelope(name, r, heartbeat)
	if env == nil {
		return nil
	}
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(env)
	if err != nil {
		return nil // cannot happen: env holds only well-formed fields
	}
	return &anypb.Any{TypeUrl: resourceWrapperType, Value: b}
}
