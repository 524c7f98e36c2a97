package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"

	"github.com/xds-relay/xds-relay/config"
	relayproc "github.com/xds-relay/xds-relay/internal/relay"
	"github.com/xds-relay/xds-relay/internal/xdstest"
)

// slowScene is a relay on a go-control-plane origin serving a big
// cluster (1 MiB: past gRPC's 64 KiB write quota and the client's window)
// and a small one, both changed in each origin change; a slow client
// subscribed to the big one, on a connection with the smallest
// flow-control windows, which the test reads by hand (or never); and a
// client that reads, subscribed to the small one (its sends never wait).
type slowScene struct {
	o          *gcpOrigin
	r          *relayproc.Relay
	big, small string
	gen        int64 // the clusters' generation (connect timeout)
	slow       grpc.BidiStreamingClient[discoveryv3.DeltaDiscoveryRequest, discoveryv3.DeltaDiscoveryResponse]
	endSlow    context.CancelFunc // ends the slow client's stream
	fast       *deltaADS
	fv         deltaView
}

func newSlowScene(t *testing.T, edit func(*config.Config)) *slowScene {
	t.Helper()
	s := &slowScene{o: newGCPOrigin(t), big: dsCluster("big"), small: dsCluster("small"), gen: 1}
	s.setBoth()
	s.r = startRelay(t, edit, s.o.addr)
	slowConn := dial(t, s.r.XDSAddr(), grpc.WithInitialWindowSize(64<<10), grpc.WithInitialConnWindowSize(64<<10),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20)))
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	slow, err := discoveryv3.NewAggregatedDiscoveryServiceClient(slowConn).DeltaAggregatedResources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := slow.Send(&discoveryv3.DeltaDiscoveryRequest{Node: testNodeDS, TypeUrl: resource.ClusterType, ResourceNamesSubscribe: []string{s.big}}); err != nil {
		t.Fatal(err)
	}
	s.slow, s.endSlow = slow, cancel
	s.fast = openDelta(t, dial(t, s.r.XDSAddr(), grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20))))
	s.fv = subscribeClusters(t, s.fast, s.small)
	return s
}

// setBoth sets generation gen of both clusters in one origin change.
func (s *slowScene) setBoth() {
	s.o.setAll(resource.ClusterType, map[string]types.Resource{s.big: s.bigCluster(), s.small: cluster(s.small, s.gen)})
}

func (s *slowScene) bigCluster() *clusterv3.Cluster {
	c := cluster(s.big, s.gen)
	c.AltStatName = strings.Repeat("x", 1<<20)
	return c
}

// change publishes the next generation of both clusters (one origin
// change) and waits until the reading client holds it.
func (s *slowScene) change(t *testing.T) {
	t.Helper()
	s.gen++
	s.setBoth()
	recvDelta(t, s.fast, s.fv, func() bool { return timeoutOf(s.fv, s.small) == s.gen })
}

// changeUntil changes the clusters until done holds, a change every pace
// at most: gRPC takes one response past a stream's write quota (64 KiB)
// without waiting, so the relay's Send of the slow client's first big
// response returns at once and only a later one waits; how many changes
// that takes depends on how the relay coalesces them, so on the machine's
// speed. The slow client must start reading only once done holds: one
// that drains within send_timeout is rightly neither slow nor parked.
func (s *slowScene) changeUntil(t *testing.T, what string, pace time.Duration, done func() bool) {
	t.Helper()
	deadline := time.Now().Add(xdstest.WaitTimeout)
	for !done() {
		if time.Now().After(deadline) {
			t.Fatalf("slow client not %s within %v (%d origin changes)", what, xdstest.WaitTimeout, s.gen-1)
		}
		s.change(t)
		// Pacing only (the deadline above is the wait): give a Send that
		// waits its send_timeout, so a fast machine does not publish
		// 1 MiB in a busy loop.
		waitUntil(pace, done)
	}
	t.Logf("slow client %s after %d origin changes", what, s.gen-1)
}

// With downstream.slow_clients: disconnect, a client that does not read
// is cut off with ResourceExhausted after send_timeout; a concurrent
// client keeps receiving every update meanwhile.
func TestDownstreamSlowClient(t *testing.T) {
	const sendTimeout = 200 * time.Millisecond
	s := newSlowScene(t, func(c *config.Config) {
		c.Downstream.SendTimeout = sendTimeout
		c.Downstream.SlowClients = config.SlowClientsDisconnect
	})
	const slowCuts = "xds_relay_downstream_slow_disconnects_total"
	s.changeUntil(t, "cut off", 2*sendTimeout, func() bool { return relayMetric(t, s.r, slowCuts) > 0 })
	s.change(t) // the reading client is not held up by the one cut off
	if err := xdstest.Drain(t, s.slow.Recv); grpcCode(err) != codes.ResourceExhausted {
		t.Fatalf("slow client ended with %v, want ResourceExhausted", err)
	}
	if n := relayMetric(t, s.r, slowCuts); n != 1 {
		t.Errorf("%s = %v, want 1 (the slow client only)", slowCuts, n)
	}
	if n := relayMetric(t, s.r, "xds_relay_downstream_parked_total"); n != 0 {
		t.Errorf("parked_total = %v, want 0 (disconnect)", n)
	}
}

