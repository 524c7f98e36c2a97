package upstream

import (
	"context"
	"fmt"
	"sync"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
)

// openADS opens one ADS stream of a transport on a client: a method
// expression such as
// discoveryv3.AggregatedDiscoveryServiceClient.DeltaAggregatedResources.
type openADS[Req, Resp any] func(discoveryv3.AggregatedDiscoveryServiceClient, context.Context, ...grpc.CallOption) (grpc.BidiStreamingClient[Req, Resp], error)

// sessionOps is what a transport does on an open stream. Both run on the
// session goroutine, which owns the transport's state.
type sessionOps[Resp any] struct {
	// sync tells the origin what the cache wants that it was not told yet:
	// once when the stream opens, then after every poke.
	sync func() error
	// handle validates one response, applies it to the cache and ACKs or
	// NACKs it.
	handle func(*Resp) error
}

// runSession dials origin, opens one stream of transport on it and serves
// it with the ops newOps builds for that stream, until the stream fails or
// ctx ends. healthy says at least one response arrived. While the stream is
// open it counts in xds_relay_upstream_streams.
func runSession[Req, Resp any](ctx context.Context, s *stream, origin, transport string, open openADS[Req, Resp],
	newOps func(grpc.BidiStreamingClient[Req, Resp]) sessionOps[Resp]) (healthy bool, err error) {
	conn, err := grpc.NewClient(origin, s.m.dialOpts...)
	if err != nil {
		return false, fmt.Errorf("upstream %s: dial %s: %w", s.id.Authority, origin, err)
	}
	defer conn.Close()
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ads, err := open(discoveryv3.NewAggregatedDiscoveryServiceClient(conn), sctx)
	if err != nil {
		return false, fmt.Errorf("upstream %s: open %s stream to %s: %w", s.id.Authority, transport, origin, err)
	}
	s.m.m.streams.WithLabelValues(s.id.Authority).Inc()
	defer s.m.m.streams.WithLabelValues(s.id.Authority).Dec()
	s.lg.Info("upstream stream open", zap.String("origin", origin), zap.String("transport", transport))

	recv, errc, wait := recvLoop(sctx, ads.Recv)
	defer wait()
	defer cancel() // ends the stream, hence the receiver, before waiting

	ops := newOps(ads)
	if err := ops.sync(); err != nil {
		return false, err
	}
	for {
		select {
		case <-sctx.Done():
			return healthy, sctx.Err()
		case err := <-errc:
			return healthy, fmt.Errorf("upstream %s: %s stream to %s: %w", s.id.Authority, transport, origin, err)
		case <-s.poke:
			if err := ops.sync(); err != nil {
				return healthy, err
			}
		case r := <-recv:
			healthy = true
			if err := ops.handle(r); err != nil {
				return healthy, err
			}
		}
	}
}

// recvLoop calls recv in its own goroutine, the only caller of recv, until
// recv fails (the error goes to the second channel) or ctx ends. What recv
// returns goes to the first channel, unbuffered. The caller owns the
// goroutine: it ends ctx (which must also make recv return, as a stream's
// context does), then calls wait.
func recvLoop[T any](ctx context.Context, recv func() (T, error)) (<-chan T, <-chan error, func()) {
	out := make(chan T)
	errc := make(chan error, 1)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			m, err := recv()
			if err != nil {
				errc <- err
				return
			}
			select {
			case out <- m:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out, errc, wg.Wait
}
