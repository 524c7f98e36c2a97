package integration

import (
	"strings"
	"testing"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/grpc/codes"

	"github.com/xds-relay/xds-relay/config"
)

// TestNestedAltNameRefusedAtOnce: a 256 KiB name of nested #alt=
// directives (3.5-20 CPU-seconds and an 820 KiB error before, and a relay
// that then ignored SIGTERM) ends only its stream, with a short
// InvalidArgument, while another client's update arrives as usual.
func TestNestedAltNameRefusedAtOnce(t *testing.T) {
	o := newGCPOrigin(t)
	c := dsCluster("calm")
	o.set(resource.ClusterType, c, cluster(c, 1))
	r := startRelay(t, func(cfg *config.Config) {
		cfg.Log.Level = config.LogInfo
		cfg.Downstream.Limits.MaxNameLength = 1 << 20 // let the name through to the parser
	}, o.addr)
	conn := dial(t, r.XDSAddr())
	calm := openDelta(t, conn)
	v := subscribeClusters(t, calm, c)

	var b strings.Builder
	for b.Len() < 256<<10 {
		b.WriteString("xdstp://" + dsAuthority + "/envoy.config.cluster.v3.Cluster/x#alt=")
	}
	b.WriteString("xdstp://" + dsAuthority + "/envoy.config.cluster.v3.Cluster/x")
	hostile := openDelta(t, conn)
	hostile.Send(&discoveryv3.DeltaDiscoveryRequest{Node: testNodeDS, TypeUrl: resource.ClusterType, ResourceNamesSubscribe: []string{b.String()}})
	st := hostile.Err()
	if st.Code() != codes.InvalidArgument || len(st.Message()) > 2048 {
		t.Fatalf("hostile stream ended with %v and a %d-byte message, want InvalidArgument and a short one", st.Code(), len(st.Message()))
	}
	o.set(resource.ClusterType, c, cluster(c, 2))
	recvDelta(t, calm, v, func() bool { return timeoutOf(v, c) == 2 })
}
