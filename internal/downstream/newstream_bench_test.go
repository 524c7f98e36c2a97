package downstream

import (
	"context"
	"fmt"
	"io"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc/status"

	"github.com/xds-relay/xds-relay/config"
	"github.com/xds-relay/xds-relay/internal/access"
	"github.com/xds-relay/xds-relay/internal/cache"
	"github.com/xds-relay/xds-relay/internal/xdstype"
)

// newStreamNames is how many names a benchmarked stream subscribes: an
// Envoy's EDS request in the bench's envoy workload (a window of 20-21 of
// 1000 resources).
const newStreamNames = 20

// BenchmarkNewStream measures what one new delta stream costs the server
// from its first request (20 xdstp names) to its end: accept, resolve,
// subscribe and Watch, the first response built and handed to send,
// then the teardown (Unwatch). The session runs its own loop (run) as a
// gRPC handler would, without gRPC: its recv is fed the request and its
// send takes the response, so only the relay's own work is measured.
//
//   - warm: the resources are cached, and each is watched by 200 other
//     streams (the envoy workload at N = 10000: a reconnect storm).
//   - cold: nothing is cached (nobody else watches; what a stream leaves
//     is dropped), so its names are pending when watched; the origin's
//     answer (one Apply of the 20) follows, and the response goes out
//     once it is in (the gather window).
//
// grpc-warm is warm over a real gRPC stream on loopback, client and
// server in this process: what gRPC adds per stream (HTTP/2 stream, the
// request's decoding, the handler goroutine), the client's side included.
func BenchmarkNewStream(b *testing.B) {
	b.Run("warm", func(b *testing.B) { benchNewStream(b, true) })
	b.Run("cold", func(b *testing.B) { benchNewStream(b, false) })
	b.Run("grpc-warm", benchNewStreamGRPC)
}

