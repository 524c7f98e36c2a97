package integration

import (
	"context"
	"sync"
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

// dsStream is a raw client stream with a receive pump, for tests that
// speak the protocol by hand.
type dsStream[Req, Resp any] struct {
	t     testing.TB
	send  func(*Req) error
	resps chan *Resp
	errc  chan error
}

func openStream[Req, Resp any](t testing.TB, open func(context.Context) (grpc.BidiStreamingClient[Req, Resp], error)) *dsStream[Req, Resp] {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	st, err := open(ctx)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	s := &dsStream[Req, Resp]{t: t, send: st.Send, resps: make(chan *Resp, 100), errc: make(chan error, 1)}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			m, err := st.Recv()
			if err != nil {
				s.errc <- err
				return
			}
			select {
			case s.resps <- m:
			case <-ctx.Done():
				return
			}
		}
	}()
	t.Cleanup(func() { cancel(); wg.Wait() })
	return s
}

func (s *dsStream[Req, Resp]) Send(r *Req) {
	s.t.Helper()
	if err := s.send(r); err != nil {
		s.t.Fatalf("send: %v", err)
	}
}

func (s *dsStream[Req, Resp]) Recv() *Resp {
	s.t.Helper()
	select {
	case m := <-s.resps:
		return m
	case err := <-s.errc:
		s.t.Fatalf("stream ended: %v", err)
	case <-time.After(waitTimeout):
		s.t.Fatalf("no response within %v", waitTimeout)
	}
	return nil
}

// None asserts that no response arrives within quietPeriod.
func (s *dsStream[Req, Resp]) None() {
	s.t.Helper()
	select {
	case m := <-s.resps:
		s.t.Fatalf("unexpected response: %v", m)
	case err := <-s.errc:
		s.t.Fatalf("stream ended: %v", err)
	case <-time.After(quietPeriod):
	}
}

// Err waits for the stream to end and returns its status.
func (s *dsStream[Req, Resp]) Err() *status.Status {
	s.t.Helper()
	for {
		select {
		case <-s.resps:
		case err := <-s.errc:
			return status.Convert(err)
		case <-time.After(waitTimeout):
			s.t.Fatalf("stream did not end within %v", waitTimeout)
			return nil
		}
	}
}

type (
	deltaADS = dsStream[discoveryv3.DeltaDiscoveryRequest, discoveryv3.DeltaDiscoveryResponse]
	sotwADS  = dsStream[discoveryv3.DiscoveryRequest, discoveryv3.DiscoveryResponse]
)

func openDelta(t testing.TB, conn *grpc.ClientConn) *deltaADS {
	c := discoveryv3.NewAggregatedDiscoveryServiceClient(conn)
	return openStream(t, func(ctx context.Context) (grpc.BidiStreamingClient[discoveryv3.DeltaDiscoveryRequest, discoveryv3.DeltaDiscoveryResponse], error) {
		return c.DeltaAggregatedResources(ctx)
	})
}

func openSotW(t testing.TB, conn *grpc.ClientConn) *sotwADS {
	c := discoveryv3.NewAggregatedDiscoveryServiceClient(conn)
	return openStream(t, func(ctx context.Context) (grpc.BidiStreamingClient[discoveryv3.DiscoveryRequest, discoveryv3.DiscoveryResponse], error) {
		return c.StreamAggregatedResources(ctx)
	})
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
