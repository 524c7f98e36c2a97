package downstream

import (
	lru "github.com/hashicorp/golang-lru/v2"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/xds-relay/xds-relay/internal/cache"
	"github.com/xds-relay/xds-relay/internal/xdstype"
)

// deltaEnvelope wraps r for a delta client under the name it asked for
// (for a name asked by alias, the resource's own). The body is r's shared
// Any, and the origin's aliases, metadata and cache control are r's as
// sent: nothing is decoded or re-encoded. heartbeat sends name, version
// and TTL only. Nil when there is nothing to send.
func deltaEnvelope(name string, r *cache.Resource, heartbeat bool) *discoveryv3.Resource {
	env := &discoveryv3.Resource{Name: name, Version: r.Version, Ttl: r.TTL}
	if !heartbeat {
		if r.Body == nil {
			return nil
		}
		env.Resource = r.Body
		env.Aliases, env.Metadata, env.CacheControl = r.Aliases, r.Metadata, r.CacheControl
	}
	return env
}

// sotwWrapped reports whether r goes to a SotW client taking wrap in the
// Resource wrapper (sotwEnvelopeFor), not as its body alone.
func sotwWrapped(r *cache.Resource, heartbeat bool, wrap sotwWrap) bool {
	return heartbeat || wrap&wrapAll != 0 || (r.TTL != nil && wrap&wrapTTL != 0) || (r.HasFields() && wrap&wrapFields != 0)
}

// wrapperCacheSize bounds the SotW TTL wrappers kept for reuse.
const wrapperCacheSize = 4096

// wrapperKey names one SotW TTL wrapper: a revision, under one name,
// with or without its body.
type wrapperKey struct {
	res       *cache.Resource
	name      string
	heartbeat bool
}

// newWrapperCache returns the shared cache of SotW TTL wrappers: every
// client receiving the same revision under the same name shares one
// marshalled wrapper.
func newWrapperCache() *lru.Cache[wrapperKey, *anypb.Any] {
	c, err := lru.New[wrapperKey, *anypb.Any](wrapperCacheSize)
	if err != nil {
		panic(err) // only for a size <= 0
	}
	return c
}

// sotwEnvelopeFor returns what goes in DiscoveryResponse.resources for r:
// its shared Any as is, or the Resource wrapper (heartbeat: without the
// body) when the client takes it for r (wrap, features.go): r has a TTL
// and the client takes TTLs, or r carries the origin's aliases, metadata
// or cache control and the client takes the wrapper. The wrapper is
// marshalled once for every client (wrappers may be nil: no sharing). Nil
// when there is nothing to send.
func sotwEnvelopeFor(wrappers *lru.Cache[wrapperKey, *anypb.Any], name string, r *cache.Resource, heartbeat bool, wrap sotwWrap) *anypb.Any {
	if !sotwWrapped(r, heartbeat, wrap) {
		return r.Body
	}
	k := wrapperKey{res: r, name: name, heartbeat: heartbeat}
	if wrappers != nil {
		if a, ok := wrappers.Get(k); ok {
			return a
		}
	}
	env := deltaEnvelope(name, r, heartbeat)
	if env == nil {
		return nil
	}
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(env)
	if err != nil {
		return nil // cannot happen: env holds only well-formed fields
	}
	a := &anypb.Any{TypeUrl: xdstype.ResourceWrapperURL, Value: b}
	if wrappers != nil {
		wrappers.Add(k, a)
	}
	return a
}

// entryKey names one encoding of a revision as a response entry
// (cache.Resource.Encoding): per variant; with the name and heartbeat
// when the entry carries them (every delta entry, a SotW entry in the
// Resource wrapper); for SotW, whether it is in the wrapper.
type entryKey struct {
	variant   xdstype.Variant
	name      string
	heartbeat bool
	wrapped   bool
}

// The resources field of each response, by number from the generated
// descriptors.
var (
	deltaResourcesField = messageFieldNumber(&discoveryv3.DeltaDiscoveryResponse{}, "resources")
	sotwResourcesField  = messageFieldNumber(&discoveryv3.DiscoveryResponse{}, "resources")
)

// deltaEntry returns r's encoding as one entry of
// DeltaDiscoveryResponse.resources under name (deltaEnvelope), made once
// per revision and name and shared by every client sent it; nil when
// there is nothing to send.
func deltaEntry(name string, r *cache.Resource, heartbeat bool) mem.Buffer {
	b, _ := cache.EncodingOf(r, entryKey{variant: xdstype.Delta, name: name, heartbeat: heartbeat}, func() any {
		env := deltaEnvelope(name, r, heartbeat)
		if env == nil {
			return nil
		}
		return entryBuffer(appendMessage(nil, deltaResourcesField, env))
	}).(mem.Buffer)
	return b
}

// sotwEntry returns r's encoding as one entry of
// DiscoveryResponse.resources for a client taking wrap (sotwEnvelopeFor),
// made once per revision and envelope and shared by every client sent it;
// nil when there is nothing to send.
func sotwEntry(name string, r *cache.Resource, heartbeat bool, wrap sotwWrap) mem.Buffer {
	k := entryKey{variant: xdstype.SotW}
	if sotwWrapped(r, heartbeat, wrap) {
		k.name, k.heartbeat, k.wrapped = name, heartbeat, true
	}
	b, _ := cache.EncodingOf(r, k, func() any {
		a := sotwEnvelopeFor(nil, name, r, heartbeat, wrap)
		if a == nil {
			return nil
		}
		return entryBuffer(appendMessage(nil, sotwResourcesField, a))
	}).(mem.Buffer)
	return b
}

// entryFor is r's entry under name for a client of variant taking ts's
// envelope (heartbeat: without the body); nil when there is nothing to
// send.
func entryFor(variant xdstype.Variant, ts *typeState, name string, r *cache.Resource, heartbeat bool) mem.Buffer {
	if variant == xdstype.Delta {
		return deltaEntry(name, r, heartbeat)
	}
	return sotwEntry(name, r, heartbeat, ts.wrap)
}

// entryBuffer is b as the buffer gRPC writes, boxed once; nil for none.
func entryBuffer(b []byte) any {
	if b == nil {
		return nil
	}
	return mem.Buffer(mem.SliceBuffer(b))
}

// appendMessage appends m as field n, as proto.Marshal would (maps in a
// stable order: the bytes are shared, so the same for every client).
func appendMessage(b []byte, n protowire.Number, m proto.Message) []byte {
	body, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	if err != nil {
		return nil // cannot happen: m holds only well-formed fields
	}
	b = protowire.AppendTag(b, n, protowire.BytesType)
	return protowire.AppendBytes(b, body)
}
