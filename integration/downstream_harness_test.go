package integration

import (
	"context"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zaptest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/xds-relay/xds-relay/config"
	relayproc "github.com/xds-relay/xds-relay/internal/relay"
	"github.com/xds-relay/xds-relay/internal/xdstest"
)

// dsAuthority is the authority the downstream tests serve.
const dsAuthority = "ds.example"

// startRelay runs the whole relay process (relay.New/Start) on loopback
// with one authority served by origins; edit adjusts the config.
func startRelay(t testing.TB, edit func(*config.Config), origins ...string) *relayproc.Relay {
	t.Helper()
	cfg := config.Default()
	cfg.Listen, cfg.Admin = "127.0.0.1:0", "127.0.0.1:0"
	cfg.Authorities = []config.Authority{{Name: dsAuthority, Origins: origins, Transport: config.TransportDelta, GlobCollections: config.GlobEmulated}}
	cfg.Upstream.Backoff.Initial, cfg.Upstream.Backoff.Max = 20*time.Millisecond, 200*time.Millisecond
	cfg.ShutdownGracePeriod = time.Second
	if edit != nil {
		edit(cfg)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("test config: %v", err)
	}
	r, err := relayproc.New(cfg, zaptest.NewLogger(t), prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := r.Close(); err != nil {
			t.Errorf("relay close: %v", err)
		}
	})
	return r
}

// dial connects a plaintext client to addr.
func dial(t testing.TB, addr string, opts ...grpc.DialOption) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(addr, append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// dsTimeouts are the waits of the downstream tests' client streams.
var dsTimeouts = xdstest.Timeouts{Wait: waitTimeout, Quiet: quietPeriod}

type (
	deltaADS = xdstest.Stream[discoveryv3.DeltaDiscoveryRequest, discoveryv3.DeltaDiscoveryResponse]
	sotwADS  = xdstest.Stream[discoveryv3.DiscoveryRequest, discoveryv3.DiscoveryResponse]
)

// openStream opens a raw client stream with open, for tests that speak the
// protocol by hand.
func openStream[Req, Resp any](t testing.TB, open func(context.Context) (grpc.BidiStreamingClient[Req, Resp], error)) *xdstest.Stream[Req, Resp] {
	t.Helper()
	return xdstest.Open(t, dsTimeouts, open)
}

func openDelta(t testing.TB, conn *grpc.ClientConn) *deltaADS {
	return xdstest.DeltaADS(t, conn, dsTimeouts)
}

func openSotW(t testing.TB, conn *grpc.ClientConn) *sotwADS {
	return xdstest.SotWADS(t, conn, dsTimeouts)
}

// deltaView is what a delta client holds: name → version, and the bodies.
type deltaView map[string]*discoveryv3.Resource

// apply folds a response into the view.
func (v deltaView) apply(r *discoveryv3.DeltaDiscoveryResponse) {
	for _, x := range r.GetResources() {
		v[x.GetName()] = x
	}
	for _, n := range r.GetRemovedResources() {
		delete(v, n)
	}
}

var testNodeDS = &corev3.Node{Id: "ds-node", Cluster: "ds-cluster"}

func grpcCode(err error) codes.Code { return status.Code(err) }
