package downstream

import (
	"fmt"
	"strconv"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/xds-relay/xds-relay/internal/cache"
	"github.com/xds-relay/xds-relay/internal/xdstype"
)

// The fan-out's fast path. Most of a fleet subscribes to the same resources
// by their canonical names, and most origin changes only bring new
// revisions. For such a client and such a change, the response is the
// change's resources, encoded once for every client (ChangeSet.Memo), and
// this client's nonce: no lookups, no per-client encoding of resources.
// Anything else (collections, removals, forced names, a client that
// already holds a revision, several changes pending) takes the general
// path (collectLocked, then the variant's response builder).

// sharedKey names a change's shared encoding in its Memo: one per variant
// and, for SotW, what the clients take in the Resource wrapper.
type sharedKey struct {
	variant xdstype.Variant
	wrap    sotwWrap
}

// sharedLocked builds this session's response from the shared encoding of
// its one pending origin change, when that is exactly what it has to send;
// ok is false otherwise and nothing was changed. On success the round
// holds the change (done once the response is sent).
func (ss *session) sharedLocked() (m outMsg, rd *round, ok bool) {
	if !ss.srv.sharedEncoding || len(ss.sets) != 1 {
		return outMsg{}, nil, false
	}
	cs := ss.sets[0]
	revs := cs.Revisions()
	if len(revs) == 0 || len(ss.dirty) != len(revs) {
		return outMsg{}, nil, false
	}
	ts := ss.types[cs.TypeURL()]
	if ts == nil || len(ts.colls) > 0 || ts.evalAll || len(ts.force) > 0 || hasUnreported(ts) {
		return outMsg{}, nil, false
	}
	if ss.variant == xdstype.SotW && fullStateTypes[ts.typeURL] {
		return outMsg{}, nil, false // the response lists every subscribed resource
	}
	// Every key of the change that this session watches was notified, so
	// when it watches each of them and has as many dirty keys, the dirty
	// set is exactly the change.
	for _, r := range revs {
		names := ts.byKey[r.Key]
		if len(names) != 1 || names[0] != r.Key.Name {
			return outMsg{}, nil, false // another spelling: its own envelope
		}
		if h, held := ts.sent[r.Key.Name]; held && !h.absent && h.version == r.Res.Version {
			return outMsg{}, nil, false // holds these bytes: a TTL change or nothing
		}
	}
	shared := ss.srv.sharedResources(cs, ss.variant, ts.wrap)
	if shared == nil {
		return outMsg{}, nil, false
	}

	seq := ss.nonce + 1 // delta: this response's nonce; SotW: its version_info
	if ss.variant == xdstype.SotW {
		seq = ts.version + 1
	}
	for _, r := range revs {
		ts.sent[r.Key.Name] = held{res: r.Res, version: r.Res.Version, seq: seq}
	}
	ss.resetDirtyLocked()
	ss.writer.roundLocked()
	rd = roundPool.Get().(*round)
	rd.sets = append(rd.sets, cs)
	clear(ss.sets)
	ss.sets = ss.sets[:0]

	own := ss.ownPartLocked(ts)
	ss.srv.m.sharedResponses.WithLabelValues(typeLabel(ts.typeURL)).Inc()
	return outMsg{msg: &encodedResponse{own: own, shared: shared}, typeURL: ts.typeURL, count: len(revs)}, rd, true
}

// ownPartLocked issues the shared response's nonce (SotW: and version) and
// encodes this client's own part of it: type_url, nonce (SotW: and
// version_info).
func (ss *session) ownPartLocked(ts *typeState) []byte {
	nonce := ss.nextNonceLocked()
	ts.lastNonce = nonce
	var own []byte
	if ss.variant == xdstype.Delta {
		own = appendString(own, deltaTypeURLField, ts.typeURL)
		own = appendString(own, deltaNonceField, nonce)
	} else {
		ts.version++
		own = appendString(own, sotwVersionField, strconv.FormatUint(ts.version, 10))
		own = appendString(own, sotwTypeURLField, ts.typeURL)
		own = appendString(own, sotwNonceField, nonce)
	}
	return own
}

// The response fields a client's own part sets, by number from the
// generated descriptors.
var (
	deltaTypeURLField = fieldNumber(&discoveryv3.DeltaDiscoveryResponse{}, "type_url")
	deltaNonceField   = fieldNumber(&discoveryv3.DeltaDiscoveryResponse{}, "nonce")
	sotwVersionField  = fieldNumber(&discoveryv3.DiscoveryResponse{}, "version_info")
	sotwTypeURLField  = fieldNumber(&discoveryv3.DiscoveryResponse{}, "type_url")
	sotwNonceField    = fieldNumber(&discoveryv3.DiscoveryResponse{}, "nonce")
)

func fieldNumber(m proto.Message, name protoreflect.Name) protowire.Number {
	f := m.ProtoReflect().Descriptor().Fields().ByName(name)
	if f == nil || f.Kind() != protoreflect.StringKind {
		panic(fmt.Sprintf("downstream: %s has no string field %s", m.ProtoReflect().Descriptor().FullName(), name))
	}
	return f.Number()
}

// appendString appends a string field as proto.Marshal would (an empty
// string is left out, as proto3 does).
func appendString(b []byte, n protowire.Number, v string) []byte {
	if v == "" {
		return b
	}
	b = protowire.AppendTag(b, n, protowire.BytesType)
	return protowire.AppendString(b, v)
}

// sharedResources returns the encoding of a change's revisions as the
// resources of a response of variant, under their canonical names, with
// the control_plane every response carries: built
// once per change and variant (SotW: and wrap), then shared by every
// client. nil when it cannot be built.
func (s *Server) sharedResources(cs *cache.ChangeSet, variant xdstype.Variant, wrap sotwWrap) []byte {
	if variant == xdstype.Delta {
		wrap = wrapNone // the delta envelope is the same either way
	}
	b, _ := cs.Memo(sharedKey{variant: variant, wrap: wrap}, func() any {
		revs := cs.Revisions()
		var msg proto.Message
		if variant == xdstype.Delta {
			rs := make([]*discoveryv3.Resource, 0, len(revs))
			for _, r := range revs {
				rs = append(rs, deltaEnvelope(r.Key.Name, r.Res, false))
			}
			msg = &discoveryv3.DeltaDiscoveryResponse{Resources: rs, ControlPlane: s.controlPlane}
		} else {
			rs := make([]*anypb.Any, 0, len(revs))
			for _, r := range revs {
				a := sotwEnvelopeFor(s.wrappers, r.Key.Name, r.Res, false, wrap)
				if a == nil {
					return []byte(nil)
				}
				rs = append(rs, a)
			}
			msg = &discoveryv3.DiscoveryResponse{Resources: rs, ControlPlane: s.controlPlane}
		}
		b, err := proto.Marshal(msg)
		if err != nil {
			return []byte(nil)
		}
		return b
	}).([]byte)
	return b
}
