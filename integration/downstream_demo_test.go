package integration

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/xds-relay/xds-relay/config"
	"github.com/xds-relay/xds-relay/internal/propagation"
	"github.com/xds-relay/xds-relay/internal/xdstest"
)

const demoAuthority = "demo.xds-relay.local"

// The demo (`xds-relay demo`): a client receives the Listener → Route →
// Cluster → ClusterLoadAssignment chain and the demo/* glob through the
// relay, and an edit of the endpoints file flows to it.
func TestDownstreamDemo(t *testing.T) {
	dir := t.TempDir()
	cfg, err := config.Demo(dir)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Listen, cfg.Admin, cfg.RESTListen = "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0"
	r := runRelay(t, cfg)

	name := func(typ, id string) string { return xdstpName(demoAuthority, typ, id) }
	glob := name("envoy.config.endpoint.v3.ClusterLoadAssignment", "demo/*")
	want := map[string][]string{
		resource.ListenerType: {name("envoy.config.listener.v3.Listener", "demo")},
		resource.RouteType:    {name("envoy.config.route.v3.RouteConfiguration", "demo")},
		resource.ClusterType:  {name("envoy.config.cluster.v3.Cluster", "demo")},
		resource.EndpointType: {
			name("envoy.config.endpoint.v3.ClusterLoadAssignment", "demo/backend-a"),
			name("envoy.config.endpoint.v3.ClusterLoadAssignment", "demo/backend-b"),
			name("envoy.config.endpoint.v3.ClusterLoadAssignment", "demo/backend-c"),
		},
	}
	s := openDelta(t, dial(t, r.XDSAddr()))
	view := deltaView{}
	for typ, names := range want {
		sub := names
		if typ == resource.EndpointType {
			sub = []string{glob}
		}
		s.Send(&discoveryv3.DeltaDiscoveryRequest{Node: testNodeDS, TypeUrl: typ, ResourceNamesSubscribe: sub})
	}
	has := func() bool {
		for _, names := range want {
			for _, n := range names {
				if _, ok := view[n]; !ok {
					return false
				}
			}
		}
		return true
	}
	for !has() {
		resp := s.Recv()
		view.apply(resp)
		s.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resp.GetTypeUrl(), ResponseNonce: resp.GetNonce()})
	}

	// REST-JSON polling on rest_listen, /debug/clients on the admin server.
	cluster := want[resource.ClusterType][0]
	body := `{"node": {"id": "rest-client"}, "resource_names": ["` + cluster + `"]}`
	resp, err := http.Post("http://"+r.RESTAddr()+"/v3/discovery:clusters", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	dr := &discoveryv3.DiscoveryResponse{}
	if resp.StatusCode != http.StatusOK || protojson.Unmarshal(raw, dr) != nil || len(dr.GetResources()) != 1 {
		t.Fatalf("REST poll: HTTP %d %s", resp.StatusCode, raw)
	}
	if !proto.Equal(dr.GetResources()[0], view[cluster].GetResource()) {
		t.Fatalf("REST poll: got %v, want %v", dr.GetResources()[0], view[cluster].GetResource())
	}
	resp, err = http.Get("http://" + r.AdminAddr() + "/debug/clients")
	if err != nil {
		t.Fatal(err)
	}
	raw, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(raw), `"node_id": "ds-node"`) || !strings.Contains(string(raw), glob) {
		t.Fatalf("/debug/clients: %s", raw)
	}

	// Edit the endpoints file as the demo tells its user to.
	path := filepath.Join(dir, "config", "demo", "resources", "endpoints.yaml")
	raw, err = os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	edited := strings.Replace(string(raw), "port_value: 50051", "port_value: 50061", 1)
	if edited == string(raw) {
		t.Fatal("endpoints.yaml no longer has port_value: 50051")
	}
	if err := os.WriteFile(path, []byte(edited), 0o644); err != nil {
		t.Fatal(err)
	}
	a := want[resource.EndpointType][0]
	old := view[a].GetVersion()
	for view[a].GetVersion() == old {
		resp := s.Recv()
		view.apply(resp)
		s.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resp.GetTypeUrl(), ResponseNonce: resp.GetNonce()})
	}
	// The status page's Propagation section shows the edit reaching the
	// client, ACKed (the README's walk-through).
	xdstest.Poll(t, "the edit converged on the status page", func() error {
		for _, c := range fetchStatus(t, "http://"+r.AdminAddr()).Propagation.Changes {
			if c.First == a && c.State == propagation.StateConverged && c.Acked == 1 {
				return nil
			}
		}
		return fmt.Errorf("no converged change of %s", a)
	})
}
