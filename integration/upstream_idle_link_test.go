package integration

import (
	"context"
	"fmt"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"

	"github.com/xds-relay/xds-relay/config"
)

// TestIdleLinksClosed: under a rule that groups by node id, every client
// gets its own upstream link (its own stream, over the one connection the
// links to an origin share). When the clients
// leave, the links nobody watches are closed after upstream.idle_timeout,
// down to none, and a client that comes back is served on a new link.
// Before, 1000 such clients left 1000 streams, 9040 goroutines and 1022
// fds behind for good.
func TestIdleLinksClosed(t *testing.T) {
	const clients = 20
	o := newGCPOrigin(t)
	o.set(resource.ClusterType, "shared", cluster("shared", 1))
	r := startRelay(t, func(c *config.Config) {
		c.Log.Level = config.LogInfo
		c.Upstream.IdleTimeout = 50e6 // 50ms
		c.Aggregation.Rules = decodeAggRules(t, `
- name: per-node
  default: true
  result: {authority: ds.example, group: [{literal: "node="}, {node_field: id}]}
`)
	}, o.addr)
	conn := dial(t, r.XDSAddr())
	ads := discoveryv3.NewAggregatedDiscoveryServiceClient(conn)
	subscribe := func(ctx context.Context, id string) {
		t.Helper()
		st, err := ads.DeltaAggregatedResources(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := st.Send(&discoveryv3.DeltaDiscoveryRequest{Node: &corev3.Node{Id: id, Cluster: "c"},
			TypeUrl: resource.ClusterType, ResourceNamesSubscribe: []string{"shared"}}); err != nil {
			t.Fatal(err)
		}
		got, err := st.Recv()
		if err != nil || len(got.GetResources()) != 1 {
			t.Fatalf("client %s: %v %v", id, got, err)
		}
	}
	streams := func() float64 { return relayMetric(t, r, "xds_relay_upstream_streams", "authority", dsAuthority) }

	ctx, leave := context.WithCancel(context.Background())
	for i := range clients {
		subscribe(ctx, fmt.Sprintf("node-%d", i))
	}
	waitRelayMetric(t, r, "one upstream stream per node group", func(v float64) bool { return v == clients },
		"xds_relay_upstream_streams", "authority", dsAuthority)
	// ... all over one connection to the origin.
	o.mu.Lock()
	peers := len(o.deltaPeers)
	o.mu.Unlock()
	if peers != 1 {
		t.Errorf("origin saw %d client connections for %d streams, want 1 shared", peers, clients)
	}

	leave() // every client goes
	waitRelayMetric(t, r, "idle links closed", func(v float64) bool { return v == 0 },
		"xds_relay_upstream_streams", "authority", dsAuthority)
	// Each close is counted once its link has ended, just after its stream.
	waitRelayMetric(t, r, "every idle close counted", func(v float64) bool { return v >= clients },
		"xds_relay_upstream_idle_closes_total", "authority", dsAuthority)
	if n := relayMetric(t, r, "xds_relay_upstream_idle_closes_total", "authority", dsAuthority); n != clients {
		t.Errorf("idle_closes_total = %v, want %d", n, clients)
	}

	back, cancel := context.WithCancel(context.Background())
	defer cancel()
	subscribe(back, "node-0") // served again, on a new link
	if s := streams(); s != 1 {
		t.Errorf("upstream streams after one client came back: %v, want 1", s)
	}
}
