package downstream

import (
	"fmt"
	"math"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"go.uber.org/zap"
	statuspb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"

	"github.com/xds-relay/xds-relay/internal/cache"
	"github.com/xds-relay/xds-relay/internal/xdstype"
)

// The send limit. No response is larger than downstream.max_send_msg_size
// (Options.MaxSendMsgSize), the limit the grpc.Server enforces: gRPC would
// end the client's stream with ResourceExhausted instead, and the client
// would get none of it.
//   - A response whose entries would take it past the limit is sent as
//     several, each within it, each with its own nonce (SotW: and
//     version_info) that the client answers (packLocked): delta responses,
//     and SotW responses of the types that are not full state (each names
//     only its resources). Whenever it fits, one change is one response.
//   - A SotW response of a full-state type (fullStateTypes) is the whole
//     state: the protocol allows no split. Over the limit it is not sent
//     (fullStateFits: counted, logged once per type until one fits again);
//     the client keeps the state it has, and the next response of the type
//     that fits brings it up to date.
//   - One resource whose entry alone cannot fit (larger than entryRoom)
//     is never sent: the client keeps what it has of that name (an
//     earlier revision, or nothing: the name stays pending), and is told
//     why in resource_errors (tooLarge: RESOURCE_EXHAUSTED, once per
//     revision); counted, logged once per revision. The rest of the
//     response goes out.
// Removals and resource errors go in a response's first part; they are
// bounded by the names a stream may keep (max_names_per_stream ×
// max_name_length: 20 MiB at the defaults), not split.
//
// The fan-out fast path (shared.go) adds up the lengths of the entries it
// already has (known: each encoded once per revision); a response that
// would not fit leaves it for the general path, which splits.

// ownSlack bounds what a response's own part takes besides its type URL
// and control_plane when it carries no removals or errors: the tags and
// lengths of three fields, a nonce and a version_info of 20 digits each.
const ownSlack = 64

// sendLimit is the most bytes one response may have.
func (s *Server) sendLimit() int {
	if s.maxSend <= 0 {
		return math.MaxInt32 // gRPC's default
	}
	return s.maxSend
}

// entryRoom is the most bytes one resource entry of typeURL may take: what
// a response carrying it alone leaves beside its own part.
func (s *Server) entryRoom(typeURL string) int {
	return s.sendLimit() - len(typeURL) - max(len(s.controlPlaneDelta), len(s.controlPlaneSotW)) - ownSlack
}

// tooLargeKey keys, in a revision's encodings memo (cache.Resource.Encoding),
// the resource error clients are sent for it when it cannot fit: made,
// and logged, once per revision.
type tooLargeKey struct{}

// tooLarge counts a resource of typeURL whose entry (size bytes) is too
// large to send, and returns the resource error its client is told;
// logged the first time for the revision.
func (s *Server) tooLarge(typeURL string, r *cache.Resource, size int) *statuspb.Status {
	s.m.oversize.WithLabelValues(typeLabel(typeURL), oversizeResource).Inc()
	st, _ := r.Encoding(tooLargeKey{}, func() any {
		s.lg.Warn("resource larger than downstream.max_send_msg_size: not sent; clients keep what they have of it",
			zap.String("type_url", typeURL), zap.String("name", clientText(r.Name)),
			zap.Int("size", size), zap.Int("limit", s.sendLimit()))
		return &statuspb.Status{Code: int32(codes.ResourceExhausted), Message: fmt.Sprintf(
			"xds-relay: this revision takes %d bytes, more than the relay may send in one response (downstream.max_send_msg_size: %d)",
			size, s.sendLimit())}
	}).(*statuspb.Status)
	return st
}

// fullStateFits reports whether a SotW full-state response of typeURL of
// size bytes may be sent; one that may not is counted, and logged once
// until a response of the type fits again.
func (s *Server) fullStateFits(typeURL string, size int) bool {
	logged := s.fullStateLogged[typeURL] // nil: a Server not made by New
	if size <= s.sendLimit() {
		if logged != nil && logged.Load() {
			logged.Store(false)
		}
		return true
	}
	s.m.oversize.WithLabelValues(typeLabel(typeURL), oversizeFullState).Inc()
	if logged == nil || !logged.Swap(true) {
		s.lg.Warn("SotW state-of-the-world response larger than downstream.max_send_msg_size: not sent (it cannot be split); clients keep the state they have",
			zap.String("type_url", typeURL), zap.Int("size", size), zap.Int("limit", s.sendLimit()))
	}
	return false
}

// packLocked appends to out ts's responses carrying d's updates, and
// removed and errs (in the first): one response when it fits the send
// limit, else as many as it takes, each within it. A resource of a later
// part is recorded as carried by that part's response (sentRev.seq).
func (ss *session) packLocked(out []outMsg, ts *typeState, d *diff, removed []string, errs []*discoveryv3.ResourceError) []outMsg {
	limit := ss.srv.sendLimit()
	resp := newEncodedResponse(len(d.updates))
	resp.own = ss.ownPartLocked(ts, resp.own, removed, errs)
	size, parts := len(resp.own), 1
	m := outMsg{msg: resp, typeURL: ts.typeURL, count: len(removed), errs: errs}
	for i := range d.updates {
		u := &d.updates[i]
		if u.entry == nil {
			continue
		}
		if size+u.entry.Len() > limit && (m.count > 0 || len(m.errs) > 0) {
			// Full: the next part. An entry fits one of its own
			// (updateLocked left out those larger than entryRoom).
			out = append(out, m)
			resp = newEncodedResponse(len(d.updates) - i)
			resp.own = ss.ownPartLocked(ts, resp.own, nil, nil)
			size, parts = len(resp.own), parts+1
			m = outMsg{msg: resp, typeURL: ts.typeURL}
		}
		resp.shared = append(resp.shared, u.entry)
		size += u.entry.Len()
		m.count++
		if parts > 1 {
			ts.restampLocked(u.name, ss.seqLocked(ts))
		}
	}
	if parts > 1 {
		ss.srv.m.splitResponses.WithLabelValues(typeLabel(ts.typeURL)).Inc()
	}
	return append(out, m)
}

// seqLocked is the seq (sentRev.seq) of ts's latest response: SotW its
// version_info, delta its nonce.
func (ss *session) seqLocked(ts *typeState) uint64 {
	if ss.variant == xdstype.SotW {
		return ts.version
	}
	return ss.nonce
}

// restampLocked records name as carried by the response seq.
func (ts *typeState) restampLocked(name string, seq uint64) {
	if h := ts.sent.ptr(name); h != nil {
		h.seq = seq
	}
}
