package upstream

import (
	"fmt"
	"maps"
	"slices"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"go.uber.org/zap"
	statuspb "google.golang.org/genproto/googleapis/rpc/status"

	"github.com/xds-relay/xds-relay/internal/cache"
	"github.com/xds-relay/xds-relay/internal/xdstype"
)

// The NACK breaker's NACK toward the origin (package delivery holds
// versions clients rejected, and tells the origin). It is sent once, by
// the link's run goroutine at its next sync, on the stream it has then,
// after the relay applied and ACKed the response that brought the
// version:
//
//   - delta: a request carrying the nonce of the response that last
//     brought one of the held resources on this stream (the type's latest
//     response when none did), with the error_detail;
//   - SotW: the request the relay last sent for the type again (its
//     names, the version_info it last accepted, the nonce of the type's
//     latest response) with the error_detail. go-control-plane ignores a
//     request whose nonce is not the type's latest (it still runs its
//     callbacks), and takes one that is as a NACK of the version it names:
//     it opens a watch at that version, which is the one it has, so it
//     sends nothing again; an origin that does answer with the same
//     content sends the relay nothing new (the same revision is no change,
//     the relay ACKs it and the breaker does not NACK again).
//
// A relay above recognises it (xdstype.BreakerDetail) and counts it as
// enough to trip its own breaker. Counted in
// xds_relay_upstream_nacks_total (reason breaker).

// nackBreaker is the reason label of the breaker's NACKs.
const nackBreaker = "breaker"

// NackHeld asks link id's stream to NACK typeURL with detail (see above).
// Several before the link's next sync: the latest of a type is sent. An
// unknown link: nothing.
func (m *Manager) NackHeld(id cache.LinkID, typeURL string, detail *statuspb.Status) {
	m.mu.Lock()
	l := m.links[id]
	m.mu.Unlock()
	if l == nil {
		return
	}
	l.mu.Lock()
	if l.heldNacks == nil {
		l.heldNacks = make(map[string]*statuspb.Status)
	}
	l.heldNacks[typeURL] = detail
	l.mu.Unlock()
	l.wake()
}

// takeHeldNacks returns the breaker NACKs asked for since the last sync,
// by type, and forgets them.
func (l *link) takeHeldNacks() map[string]*statuspb.Status {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.heldNacks
	l.heldNacks = nil
	return out
}

// noteHeldNack counts and logs a breaker NACK of type t sent.
func (l *link) noteHeldNack(t, nonce string, detail *statuspb.Status) {
	l.mgr.metrics.nacks.WithLabelValues(xdstype.Label(t), nackBreaker).Inc()
	l.lg.Warn("origin NACKed: the relay's NACK breaker holds versions its clients rejected", zap.String("type_url", t),
		zap.String("nonce", nonce), zap.String("error", detail.GetMessage()))
}

// sotwHeldNacks sends the breaker NACKs asked for, on a SotW stream: a
// type the stream has not received a response of is not NACKed.
func (l *link) sotwHeldNacks(ads sotwStream, types map[string]*sotwType) error {
	nacks := l.takeHeldNacks()
	for _, t := range slices.Sorted(maps.Keys(nacks)) {
		cur := types[t]
		if cur == nil || cur.nonce == "" {
			continue
		}
		req := &discoveryv3.DiscoveryRequest{TypeUrl: t, ResourceNames: cur.names, VersionInfo: l.sotwVersions[t],
			ResponseNonce: cur.nonce, ErrorDetail: nacks[t]}
		if err := l.sotwSend(ads, cur, req); err != nil {
			return err
		}
		l.noteHeldNack(t, cur.nonce, nacks[t])
	}
	return nil
}

// deltaHeldNacks sends the breaker NACKs asked for, on a delta stream.
func (l *link) deltaHeldNacks(ads deltaStream, st *deltaState) error {
	nacks := l.takeHeldNacks()
	for _, t := range slices.Sorted(maps.Keys(nacks)) {
		nonce := st.lastNonce[t]
		if held, ok := xdstype.BreakerVersions(nacks[t]); ok {
			for _, n := range slices.Sorted(maps.Keys(held)) {
				if c := st.carriedBy[t][n]; c != "" {
					nonce = c
					break
				}
			}
		}
		if nonce == "" {
			continue // nothing of the type received on this stream
		}
		if err := ads.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: t, ResponseNonce: nonce, ErrorDetail: nacks[t]}); err != nil {
			return fmt.Errorf("upstream %s: send NACK: %w", l.id.Authority, err)
		}
		l.noteHeldNack(t, nonce, nacks[t])
	}
	return nil
}

// noteCarried records that response nonce of type t brought u's
// resources (what deltaHeldNacks NACKs by).
func (st *deltaState) noteCarried(t, nonce string, u cache.Update) {
	st.lastNonce[t] = nonce
	by := st.carriedBy[t]
	if by == nil {
		by = make(map[string]string)
		st.carriedBy[t] = by
	}
	for _, r := range u.Resources {
		if c, err := cache.CanonicalName(r.Name); err == nil && !r.Heartbeat {
			by[c] = nonce
		}
	}
	for _, n := range u.Removed {
		delete(by, n)
	}
}
