package downstream

import (
	"fmt"
	"strconv"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/xds-relay/xds-relay/internal/cache"
	"github.com/xds-relay/xds-relay/internal/xdstype"
)

// The fan-out's fast path. Most of a fleet subscribes to the same resources
// by their canonical names, and most origin changes only bring new
// revisions. For such a client and such a change, the response is the
// change's resources, each encoded once for every client
// (cache.Resource.Encoding), and this client's nonce: no lookups, no diff.
// Anything else (collections, removals, forced names, a client that
// already has a revision, several changes pending) takes the general
// path (collectLocked, then the variant's response builder).

// sharedLocked builds this session's response from the shared encoding of
// its one pending origin change, when that is exactly what it has to send;
// ok is false otherwise and nothing was changed. On success the round
// has the change (done once the response is sent).
func (ss *session) sharedLocked() (m outMsg, rd *round, ok bool) {
	cs, ts, ok := ss.sharedChangeLocked()
	if !ok {
		return outMsg{}, nil, false
	}
	revs := cs.Revisions()
	resp := newEncodedResponse(len(revs))
	size := 0
	for _, r := range revs {
		e := entryFor(ss.variant, ts, r.Key.Name, r.Res, false)
		if e == nil {
			return outMsg{}, nil, false
		}
		resp.shared = append(resp.shared, e)
		size += e.Len()
	}
	if size > ss.srv.entryRoom(ts.typeURL) {
		return outMsg{}, nil, false // over the send limit: the general path splits it (sendlimit.go)
	}

	seq := ss.nonce + 1 // delta: this response's nonce; SotW: its version_info
	if ss.variant == xdstype.SotW {
		seq = ts.version + 1
	}
	for _, r := range revs {
		h, ok := ts.sent.get(r.Key.Name)
		prev := ts.replacedLocked(r.Key.Name, h, ok) // propagation.go
		ts.sent.set(r.Key.Name, sentRevOf(r.Res, seq).withPrev(prev))
	}
	ts.prop.Sent(revs[0].Res.Change, seq, len(revs), time.Now()) // one change; nil-safe
	ss.resetDirtyLocked()
	ss.writer.roundLocked()
	rd = roundPool.Get().(*round)
	rd.sets = append(rd.sets, cs)
	clear(ss.sets)
	ss.sets = ss.sets[:0]

	own := ss.ownPartLocked(ts, resp.own, nil, nil)
	ss.srv.m.sharedResponses.WithLabelValues(typeLabel(ts.typeURL)).Inc()
	resp.own = own
	return outMsg{msg: resp, typeURL: ts.typeURL, count: len(revs)}, rd, true
}

// sharedChangeLocked reports whether all the session has to send is one
// origin change that the fast path can answer, and returns it with its
// type's state.
func (ss *session) sharedChangeLocked() (cs *cache.ChangeSet, ts *typeState, ok bool) {
	if !ss.srv.sharedEncoding || len(ss.sets) != 1 {
		return nil, nil, false
	}
	cs = ss.sets[0]
	revs := cs.Revisions()
	if len(revs) == 0 || ss.dirty.len() != len(revs) {
		return nil, nil, false
	}
	ts = ss.typeOf(cs.TypeURL())
	if ts == nil || len(ts.colls) > 0 || ts.evalAll || len(ts.force) > 0 || hasUnreported(ts) {
		return nil, nil, false
	}
	if ss.variant == xdstype.SotW && fullStateTypes[ts.typeURL] {
		return nil, nil, false // the response lists every subscribed resource
	}
	// Every key of the change that this session watches was notified, so
	// when it watches each of them and has as many dirty keys, the dirty
	// set is exactly the change.
	for _, r := range revs {
		if !ts.ownNameLocked(r.Key) || len(ts.byKey[r.Key]) > 0 {
			return nil, nil, false // another spelling: its own envelope
		}
		if h, ok := ts.sent.get(r.Key.Name); ok && !h.absent && h.version() == r.Res.Version {
			return nil, nil, false // has these bytes: a TTL change or nothing
		}
	}
	return cs, ts, true
}

// ownPartLocked issues a response's nonce (SotW: and version) and appends
// to own this client's own part of it, with removed (delta) and errs.
func (ss *session) ownPartLocked(ts *typeState, own []byte, removed []string, errs []*discoveryv3.ResourceError) []byte {
	nonce := ss.nextNonceLocked()
	ts.lastNonce = nonce
	if ss.variant == xdstype.Delta {
		return ss.srv.ownDelta(own, ts.typeURL, nonce, removed, errs)
	}
	ts.version++
	return ss.srv.ownSotW(own, ts.version, ts.typeURL, nonce, errs)
}

// ownDelta appends to own a delta response's own fields, those the client's
// resource entries follow: type_url, nonce, removed_resources, the
// control_plane every response carries, resource_errors.
func (s *Server) ownDelta(own []byte, typeURL, nonce string, removed []string, errs []*discoveryv3.ResourceError) []byte {
	own = appendString(own, deltaTypeURLField, typeURL)
	own = appendString(own, deltaNonceField, nonce)
	for _, n := range removed {
		own = protowire.AppendTag(own, deltaRemovedField, protowire.BytesType)
		own = protowire.AppendString(own, n) // repeated: "" is sent too
	}
	own = append(own, s.controlPlaneDelta...)
	for _, e := range errs {
		own = appendMessage(own, deltaErrorsField, e)
	}
	return own
}

// ownSotW appends to own a SotW response's own fields: version_info, type_url,
// nonce, the control_plane every response carries, resource_errors.
func (s *Server) ownSotW(own []byte, version uint64, typeURL, nonce string, errs []*discoveryv3.ResourceError) []byte {
	var digits [20]byte
	own = protowire.AppendTag(own, sotwVersionField, protowire.BytesType)
	own = protowire.AppendBytes(own, strconv.AppendUint(digits[:0], version, 10))
	own = appendString(own, sotwTypeURLField, typeURL)
	own = appendString(own, sotwNonceField, nonce)
	own = append(own, s.controlPlaneSotW...)
	for _, e := range errs {
		own = appendMessage(own, sotwErrorsField, e)
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

	deltaRemovedField      = fieldNumber(&discoveryv3.DeltaDiscoveryResponse{}, "removed_resources")
	deltaControlPlaneField = messageFieldNumber(&discoveryv3.DeltaDiscoveryResponse{}, "control_plane")
	sotwControlPlaneField  = messageFieldNumber(&discoveryv3.DiscoveryResponse{}, "control_plane")
	deltaErrorsField       = messageFieldNumber(&discoveryv3.DeltaDiscoveryResponse{}, "resource_errors")
	sotwErrorsField        = messageFieldNumber(&discoveryv3.DiscoveryResponse{}, "resource_errors")
)

func fieldNumber(m proto.Message, name protoreflect.Name) protowire.Number {
	return fieldOfKind(m, name, protoreflect.StringKind)
}

func messageFieldNumber(m proto.Message, name protoreflect.Name) protowire.Number {
	return fieldOfKind(m, name, protoreflect.MessageKind)
}

func fieldOfKind(m proto.Message, name protoreflect.Name, kind protoreflect.Kind) protowire.Number {
	f := m.ProtoReflect().Descriptor().Fields().ByName(name)
	if f == nil || f.Kind() != kind {
		panic(fmt.Sprintf("downstream: %s has no %v field %s", m.ProtoReflect().Descriptor().FullName(), kind, name))
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
