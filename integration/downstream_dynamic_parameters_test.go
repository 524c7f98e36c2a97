package integration

import (
	"context"
	"strings"
	"testing"

	clusterservice "github.com/envoyproxy/go-control-plane/envoy/service/cluster/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestDynamicParametersRefused: a request that names resources only by
// ResourceLocator (dynamic parameters, xRFC TP2) was read as the legacy
// wildcard, so the client got every cluster of the group. It is refused
// with InvalidArgument naming the field, on SotW, delta and unary Fetch;
// another client of the relay keeps its updates.
func TestDynamicParametersRefused(t *testing.T) {
	o := newGCPOrigin(t)
	o.set(resource.ClusterType, "c1", cluster("c1", 1))
	o.set(resource.ClusterType, "c2", cluster("c2", 1))
	conn := dial(t, legacyRelay(t, o))
	good := openDelta(t, conn)
	gv := subscribeClusters(t, good, "c1")

	locators := []*discoveryv3.ResourceLocator{{Name: "c1", DynamicParameters: map[string]string{"zone": "a"}}}
	const want = "resource locators (dynamic parameters) are not supported"
	check := func(t *testing.T, st *status.Status, field string) {
		t.Helper()
		if st.Code() != codes.InvalidArgument || !strings.Contains(st.Message(), want) || !strings.Contains(st.Message(), field) {
			t.Fatalf("status %v %q, want InvalidArgument naming %s: %q", st.Code(), st.Message(), field, want)
		}
	}
	t.Run("sotw", func(t *testing.T) {
		s := openSotW(t, conn)
		s.Send(&discoveryv3.DiscoveryRequest{Node: testNodeDS, TypeUrl: resource.ClusterType, ResourceLocators: locators})
		check(t, s.Err(), "resource_locators")
	})
	t.Run("delta subscribe", func(t *testing.T) {
		d := openDelta(t, conn)
		d.Send(&discoveryv3.DeltaDiscoveryRequest{Node: testNodeDS, TypeUrl: resource.ClusterType, ResourceLocatorsSubscribe: locators})
		check(t, d.Err(), "resource_locators_subscribe")
	})
	t.Run("delta unsubscribe", func(t *testing.T) {
		d := openDelta(t, conn)
		d.Send(&discoveryv3.DeltaDiscoveryRequest{Node: testNodeDS, TypeUrl: resource.ClusterType, ResourceNamesSubscribe: []string{"c2"}})
		if got := d.Recv(); len(got.GetResources()) != 1 {
			t.Fatalf("answer to c2: %v", got)
		}
		d.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resource.ClusterType, ResourceLocatorsUnsubscribe: locators})
		check(t, d.Err(), "resource_locators_unsubscribe")
	})
	t.Run("fetch", func(t *testing.T) {
		_, err := clusterservice.NewClusterDiscoveryServiceClient(conn).FetchClusters(context.Background(),
			&discoveryv3.DiscoveryRequest{Node: testNodeDS, ResourceLocators: locators})
		check(t, status.Convert(err), "resource_locators")
	})

	o.set(resource.ClusterType, "c1", cluster("c1", 2))
	recvDelta(t, good, gv, func() bool { return timeoutOf(gv, "c1") == 2 })
}