// A client that stops reading is parked, not cut off (the default
// downstream.slow_clients: park): while a go-control-plane origin changes
// its resource many times, it keeps its stream, the relay counts it
// parked, it holds up neither another client nor the fan-out measurement
// (each origin change, which both clients watch, is measured as soon as
// the client that reads has it), and when it reads again it gets what was
// queued before it stopped, then the newest state, once.
func TestDownstreamSlowClientParked(t *testing.T) {
	const sendTimeout = 200 * time.Millisecond
	s := newSlowScene(t, func(c *config.Config) { c.Downstream.SendTimeout = sendTimeout })
	s.changeUntil(t, "parked", 2*sendTimeout, func() bool { return relayMetric(t, s.r, "xds_relay_downstream_parked_total") > 0 })

	// Parked: changes go on, each reaching the reading client, measured.
	typ := []string{"type", "envoy.config.cluster.v3.Cluster"}
	fanout0 := relayMetric(t, s.r, "xds_relay_fanout_duration_seconds", typ...)
	const more = 20
	for range more {
		s.change(t)
	}
	waitRelayMetric(t, s.r, "every change while parked measured", func(v float64) bool { return v >= fanout0+more },
		"xds_relay_fanout_duration_seconds", typ...)
	if n := relayMetric(t, s.r, "xds_relay_downstream_parked_streams"); n != 1 {
		t.Errorf("parked_streams = %v, want 1", n)
	}
	if n := relayMetric(t, s.r, "xds_relay_downstream_slow_disconnects_total"); n != 0 {
		t.Errorf("slow_disconnects_total = %v, want 0: parked, not cut off", n)
	}

	// Reading again: what was queued, then the newest, once.
	var got []int64
	for {
		m, err := s.slow.Recv()
		if err != nil {
			t.Fatalf("parked client's stream ended after generations %v: %v", got, err)
		}
		v := deltaView{}
		v.apply(m)
		g := timeoutOf(v, s.big)
		got = append(got, g)
		if g == s.gen {
			break
		}
		if g > s.gen || len(got) > 3 {
			t.Fatalf("parked client read generations %v: want at most 2 queued before the newest (%d)", got, s.gen)
		}
	}
	t.Logf("parked client read generations %v", got)
	quiet := make(chan error, 1)
	go func() { _, err := s.slow.Recv(); quiet <- err }()
	select {
	case err := <-quiet:
		t.Fatalf("after the newest state, the parked client got another response or an end: %v", err)
	case <-time.After(xdstest.QuietPeriod):
	}
	waitRelayMetric(t, s.r, "the client no longer parked", func(v float64) bool { return v == 0 }, "xds_relay_downstream_parked_streams")
	s.endSlow()
	<-quiet
}

// A client that changes its subscriptions as fast as it can is held to
// its request budget (downstream.limits.requests_per_second and
// request_burst): every request handled, its stream kept, but no faster
// than the budget, counted as throttled; another client is served
// meanwhile.
func TestDownstreamRequestBudget(t *testing.T) {
	const rate, burst, n = 100, 10, 110
	o := newGCPOrigin(t)
	// The churning client's requests are of their own type, so the
	// requests metric of that type counts them alone.
	churned, other := endpointNames("churned", 1)[0], dsCluster("other")
	o.set(resource.EndpointType, churned, cla(churned, 1))
	o.set(resource.ClusterType, other, cluster(other, 1))
	r := startRelay(t, func(c *config.Config) {
		c.Downstream.Limits.RequestsPerSecond, c.Downstream.Limits.RequestBurst = rate, burst
	}, o.addr)
	served := openDelta(t, dial(t, r.XDSAddr()))
	sv := subscribeClusters(t, served, other)

	typ := []string{"type", "envoy.config.endpoint.v3.ClusterLoadAssignment"}
	churn := openDelta(t, dial(t, r.XDSAddr()))
	start := time.Now()
	for i := range n {
		req := &discoveryv3.DeltaDiscoveryRequest{Node: testNodeDS, TypeUrl: resource.EndpointType, ResourceNamesSubscribe: []string{churned}}
		if i%2 == 1 {
			req = &discoveryv3.DeltaDiscoveryRequest{TypeUrl: resource.EndpointType, ResourceNamesUnsubscribe: []string{churned}}
		}
		churn.Send(req)
	}
	o.set(resource.ClusterType, other, cluster(other, 2))
	recvDelta(t, served, sv, func() bool { return timeoutOf(sv, other) == 2 })

	xdstest.Poll(t, "every churning request handled", func() error {
		got, since := relayMetric(t, r, "xds_relay_downstream_requests_total", typ...), time.Since(start)
		// At most the burst, the one that overdrew it and the rate since.
		if most := float64(burst + 1 + int(since.Seconds()*rate)); got > most {
			t.Fatalf("%v requests handled %v after the first, past the budget's %v", got, since, most)
		}
		if got < n {
			return fmt.Errorf("%v of %d handled", got, n)
		}
		return nil
	})
	if least := time.Duration(n-burst-1) * time.Second / rate; time.Since(start) < least {
		t.Errorf("%d requests handled in %v, faster than the budget allows (%v)", n, time.Since(start), least)
	}
	if got := relayMetric(t, r, "xds_relay_downstream_requests_throttled_total"); got < 1 {
		t.Errorf("requests_throttled_total = %v, want some", got)
	}
}
