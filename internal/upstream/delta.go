package upstream

import (
	"context"
	"fmt"
	"sort"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"go.uber.org/zap"
	statuspb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"

	"github.com/xds-relay/xds-relay/internal/cache"
	"github.com/xds-relay/xds-relay/internal/xdstype"
)

// deltaState is what one delta session told the origin. owned by the
// session goroutine.
type deltaState struct {
	nodeSent bool
	// sent: type → names subscribed upstream on this session.
	sent map[string]map[string]struct{}
	// awaiting: type → collections (globs, Wildcard) subscribed whose first
	// answer has not arrived; that answer completes them.
	awaiting map[string]map[string]struct{}
	// wildcardAnswered: type → the origin answered the Wildcard on this
	// session, so a new emulated glob is complete at once.
	wildcardAnswered map[string]bool
}

// deltaSession runs one delta ADS stream to origin until it fails or ctx
// ends.
func (s *stream) deltaSession(ctx context.Context, origin string) (bool, error) {
	return runSession(ctx, s, origin, TransportDelta, discoveryv3.AggregatedDiscoveryServiceClient.DeltaAggregatedResources,
		func(ads discoveryv3.AggregatedDiscoveryService_DeltaAggregatedResourcesClient) sessionOps[discoveryv3.DeltaDiscoveryResponse] {
			st := &deltaState{
				sent:             make(map[string]map[string]struct{}),
				awaiting:         make(map[string]map[string]struct{}),
				wildcardAnswered: make(map[string]bool),
			}
			return sessionOps[discoveryv3.DeltaDiscoveryResponse]{
				sync:   func() error { return s.deltaSync(ads, st) },
				handle: func(r *discoveryv3.DeltaDiscoveryResponse) error { return s.deltaHandle(ads, st, r) },
			}
		})
}

// deltaSync sends the subscription diffs between what the cache wants and
// what this session told the origin. The first request of a type carries
// initial_resource_versions for what the cache holds on this stream.
func (s *stream) deltaSync(ads discoveryv3.AggregatedDiscoveryService_DeltaAggregatedResourcesClient, st *deltaState) error {
	node, wants := s.snapshot()
	types := make([]string, 0, len(wants))
	for t := range wants {
		types = append(types, t)
	}
	sort.Strings(types)
	var local []cache.Update
	for _, t := range types {
		w := wants[t]
		sent := st.sent[t]
		first := sent == nil
		if first {
			sent = make(map[string]struct{})
			st.sent[t] = sent
		}
		req := &discoveryv3.DeltaDiscoveryRequest{TypeUrl: t}
		for n := range w.names {
			if _, ok := sent[n]; !ok {
				req.ResourceNamesSubscribe = append(req.ResourceNamesSubscribe, n)
			}
		}
		for n := range sent {
			if _, ok := w.names[n]; !ok {
				req.ResourceNamesUnsubscribe = append(req.ResourceNamesUnsubscribe, n)
			}
		}
		if len(req.ResourceNamesSubscribe) == 0 && len(req.ResourceNamesUnsubscribe) == 0 {
			continue
		}
		if first && len(req.ResourceNamesSubscribe) > 0 {
			req.InitialResourceVersions = s.m.cache.Versions(s.id, t)
		}
		sort.Strings(req.ResourceNamesSubscribe)
		sort.Strings(req.ResourceNamesUnsubscribe)
		if !st.nodeSent {
			req.Node = node
			st.nodeSent = true
		}
		aw := st.awaiting[t]
		if aw == nil {
			aw = make(map[string]struct{})
			st.awaiting[t] = aw
		}
		for _, n := range req.ResourceNamesSubscribe {
			sent[n] = struct{}{}
			if n == cache.Wildcard || isGlob(n) {
				aw[n] = struct{}{}
			}
		}
		for _, n := range req.ResourceNamesUnsubscribe {
			delete(sent, n)
			delete(aw, n)
			if n == cache.Wildcard {
				st.wildcardAnswered[t] = false
			}
		}
		if err := ads.Send(req); err != nil {
			return fmt.Errorf("upstream %s: send delta request: %w", s.id.Authority, err)
		}
		s.lg.Debug("delta subscription sent", zap.String("type_url", t),
			zap.Int("subscribe", len(req.ResourceNamesSubscribe)), zap.Int("unsubscribe", len(req.ResourceNamesUnsubscribe)),
			zap.Int("initial_versions", len(req.InitialResourceVersions)))
	}
	// Emulated globs added while the Wildcard was already answered are
	// complete at once: the cache computes their membership.
	for _, t := range types {
		if st.wildcardAnswered[t] && len(wants[t].emulatedGlobs) > 0 {
			local = append(local, cache.Update{Stream: s.id, TypeURL: t, Complete: wants[t].emulatedGlobs})
		}
	}
	for _, u := range local {
		s.m.cache.Apply(u)
	}
	return nil
}

// deltaHandle validates a response, applies it to the cache and ACKs it,
// or NACKs it (with why) and keeps the last good state.
func (s *stream) deltaHandle(ads discoveryv3.AggregatedDiscoveryService_DeltaAggregatedResourcesClient, st *deltaState, r *discoveryv3.DeltaDiscoveryResponse) error {
	t := r.GetTypeUrl()
	s.m.m.responses.WithLabelValues(xdstype.Label(t)).Inc()
	u, err := deltaUpdate(s.id, r, time.Now())
	if err != nil {
		s.m.m.nacks.WithLabelValues(xdstype.Label(t)).Inc()
		s.lg.Warn("origin response rejected (NACK)", zap.String("type_url", t), zap.String("nonce", r.GetNonce()), zap.Error(err))
		nack := &discoveryv3.DeltaDiscoveryRequest{
			TypeUrl:       t,
			ResponseNonce: r.GetNonce(),
			ErrorDetail:   &statuspb.Status{Code: int32(codes.InvalidArgument), Message: err.Error()},
		}
		if err := ads.Send(nack); err != nil {
			return fmt.Errorf("upstream %s: send NACK: %w", s.id.Authority, err)
		}
		return nil
	}
	if aw := st.awaiting[t]; len(aw) > 0 {
		_, wants := s.snapshot()
		for n := range aw {
			if n == cache.Wildcard {
				st.wildcardAnswered[t] = true
				if w := wants[t]; w != nil {
					u.Complete = append(u.Complete, w.completeForWildcard()...)
					continue
				}
			}
			u.Complete = append(u.Complete, n)
		}
		clear(aw)
	}
	s.m.cache.Apply(u)
	if err := ads.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: t, ResponseNonce: r.GetNonce()}); err != nil {
		return fmt.Errorf("upstream %s: send ACK: %w", s.id.Authority, err)
	}
	return nil
}
