package upstream

import (
	"fmt"
	"maps"
	"slices"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"go.uber.org/zap"

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
