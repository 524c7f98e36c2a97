package upstream

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/xds-relay/xds-relay/internal/cache"
)

// Origin liveness and initial_resource_versions. A delta origin that is
// told the version of every name it is asked for (a reconnect, a relay
// restarted from its snapshot) rightly answers nothing when nothing
// changed; a stalled origin answers nothing too. So when the first
// response does not come within response_timeout and every subscription
// of the attempt named only resources whose version the origin was told,
// the relay probes once: it unsubscribes one of them and subscribes it
// again, which the origin must answer (it forgot the name). An answer
// proves the origin alive; the resource comes back identical, so no
// client is told. Silence for another response_timeout is a stall. A
// subscription the origin must answer anyway (a collection, a name it was
// not told of) is not probed: its silence is a stall at once.

// record notes what a delta subscription request told the origin.
func (st *deltaState) record(req *discoveryv3.DeltaDiscoveryRequest) {
	t := req.GetTypeUrl()
	if irv := req.GetInitialResourceVersions(); len(irv) > 0 {
		if st.told == nil {
			st.told = make(map[string]map[string]bool)
		}
		if st.told[t] == nil {
			st.told[t] = make(map[string]bool)
		}
		for n := range irv {
			st.told[t][n] = true
		}
	}
	for _, n := range req.GetResourceNamesSubscribe() {
		if n == cache.Wildcard || isGlob(n) || !st.told[t][n] {
			st.untold = true
		}
	}
}

// probeName picks the name to probe with: the first (by type, then name)
// that is subscribed and whose version the origin was told; "" when the
// attempt's silence cannot be an up-to-date origin's.
func (st *deltaState) probeName() (typeURL, name string) {
	if st.untold {
		return "", ""
	}
	for _, t := range slices.Sorted(maps.Keys(st.sent)) {
		for _, n := range slices.Sorted(maps.Keys(st.sent[t])) {
			if st.told[t][n] {
				return t, n
			}
		}
	}
	return "", ""
}

// deltaProbe sends the liveness probe (see above); false: nothing to
// probe with.
func (l *link) deltaProbe(ads discoveryv3.AggregatedDiscoveryService_DeltaAggregatedResourcesClient, st *deltaState) (bool, error) {
	t, n := st.probeName()
	if n == "" {
		return false, nil
	}
	l.lg.Info("origin silent after being told every version; probing it with one resource",
		zap.String("type_url", t), zap.String("name", n))
	for _, req := range []*discoveryv3.DeltaDiscoveryRequest{
		{TypeUrl: t, ResourceNamesUnsubscribe: []string{n}},
		{TypeUrl: t, ResourceNamesSubscribe: []string{n}},
	} {
		if err := ads.Send(req); err != nil {
			return false, fmt.Errorf("upstream %s: send liveness probe: %w", l.id.Authority, err)
		}
	}
	return true, nil
}

// The liveness probe. Silence about the names asked for is no evidence
// against an origin: an origin need not answer a name it does not have
// (SotW has no way to say so, and go-control-plane's delta server does not
// send removed_resources for names it never had). When no response came
// within response_timeout and the stream cannot be probed as above, the
// relay opens a second stream on the same connection, as the link's node,
// and subscribes the wildcard of one type the link asks for: an answer
// that an origin owes every client (Envoy waits for it to start). Any
// response proves the origin alive and the link stays where it is; an
// error or silence for another response_timeout is a stall, and fails
// over. The probe costs the origin one full copy of that type, once per
// silent attempt.

// startLiveness starts the liveness probe in a goroutine that probes
// counts; its result arrives on the returned channel (buffered: the
// goroutine never blocks). nil: the link asks for nothing to probe with.
// The goroutine ends when ctx (the attempt's) ends.
func startLiveness[Req, Resp any](ctx context.Context, l *link, conn grpc.ClientConnInterface, open streamOpener[Req, Resp],
	wildcard wildcardRequest[Req], probes *sync.WaitGroup) <-chan error {
	node, wants := l.copyWants()
	var typeURL string
	for _, t := range slices.Sorted(maps.Keys(wants)) {
		if len(wants[t].names) > 0 {
			typeURL = t
			break
		}
	}
	if typeURL == "" {
		return nil
	}
	l.lg.Info("origin silent; probing its liveness with a wildcard on a stream of its own", zap.String("type_url", typeURL))
	out := make(chan error, 1)
	probes.Add(1)
	go func() {
		defer probes.Done()
		out <- liveness(ctx, l, conn, open, wildcard(node, typeURL))
	}()
	return out
}

// liveness opens a stream, sends req and waits for the first response.
func liveness[Req, Resp any](ctx context.Context, l *link, conn grpc.ClientConnInterface, open streamOpener[Req, Resp], req *Req) error {
	pctx, cancel := context.WithCancel(ctx)
	defer cancel() // ends the probe's stream
	s, err := open(conn, pctx, l.auth.callOpts...)
	if err != nil {
		return err
	}
	if pt, ok := s.(interface{ wait() }); ok {
		defer func() {
			cancel()
			pt.wait() // per-type streams' receivers (pertype.go)
		}()
	}
	if err := s.Send(req); err != nil {
		return err
	}
	_, err = s.Recv()
	return err
}
