package downstream

import (
	"strconv"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/xds-relay/xds-relay/internal/cache"
)

// The fan-out's fast path. Most of a fleet subscribes to the same resources
// by their canonical names, and most origin changes only bring new
// revisions. For such a client and such a change, the response is the
// change's resources, encoded once for every client (ChangeSet.Memo), and
// this client's nonce: no lookups, no per-client encoding of resources.
// Anything else (collections, removals, forced names, a client that
// already holds a revision, several changes pending) takes the general
// path (collectLocked, then the variant's response builder).

// sharedKey names a change's shared encoding for one variant in its Memo.
type sharedKey struct{ variant string }

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
	if ss.variant == variantSotW && fullStateTypes[ts.typeURL] {
		return outMsg{}, nil, false // the response lists every subscribed resource
	}
	for _, r := range revs {
		if _, dirty := ss.dirty[r.Key]; !dirty {
			return outMsg{}, nil, false
		}
		names := ts.byKey[r.Key]
		if len(names) != 1 || names[0] != r.Key.Name {
			return outMsg{}, nil, false // another spelling: its own envelope
		}
		if h, held := ts.sent[r.Key.Name]; held && !h.absent && h.version == r.Res.Version {
			return outMsg{}, nil, false // holds these bytes: a TTL change or nothing
		}
	}
	shared := ss.srv.sharedResources(cs, ss.variant)
	if shared == nil {
		return outMsg{}, nil, false
	}

	for _, r := range revs {
		ts.sent[r.Key.Name] = held{res: r.Res, version: r.Res.Version}
	}
	ss.resetDirtyLocked()
	ss.rerun = false
	rd = roundPool.Get().(*round)
	rd.sets = append(rd.sets, cs)
	clear(ss.sets)
	ss.sets = ss.sets[:0]

	nonce := ss.nextNonceLocked()
	ts.lastNonce = nonce
	var own proto.Message
	if ss.variant == variantDelta {
		own = &discoveryv3.DeltaDiscoveryResponse{TypeUrl: ts.typeURL, Nonce: nonce}
	} else {
		ts.version++
		own = &discoveryv3.DiscoveryResponse{TypeUrl: ts.typeURL, Nonce: nonce, VersionInfo: strconv.FormatUint(ts.version, 10)}
	}
	b, err := proto.Marshal(own)
	if err != nil {
		// Cannot happen (two strings); the general path would fail alike.
		rd.release()
		return outMsg{}, nil, false
	}
	ss.srv.m.sharedResponses.WithLabelValues(typeLabel(ts.typeURL)).Inc()
	return outMsg{msg: &encodedResponse{own: b, shared: shared}, typeURL: ts.typeURL, count: len(revs)}, rd, true
}

// sharedResources returns the encoding of a change's revisions as the
// resources of a response of variant, under their canonical names: built
// once per change and variant, then shared by every client. nil when it
// cannot be built.
func (s *Server) sharedResources(cs *cache.ChangeSet, variant string) []byte {
	b, _ := cs.Memo(sharedKey{variant: variant}, func() any {
		revs := cs.Revisions()
		var msg proto.Message
		if variant == variantDelta {
			rs := make([]*discoveryv3.Resource, 0, len(revs))
			for _, r := range revs {
				rs = append(rs, deltaEnvelope(r.Key.Name, r.Res, false))
			}
			msg = &discoveryv3.DeltaDiscoveryResponse{Resources: rs}
		} else {
			rs := make([]*anypb.Any, 0, len(revs))
			for _, r := range revs {
				a := sotwEnvelope(s.wrappers, r.Key.Name, r.Res, false)
				if a == nil {
					return []byte(nil)
				}
				rs = append(rs, a)
			}
			msg = &discoveryv3.DiscoveryResponse{Resources: rs}
		}
		b, err := proto.Marshal(msg)
		if err != nil {
			return []byte(nil)
		}
		return b
	}).([]byte)
	return b
}

// resetDirtyLocked empties the dirty set after the shared path took all of
// it: a set sized for a large change is not kept.
func (ss *session) resetDirtyLocked() {
	if len(ss.dirty) <= smallDirty {
		clear(ss.dirty)
		return
	}
	if ss.spare != nil {
		ss.dirty, ss.spare = ss.spare, nil
		return
	}
	ss.dirty = make(map[cache.Key]struct{})
}
