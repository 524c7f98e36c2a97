package integration

import (
	"context"
	"sync"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zaptest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/xds-relay/xds-relay/config"
	relaypkg "github.com/xds-relay/xds-relay/internal/relay"
)

// deltaClient is a raw delta ADS client: the test reads its responses from
// a channel with deadlines.
type deltaClient struct {
	t     *testing.T
	ads   discoveryv3.AggregatedDiscoveryService_DeltaAggregatedResourcesClient
	resps chan *discoveryv3.DeltaDiscoveryResponse
	node  *corev3.Node // sent with the first request, then nil
}

func newDeltaClient(t *testing.T, addr, nodeID string) *deltaClient {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ads, err := discoveryv3.NewAggregatedDiscoveryServiceClient(conn).DeltaAggregatedResources(ctx)
	if err != nil {
		cancel()
		conn.Close()
		t.Fatal(err)
	}
	c := &deltaClient{t: t, ads: ads, resps: make(chan *discoveryv3.DeltaDiscoveryResponse, 16)}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(c.resps)
		for {
			r, err := ads.Recv()
			if err != nil {
				return
			}
			select {
			case c.resps <- r:
			case <-ctx.Done():
				return
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		wg.Wait()
		conn.Close()
	})
	c.node = &corev3.Node{Id: nodeID}
	return c
}

func (c *deltaClient) subscribe(typeURL string, names ...string) {
	c.t.Helper()
	req := &discoveryv3.DeltaDiscoveryRequest{Node: c.node, TypeUrl: typeURL, ResourceNamesSubscribe: names}
	c.node = nil
	if err := c.ads.Send(req); err != nil {
		c.t.Fatal(err)
	}
}

// recv returns the next response, ACKing it.
func (c *deltaClient) recv() *discoveryv3.DeltaDiscoveryResponse {
	c.t.Helper()
	select {
	case r, ok := <-c.resps:
		if !ok {
			c.t.Fatal("client stream ended")
		}
		if err := c.ads.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: r.GetTypeUrl(), ResponseNonce: r.GetNonce()}); err != nil {
			c.t.Fatal(err)
		}
		return r
	case <-time.After(waitTimeout):
		c.t.Fatal("client: timed out waiting for a response")
	}
	return nil
}

// recvResource waits for a response carrying name and returns its body.
func (c *deltaClient) recvResource(name string) *anypb.Any {
	c.t.Helper()
	for {
		r := c.recv()
		for _, res := range r.GetResources() {
			if res.GetName() == name {
				return res.GetResource()
			}
		}
	}
}

// TestUpstreamEndToEnd: real delta clients → the relay process (config,
// downstream server, cache, upstream) → a go-control-plane origin. Three
// clients cost the origin one stream and one subscription; an update
// reaches them all; with the origin stopped, a new client is still served.
func TestUpstreamEndToEnd(t *testing.T) {
	o := newGCPOrigin(t)
	name := "xdstp://origin/envoy.config.cluster.v3.Cluster/c1"
	o.set(resource.ClusterType, name, cluster(name, 1))

	cfg := config.Default()
	cfg.Listen, cfg.Admin = "127.0.0.1:0", "127.0.0.1:0"
	cfg.Authorities = []config.Authority{{Name: "origin", Origins: []string{o.addr}, Transport: config.TransportDelta, GlobCollections: config.GlobNative}}
	cfg.Upstream.Backoff.Initial, cfg.Upstream.Backoff.Max = 20*time.Millisecond, 200*time.Millisecond
	cfg.ShutdownGracePeriod = time.Second
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	rl, err := relaypkg.New(cfg, zaptest.NewLogger(t), prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	if err := rl.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := rl.Close(); err != nil {
			t.Errorf("relay Close: %v", err)
		}
	})

	want := mustAny(t, cluster(name, 1))
	clients := make([]*deltaClient, 3)
	for i := range clients {
		clients[i] = newDeltaClient(t, rl.XDSAddr(), "client")
		clients[i].subscribe(resource.ClusterType, name)
	}
	for i, c := range clients {
		if diff := cmp.Diff(want, c.recvResource(name), protocmp.Transform()); diff != "" {
			t.Errorf("client %d (-want +got):\n%s", i, diff)
		}
	}
	o.mu.Lock()
	opens, subs := o.deltaOpens, subscribedNames(o.deltaReqs, resource.ClusterType, false)
	o.mu.Unlock()
	if opens != 1 {
		t.Errorf("origin saw %d streams, want 1", opens)
	}
	if diff := cmp.Diff([]string{name}, subs); diff != "" {
		t.Errorf("origin subscriptions (-want +got):\n%s", diff)
	}

	o.set(resource.ClusterType, name, cluster(name, 2))
	want2 := mustAny(t, cluster(name, 2))
	for i, c := range clients {
		if diff := cmp.Diff(want2, c.recvResource(name), protocmp.Transform()); diff != "" {
			t.Errorf("client %d update (-want +got):\n%s", i, diff)
		}
	}

	o.stop()
	late := newDeltaClient(t, rl.XDSAddr(), "late")
	late.subscribe(resource.ClusterType, name)
	if diff := cmp.Diff(want2, late.recvResource(name), protocmp.Transform()); diff != "" {
		t.Errorf("client after origin stopped (-want +got):\n%s", diff)
	}
}