func benchNewStreamGRPC(b *testing.B) {
	e := newEnv(b, 0)
	names, rs := benchResources()
	for range 200 {
		w := new(idleWatcher)
		for _, n := range names {
			e.cache.Watch(w, nil, key(edsType, n))
		}
	}
	e.cache.Apply(cache.Update{Link: cache.LinkID{Authority: authority}, TypeURL: edsType, Resources: rs})
	client := discoveryv3.NewAggregatedDiscoveryServiceClient(e.conn)
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := processCPU(b)
	for i := 0; i < b.N; i++ {
		start := (i * 7) % benchPool
		req := &discoveryv3.DeltaDiscoveryRequest{Node: testNode, TypeUrl: edsType, ResourceNamesSubscribe: make([]string, newStreamNames)}
		for j := range req.ResourceNamesSubscribe {
			req.ResourceNamesSubscribe[j] = names[(start+j)%benchPool]
		}
		st, err := client.DeltaAggregatedResources(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		if err := st.Send(req); err != nil {
			b.Fatal(err)
		}
		resp, err := st.Recv()
		if err != nil || len(resp.GetResources()) != newStreamNames {
			b.Fatalf("first response: %d resources, %v", len(resp.GetResources()), err)
		}
		if err := st.CloseSend(); err != nil {
			b.Fatal(err)
		}
		if _, err := st.Recv(); err != io.EOF { // the handler returned
			b.Fatalf("stream end: %v", err)
		}
	}
	b.ReportMetric(float64(processCPU(b)-cpu0)/float64(b.N), "cpu-ns/op")
}

// idleWatcher stands for another client's session watching a key: the
// warm benchmark announces no change, so it is never notified.
type idleWatcher struct{ _ byte }

func (*idleWatcher) Notify(cache.Key)       {}
func (*idleWatcher) Flush(*cache.ChangeSet) {}

// A gRPC handler's stack has grown to 8 KiB by the time its first
// request is handled (grpc-go's Recv path needs more than 4 KiB), and
// gRPC's frames below the handler take about 2 KiB of it; a writer's
// (a goroutine of its own, started for each round of work) grows to
// 4 KiB in SendMsg, and no further unless the relay's frames take it
// there (measured with debug.SetMaxStack over BenchmarkNewStream/grpc-warm:
// a sort of 20 probes by value once took the writer to 8 KiB). The
// benchmark's goroutines are made so too, so that it pays for the stack
// growth the relay's own frames cause, not for one gRPC makes anyway.
const (
	grpcStack       = 6 << 10
	grpcWriterStack = 2 << 10
)

// growStack uses about n bytes of stack, growing the goroutine's.
//
//go:noinline
func growStack(n int) byte {
	var pad [512]byte
	pad[n%len(pad)] = byte(n)
	if n <= len(pad) {
		return pad[0]
	}
	return growStack(n-len(pad)) + pad[n%len(pad)]
}

// callBelow calls f below about 2 KiB of stack, where gRPC calls a
// handler.
//
//go:noinline
func callBelow(f func()) {
	var pad [2 << 10]byte
	pad[len(pad)-1] = 1
	f()
	sink.Store(uint32(pad[len(pad)-1]))
}

// sink keeps callBelow's pad from being optimised away; atomic, since
// the handler and the writer call it at once.
var sink atomic.Uint32

// nopSubscriber leaves every subscription pending: the benchmark answers
// as the origin would.
type nopSubscriber struct{}

func (nopSubscriber) Subscribe(cache.LinkID, *corev3.Node, string, []string) {}
func (nopSubscriber) Unsubscribe(cache.LinkID, string, []string)             {}

// nopStatus stands for gRPC's transport stream: no status is written in
// a benchmarked stream's life.
type nopStatus struct{}

func (nopStatus) WriteStatus(*status.Status) error { return nil }

const benchPool = 1000 // resources of the warm benchmark

func benchNewStream(b *testing.B, warm bool) {
	c := cache.New(cache.Options{Logger: zap.NewNop(), Upstream: nopSubscriber{}, MaxResources: 0})
	srv, err := New(Options{
		Cache: c, Resolver: NewResolver([]string{authority}, nil), SendTimeout: config.DefaultSendTimeout,
		Limits: testLimits, Logger: zap.NewNop(), SharedEncoding: true, GatherWindow: config.DefaultGatherWindow,
	})
	if err != nil {
		b.Fatal(err)
	}
	names, rs := benchResources()
	if warm {
		for range 200 {
			w := new(idleWatcher)
			for _, n := range names {
				c.Watch(w, nil, key(edsType, n))
			}
		}
		c.Apply(cache.Update{Link: cache.LinkID{Authority: authority}, TypeURL: edsType, Resources: rs})
	}
	sent := make(chan *encodedResponse, 1)
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := processCPU(b)
	for i := 0; i < b.N; i++ {
		// Overlapping windows, as the envoy workload's; a name's own
		// string each time, as a request decoded from the wire has.
		start := (i * 7) % benchPool
		req := make([]string, newStreamNames)
		var answer []*cache.Resource
		for j := range req {
			req[j] = string([]byte(names[(start+j)%benchPool]))
			if !warm {
				answer = append(answer, rs[(start+j)%benchPool])
			}
		}
		oneStream(b, srv, c, req, answer, sent)
	}
	// The process's CPU time (every goroutine, GC included) is less
	// moved by other load on a shared machine than the wall time.
	b.ReportMetric(float64(processCPU(b)-cpu0)/float64(b.N), "cpu-ns/op")
	b.StopTimer()
	srv.Wait()
}

// processCPU returns the user and system CPU time this process used.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// benchResources returns the benchmark's resources and their names.
func benchResources() ([]string, []*cache.Resource) {
	names := make([]string, benchPool)
	rs := make([]*cache.Resource, benchPool)
	for i := range names {
		names[i] = xdstp(edsType, fmt.Sprintf("cla-%04d", i))
		rs[i] = res(edsType, names[i], "1")
	}
	return names, rs
}

// oneStream runs one stream's life: its first request subscribes names,
// its first response is awaited (the origin answering them first when
// answer is set: the origin's response, a copy of each revision as a
// new revision would be), then the client leaves.
func oneStream(b *testing.B, srv *Server, c *cache.Cache, names []string, answer []*cache.Resource, sent chan *encodedResponse) {
	ss := newSession(srv, xdstype.Delta, "", "bench", access.Identity{}, func(r *encodedResponse) error {
		growStack(grpcWriterStack) // as gRPC's SendMsg grows the writer's
		sent <- r
		return nil
	})
	ss.stream = nopStatus{}
	handled, leave := make(chan struct{}), make(chan struct{})
	calls := 0
	recv := func() (any, error) {
		calls++
		if calls == 1 {
			return &discoveryv3.DeltaDiscoveryRequest{Node: testNode, TypeUrl: edsType, ResourceNamesSubscribe: names}, nil
		}
		close(handled)
		<-leave
		return nil, io.EOF
	}
	done := make(chan error, 1)
	go func() {
		growStack(grpcStack) // as gRPC's Recv grows the handler's
		callBelow(func() {
			done <- ss.run(context.Background(), recv, func(m any) error { return ss.handleDelta(m.(*discoveryv3.DeltaDiscoveryRequest)) })
		})
	}()
	<-handled
	if answer != nil {
		rs := make([]*cache.Resource, len(answer))
		for i, r := range answer {
			rs[i] = &cache.Resource{Name: r.Name, OriginVersion: r.OriginVersion, Body: r.Body, Arrived: r.Arrived}
		}
		c.Apply(cache.Update{Link: cache.LinkID{Authority: authority}, TypeURL: edsType, Resources: rs})
	}
	r := <-sent
	if len(r.shared) != len(names) {
		b.Fatalf("first response carries %d resources, want %d", len(r.shared), len(names))
	}
	close(leave)
	if err := <-done; err != nil {
		b.Fatal(err)
	}
}
