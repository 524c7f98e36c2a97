package upstream

import (
	"testing"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
)

// TestDeltaProbeName: a silent origin is probed only when every
// subscription of the attempt named resources whose version it was told,
// and then with the first of them.
func TestDeltaProbeName(t *testing.T) {
	const (
		cds = "type.googleapis.com/envoy.config.cluster.v3.Cluster"
		eds = "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment"
	)
	req := func(typeURL string, irv map[string]string, sub ...string) *discoveryv3.DeltaDiscoveryRequest {
		return &discoveryv3.DeltaDiscoveryRequest{TypeUrl: typeURL, InitialResourceVersions: irv, ResourceNamesSubscribe: sub}
	}
	for _, tc := range []struct {
		name     string
		reqs     []*discoveryv3.DeltaDiscoveryRequest
		wantType string
		wantName string
	}{
		{name: "every name told", reqs: []*discoveryv3.DeltaDiscoveryRequest{
			req(eds, map[string]string{"e2": "1", "e1": "1"}, "e2", "e1"),
			req(cds, map[string]string{"c1": "1", "other": "1"}, "c1"),
		}, wantType: cds, wantName: "c1"},
		{name: "a name not told", reqs: []*discoveryv3.DeltaDiscoveryRequest{
			req(eds, map[string]string{"e1": "1"}, "e1"),
			req(cds, nil, "c1"),
		}},
		{name: "a later request of a told type", reqs: []*discoveryv3.DeltaDiscoveryRequest{
			req(eds, map[string]string{"e1": "1"}, "e1"),
			req(eds, nil, "e2"),
		}},
		{name: "wildcard", reqs: []*discoveryv3.DeltaDiscoveryRequest{req(cds, map[string]string{"*": "1", "c1": "1"}, "*")}},
		{name: "glob", reqs: []*discoveryv3.DeltaDiscoveryRequest{req(eds, nil, "xdstp://x/envoy.config.endpoint.v3.ClusterLoadAssignment/d/*")}},
		{name: "nothing subscribed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := newDeltaState()
			for _, r := range tc.reqs {
				st.record(r)
				if st.sent[r.GetTypeUrl()] == nil {
					st.sent[r.GetTypeUrl()] = map[string]int{}
				}
				for _, n := range r.GetResourceNamesSubscribe() {
					st.sent[r.GetTypeUrl()][n] = 1
				}
			}
			if typ, name := st.probeName(); typ != tc.wantType || name != tc.wantName {
				t.Errorf("probeName = %q %q, want %q %q", typ, name, tc.wantType, tc.wantName)
			}
		})
	}
}
