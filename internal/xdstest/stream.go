package xdstest

import (
	"context"
	"sync"
	"testing"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/status"
)

// Stream is a raw client stream whose responses a pump goroutine receives
// into a buffer; the test's Cleanup ends the pump.
type Stream[Req, Resp any] struct {
	t     testing.TB
	send  func(*Req) error // called by the test goroutine only
	resps chan *Resp       // filled by the pump
	errc  chan error       // 1 slot: why Recv failed
}

// Open opens a stream with open and starts its pump; the test's Cleanup
// ends it.
func Open[Req, Resp any](t testing.TB, open func(context.Context) (grpc.BidiStreamingClient[Req, Resp], error)) *Stream[Req, Resp] {
	t.Helper()
	s, stop := Start(t, open)
	t.Cleanup(stop)
	return s
}

// Start is Open for a stream the caller ends before the test does (a
// client that leaves): stop ends the stream and waits for its pump; it is
// idempotent.
func Start[Req, Resp any](t testing.TB, open func(context.Context) (grpc.BidiStreamingClient[Req, Resp], error)) (*Stream[Req, Resp], func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	st, err := open(ctx)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	s := &Stream[Req, Resp]{t: t, send: st.Send, resps: make(chan *Resp, 100), errc: make(chan error, 1)}
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
	return s, func() { cancel(); wg.Wait() }
}

// DeltaADS opens a delta ADS stream on conn.
func DeltaADS(t testing.TB, conn grpc.ClientConnInterface) *Stream[discoveryv3.DeltaDiscoveryRequest, discoveryv3.DeltaDiscoveryResponse] {
	t.Helper()
	return Open(t, DeltaOpener(conn))
}

// SotWADS opens a SotW ADS stream on conn.
func SotWADS(t testing.TB, conn grpc.ClientConnInterface) *Stream[discoveryv3.DiscoveryRequest, discoveryv3.DiscoveryResponse] {
	t.Helper()
	return Open(t, SotWOpener(conn))
}

// DeltaOpener opens delta ADS streams on conn (for Open or Start).
func DeltaOpener(conn grpc.ClientConnInterface) func(context.Context) (grpc.BidiStreamingClient[discoveryv3.DeltaDiscoveryRequest, discoveryv3.DeltaDiscoveryResponse], error) {
	c := discoveryv3.NewAggregatedDiscoveryServiceClient(conn)
	return func(ctx context.Context) (grpc.BidiStreamingClient[discoveryv3.DeltaDiscoveryRequest, discoveryv3.DeltaDiscoveryResponse], error) {
		return c.DeltaAggregatedResources(ctx)
	}
}

// SotWOpener opens SotW ADS streams on conn (for Open or Start).
func SotWOpener(conn grpc.ClientConnInterface) func(context.Context) (grpc.BidiStreamingClient[discoveryv3.DiscoveryRequest, discoveryv3.DiscoveryResponse], error) {
	c := discoveryv3.NewAggregatedDiscoveryServiceClient(conn)
	return func(ctx context.Context) (grpc.BidiStreamingClient[discoveryv3.DiscoveryRequest, discoveryv3.DiscoveryResponse], error) {
		return c.StreamAggregatedResources(ctx)
	}
}

// Send sends r; a failure fails the test.
func (s *Stream[Req, Resp]) Send(r *Req) {
	s.t.Helper()
	if err := s.send(r); err != nil {
		s.t.Fatalf("send: %v", err)
	}
}

// Recv returns the next response; the stream ending, or no response
// within WaitTimeout, fails the test.
func (s *Stream[Req, Resp]) Recv() *Resp {
	s.t.Helper()
	select {
	case m := <-s.resps:
		return m
	case err := <-s.errc:
		s.t.Fatalf("stream ended: %v", err)
	case <-time.After(WaitTimeout):
		s.t.Fatalf("no response within %v", WaitTimeout)
	}
	return nil
}

// None asserts that no response arrives within QuietPeriod.
func (s *Stream[Req, Resp]) None() {
	s.t.Helper()
	select {
	case m := <-s.resps:
		s.t.Fatalf("unexpected response: %v", m)
	case err := <-s.errc:
		s.t.Fatalf("stream ended: %v", err)
	case <-time.After(QuietPeriod):
	}
}

// Err waits for the stream to end, dropping responses, and returns its status.
func (s *Stream[Req, Resp]) Err() *status.Status {
	s.t.Helper()
	for {
		select {
		case <-s.resps:
		case err := <-s.errc:
			return status.Convert(err)
		case <-time.After(WaitTimeout):
			s.t.Fatalf("stream did not end within %v", WaitTimeout)
			return nil
		}
	}
}

// Responses is the pump's buffer, for tests that select over several
// streams or wait on their own deadline.
func (s *Stream[Req, Resp]) Responses() <-chan *Resp { return s.resps }

// Errors yields the error that ended the stream (once).
func (s *Stream[Req, Resp]) Errors() <-chan error { return s.errc }

// Drain receives with recv until it fails and returns that error, for a
// stream read by hand (no pump); not ending within WaitTimeout fails the
// test.
func Drain[T any](t testing.TB, recv func() (T, error)) error {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		for {
			if _, err := recv(); err != nil {
				done <- err
				return
			}
		}
	}()
	select {
	case err := <-done:
		return err
	case <-time.After(WaitTimeout):
		t.Fatalf("stream did not end within %v", WaitTimeout)
		return nil
	}
}
