package upstream

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"go.uber.org/zap"
	statuspb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"

	"github.com/xds-relay/xds-relay/internal/cache"
	"github.com/xds-relay/xds-relay/internal/xdstype"
)

// sotwType is what one SotW attempt told the origin for one type. owned by
// the link's run goroutine.
type sotwType struct {
	names []string // the full list last sent, sorted; nil with only Wildcard
	set   map[string]struct{}
	nonce string // nonce of the last response
}

// sotwAttempt runs one SotW ADS stream to origin until it fails or ctx
// ends. Globs are always emulated over the type's wildcard.
func (l *link) sotwAttempt(ctx context.Context, origin string) (bool, error) {
	if origin != l.sotwOrigin {
		clear(l.sotwVersions)
		l.sotwOrigin = origin
	}
	return runAttempt(ctx, l, origin, TransportSotW, discoveryv3.AggregatedDiscoveryServiceClient.StreamAggregatedResources,
		func(ads discoveryv3.AggregatedDiscoveryService_StreamAggregatedResourcesClient) attemptOps[discoveryv3.DiscoveryResponse] {
			types := make(map[string]*sotwType)
			nodeSent := false
			return attemptOps[discoveryv3.DiscoveryResponse]{
				sync:   func() error { return l.sotwSync(ads, types, &nodeSent) },
				handle: func(r *discoveryv3.DiscoveryResponse) error { return l.sotwHandle(ads, types, r) },
			}
		})
}

// sotwNames is the resource_names list for a set: empty for a wildcard
// alone, "*" among the names when mixed.
func sotwNames(set map[string]struct{}) []string {
	if _, ok := set[cache.Wildcard]; ok && len(set) == 1 {
		return nil
	}
	names := slices.Collect(maps.Keys(set))
	sort.Strings(names)
	return names
}

// sotwSync sends the full name list of every type whose set changed (the
// first request of a type carries the last version accepted on an earlier
// attempt).
func (l *link) sotwSync(ads discoveryv3.AggregatedDiscoveryService_StreamAggregatedResourcesClient, types map[string]*sotwType, nodeSent *bool) error {
	// Names unsubscribed and subscribed again since the last sync: the
	// list is unchanged, so ask again without a version, which makes the
	// origin answer with what it holds (unchanged bytes notify no client).
	l.answerRefused()
	resub := l.takeResubscribe()
	node, wants := l.snapshot()
	keys := slices.Sorted(maps.Keys(wants))
	for _, t := range keys {
		w := wants[t]
		cur := types[t]
		if cur != nil && maps.Equal(cur.set, w.names) {
			if !anyIn(resub[t], cur.set) {
				continue
			}
			if err := ads.Send(&discoveryv3.DiscoveryRequest{TypeUrl: t, ResourceNames: cur.names, ResponseNonce: cur.nonce}); err != nil {
				return fmt.Errorf("upstream %s: send sotw request: %w", l.id.Authority, err)
			}
			continue
		}
		if cur == nil && len(w.names) == 0 {
			continue
		}
		if cur == nil {
			cur = &sotwType{}
			types[t] = cur
		}
		cur.set = maps.Clone(w.names)
		cur.names = sotwNames(cur.set)
		req := &discoveryv3.DiscoveryRequest{
			TypeUrl:       t,
			ResourceNames: cur.names,
			VersionInfo:   l.sotwVersions[t],
			ResponseNonce: cur.nonce,
		}
		if len(cur.set) == 0 {
			// Nothing wanted: an explicit empty list must not read as a
			// wildcard; SotW cannot say "nothing", so ask for no name.
			req.ResourceNames = []string{}
		}
		if !*nodeSent {
			req.Node = node
			*nodeSent = true
		}
		if err := ads.Send(req); err != nil {
			return fmt.Errorf("upstream %s: send sotw request: %w", l.id.Authority, err)
		}
	}
	return nil
}

// sotwHandle validates a response, applies it and ACKs it, or NACKs it with
// why (keeping the last good version).
func (l *link) sotwHandle(ads discoveryv3.AggregatedDiscoveryService_StreamAggregatedResourcesClient, types map[string]*sotwType, r *discoveryv3.DiscoveryResponse) error {
	t := r.GetTypeUrl()
	l.mgr.metrics.responses.WithLabelValues(xdstype.Label(t)).Inc()
	cur := types[t]
	if cur == nil {
		cur = &sotwType{}
		types[t] = cur
	}
	cur.nonce = r.GetNonce()
	u, err := sotwUpdate(l.id, r, time.Now())
	if err != nil {
		l.mgr.metrics.nacks.WithLabelValues(xdstype.Label(t)).Inc()
		l.lg.Warn("origin response rejected (NACK)", zap.String("type_url", t), zap.String("nonce", r.GetNonce()), zap.Error(err))
		return l.sotwSend(ads, &discoveryv3.DiscoveryRequest{
			TypeUrl: t, ResourceNames: cur.names, VersionInfo: l.sotwVersions[t], ResponseNonce: r.GetNonce(),
			ErrorDetail: &statuspb.Status{Code: int32(codes.InvalidArgument), Message: err.Error()},
		})
	}
	// LDS and CDS answers hold every subscribed resource; a wildcard-only
	// answer holds every resource of the type.
	_, wildcard := cur.set[cache.Wildcard]
	if cachev3.ResourceRequiresFullStateInSotw(t) || (wildcard && len(cur.set) == 1) {
		u.FullState = true
		if wildcard {
			_, wants := l.snapshot()
			if w := wants[t]; w != nil {
				u.Complete = w.completeForWildcard()
			}
		}
	}
	l.mgr.cache.Apply(u)
	l.sotwVersions[t] = r.GetVersionInfo()
	return l.sotwSend(ads, &discoveryv3.DiscoveryRequest{
		TypeUrl: t, ResourceNames: cur.names, VersionInfo: r.GetVersionInfo(), ResponseNonce: r.GetNonce(),
	})
}

func (l *link) sotwSend(ads discoveryv3.AggregatedDiscoveryService_StreamAggregatedResourcesClient, req *discoveryv3.DiscoveryRequest) error {
	if err := ads.Send(req); err != nil {
		return fmt.Errorf("upstream %s: send sotw request: %w", l.id.Authority, err)
	}
	return nil
}

// anyIn reports whether a name of names is in set.
func anyIn(names []string, set map[string]struct{}) bool {
	for _, n := range names {
		if _, ok := set[n]; ok {
			return true
		}
	}
	return false
}
