package integration

import (
	"slices"
	"testing"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/grpc/codes"

	"github.com/xds-relay/xds-relay/config"
)

// TestSotWBadRequestReleasesWhatItDropped: a SotW request that drops a name
// and adds a malformed one ends the stream (InvalidArgument); the dropped
// name must not stay watched by the dead session: with max_resources 0 the
// relay unsubscribes it at the origin. Before the fix 1000 such requests
// left 1000 subscriptions at the origin and 1000 resources cached.
func TestSotWBadRequestReleasesWhatItDropped(t *testing.T) {
	o := newGCPOrigin(t)
	a := dsCluster("dropped")
	o.set(resource.ClusterType, a, cluster(a, 1))
	r := startRelay(t, func(c *config.Config) { c.Cache.MaxResources = 0 }, o.addr)
	s := openSotW(t, dial(t, r.XDSAddr()))
	s.Send(&discoveryv3.DiscoveryRequest{Node: testNodeDS, TypeUrl: resource.ClusterType, ResourceNames: []string{a}})
	got := s.Recv()
	s.Send(&discoveryv3.DiscoveryRequest{TypeUrl: resource.ClusterType, ResourceNames: []string{"xdstp://ds.example/"},
		VersionInfo: got.GetVersionInfo(), ResponseNonce: got.GetNonce()})
	if st := s.Err(); st.Code() != codes.InvalidArgument {
		t.Fatalf("stream ended with %v, want InvalidArgument", st)
	}
	o.waitFor("the relay to unsubscribe the dropped name upstream", func() bool {
		for _, req := range o.deltaReqs {
			if slices.Contains(req.GetResourceNamesUnsubscribe(), a) {
				return true
			}
		}
		return false
	})
}
