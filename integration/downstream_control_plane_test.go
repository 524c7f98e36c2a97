package integration

import (
	"context"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"

	clusterservice "github.com/envoyproxy/go-control-plane/envoy/service/cluster/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/xds-relay/xds-relay/config"
)

// TestControlPlaneIdentifier: every response names the relay in
// control_plane.identifier: delta and SotW, the first answer (built per
// client) and an update fanned out to several clients (the shared
// encoding), unary Fetch and REST-JSON.
func TestControlPlaneIdentifier(t *testing.T) {
	const id = "relay-a.example"
	o := newGCPOrigin(t)
	c1 := dsCluster("c1")
	o.set(resource.ClusterType, c1, cluster(c1, 1))
	r := startRelay(t, func(c *config.Config) {
		c.ControlPlaneID = id
		c.RESTListen = "127.0.0.1:0"
	}, o.addr)
	conn := dial(t, r.XDSAddr())
	check := func(what, got string) {
		t.Helper()
		if got != id {
			t.Errorf("%s: control_plane.identifier %q, want %q", what, got, id)
		}
	}

	// Delta clients (an update to several of them takes the shared
	// encoding) and a SotW client (a SotW CDS response lists every
	// cluster: built per client).
	var deltas []*deltaADS
	for range 3 {
		d := openDelta(t, conn)
		d.Send(&discoveryv3.DeltaDiscoveryRequest{Node: testNodeDS, TypeUrl: resource.ClusterType, ResourceNamesSubscribe: []string{c1}})
		got := d.Recv()
		check("delta answer", got.GetControlPlane().GetIdentifier())
		d.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resource.ClusterType, ResponseNonce: got.GetNonce()})
		deltas = append(deltas, d)
	}
	s := openSotW(t, conn)
	s.Send(&discoveryv3.DiscoveryRequest{Node: testNodeDS, TypeUrl: resource.ClusterType, ResourceNames: []string{c1}})
	sgot := s.Recv()
	check("SotW answer", sgot.GetControlPlane().GetIdentifier())
	s.Send(&discoveryv3.DiscoveryRequest{TypeUrl: resource.ClusterType, VersionInfo: sgot.GetVersionInfo(), ResponseNonce: sgot.GetNonce(), ResourceNames: []string{c1}})

	shared := relayMetric(t, r, "xds_relay_downstream_shared_responses_total", "type", "envoy.config.cluster.v3.Cluster")
	o.set(resource.ClusterType, c1, cluster(c1, 2))
	for _, d := range deltas {
		check("delta update", d.Recv().GetControlPlane().GetIdentifier())
	}
	check("SotW update", s.Recv().GetControlPlane().GetIdentifier())
	if now := relayMetric(t, r, "xds_relay_downstream_shared_responses_total", "type", "envoy.config.cluster.v3.Cluster"); now <= shared {
		t.Errorf("no update took the shared encoding (shared_responses_total %v → %v): that path is untested", shared, now)
	}

	fetched, err := clusterservice.NewClusterDiscoveryServiceClient(conn).FetchClusters(context.Background(),
		&discoveryv3.DiscoveryRequest{Node: testNodeDS, ResourceNames: []string{c1}})
	if err != nil {
		t.Fatal(err)
	}
	check("Fetch", fetched.GetControlPlane().GetIdentifier())

	resp, err := http.Post("http://"+r.RESTAddr()+"/v3/discovery:clusters", "application/json",
		strings.NewReader(`{"node": {"id": "rest"}, "resource_names": ["`+c1+`"]}`))
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	dr := &discoveryv3.DiscoveryResponse{}
	if err := protojson.Unmarshal(raw, dr); err != nil {
		t.Fatalf("REST poll: HTTP %d: %v in %s", resp.StatusCode, err, raw)
	}
	check("REST", dr.GetControlPlane().GetIdentifier())
}

// By default the identifier is the host name.
func TestControlPlaneIdentifierDefault(t *testing.T) {
	host, err := os.Hostname()
	if err != nil || host == "" {
		t.Skipf("no host name: %v", err)
	}
	o := newGCPOrigin(t)
	c1 := dsCluster("c1")
	o.set(resource.ClusterType, c1, cluster(c1, 1))
	r := startRelay(t, nil, o.addr)
	d := openDelta(t, dial(t, r.XDSAddr()))
	d.Send(&discoveryv3.DeltaDiscoveryRequest{Node: testNodeDS, TypeUrl: resource.ClusterType, ResourceNamesSubscribe: []string{c1}})
	if got := d.Recv().GetControlPlane().GetIdentifier(); got != host {
		t.Fatalf("control_plane.identifier %q, want the host name %q", got, host)
	}
}
