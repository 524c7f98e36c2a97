package downstream

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	rtmetrics "runtime/metrics"
	"runtime/pprof"
	"strconv"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/xds-relay/xds-relay/internal/xdstest"
	"github.com/xds-relay/xds-relay/internal/xdstype"
)

// What an idle stream costs the server: a client subscribed, answered,
// ACKed, and then quiet, as most of a fleet is between updates.

// An idle synced stream costs one goroutine (its handler, in Recv): no
// request pump and no writer.
func TestIdleStreamOneGoroutine(t *testing.T) {
	const n = 100
	e := newEnv(t, 0)
	name := xdstp(edsType, "idle")
	e.put(edsType, name, "1")
	before := sessionGoroutines()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if err := openIdle(ctx, []*grpc.ClientConn{e.conn}, n, xdstype.Delta, func(int) []string { return []string{name} }); err != nil {
		t.Fatal(err)
	}
	// Writers exit once their round is sent: wait for them to.
	xdstest.Poll(t, "one goroutine per idle stream", func() error {
		if err := writersIdle(e.srv, n); err != nil {
			return err
		}
		if got := sessionGoroutines() - before; got < n || got > n+2 {
			return fmt.Errorf("%d idle streams run %d goroutines of package downstream, want %d", n, got, n)
		}
		return nil
	})
}

// writersIdle reports whether srv serves n sessions, none with a writer.
func writersIdle(srv *Server, n int) error {
	sessions := srv.listSessions()
	if len(sessions) != n {
		return fmt.Errorf("%d sessions, want %d", len(sessions), n)
	}
	for _, ss := range sessions {
		ss.mu.Lock()
		running := ss.writer.runningLocked()
		ss.mu.Unlock()
		if running {
			return fmt.Errorf("session %d has a writer running", ss.id)
		}
	}
	return nil
}

// sessionGoroutines counts the goroutines with a frame of this package:
// handlers, pumps and writers (the test's own goroutine is one of them).
func sessionGoroutines() int {
	buf := make([]byte, 1<<20)
	for {
		m := runtime.Stack(buf, true)
		if m < len(buf) {
			buf = buf[:m]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	n := 0
	for _, g := range bytes.Split(buf, []byte("\n\n")) {
		if bytes.Contains(g, []byte("xds-relay/internal/downstream.")) {
			n++
		}
	}
	return n
}

// openIdle opens n ADS streams of variant round robin over conns, stream
// i subscribed to names(i), answered and ACKed. ctx ends them; opening
// fails if they are not all answered within xdstest.WaitTimeout.
func openIdle(ctx context.Context, conns []*grpc.ClientConn, n int, variant xdstype.Variant, names func(i int) []string) error {
	ctx, cancel := context.WithCancel(ctx) // the streams' context, ended by the caller's
	watchdog := time.AfterFunc(xdstest.WaitTimeout, cancel)
	defer watchdog.Stop()
	for i := range n {
		c := discoveryv3.NewAggregatedDiscoveryServiceClient(conns[i%len(conns)])
		var err error
		if variant == xdstype.Delta {
			err = syncIdle(ctx, c.DeltaAggregatedResources, func(r *discoveryv3.DeltaDiscoveryResponse) *discoveryv3.DeltaDiscoveryRequest {
				if r == nil {
					return &discoveryv3.DeltaDiscoveryRequest{Node: idleNode(i), TypeUrl: edsType, ResourceNamesSubscribe: names(i)}
				}
				return &discoveryv3.DeltaDiscoveryRequest{TypeUrl: edsType, ResponseNonce: r.GetNonce()}
			})
		} else {
			err = syncIdle(ctx, c.StreamAggregatedResources, func(r *discoveryv3.DiscoveryResponse) *discoveryv3.DiscoveryRequest {
				req := &discoveryv3.DiscoveryRequest{Node: idleNode(i), TypeUrl: edsType, ResourceNames: names(i)}
				if r != nil {
					req.VersionInfo, req.ResponseNonce = r.GetVersionInfo(), r.GetNonce()
				}
				return req
			})
		}
		if err != nil {
			return fmt.Errorf("stream %d: %w", i, err)
		}
	}
	return nil
}

// idleNode is idle stream i's node: its own id, as in a fleet.
func idleNode(i int) *corev3.Node {
	return &corev3.Node{Id: fmt.Sprintf("idle-%05d", i), Cluster: testNode.GetCluster()}
}

// syncIdle opens one stream, sends req(nil), waits for the answer and
// ACKs it (req(answer)).
func syncIdle[Req, Resp any](ctx context.Context, open func(context.Context, ...grpc.CallOption) (grpc.BidiStreamingClient[Req, Resp], error), req func(*Resp) *Req) error {
	st, err := open(ctx)
	if err != nil {
		return err
	}
	if err := st.Send(req(nil)); err != nil {
		return err
	}
	r, err := st.Recv()
	if err != nil {
		return err
	}
	return st.Send(req(r))
}

// idleClientsEnv tells the test binary, run as BenchmarkIdleStreams'
// client process, what to open: address, streams, connections, variant,
// names per stream.
const idleClientsEnv = "XDS_RELAY_IDLE_CLIENTS"

// idleHeapProfileEnv names a file BenchmarkIdleStreams writes a heap
// profile of the idle streams to (go tool pprof -sample_index=inuse_space);
// each case writes its own, the case's name appended.
const idleHeapProfileEnv = "XDS_RELAY_IDLE_HEAPPROFILE"

// idleResources is how many resources the idle streams' names are drawn
// from: with names=20, stream i subscribes to its own window of them,
// overlapping its neighbours' (the bench's Envoy-shaped workload).
const idleResources = 1000

// idleNames is the names idle stream i of w names subscribes to: a
// window of w of the idleResources, starting at i.
func idleNames(i, w int) []string {
	out := make([]string, w)
	for j := range out {
		out[j] = xdstp(edsType, fmt.Sprintf("idle-%04d", (i+j)%idleResources))
	}
	return out
}

// BenchmarkIdleStreams measures what an idle synced stream costs the
// server: streams opened by a client in another process (this test
// binary, running TestIdleClientsProcess), so that only the server's
// goroutines, heap and stacks are counted. Run it once per case:
//
//	go test -run '^$' -bench IdleStreams -benchtime 1x ./internal/downstream/
//
// names=1 subscribes each stream to one name, names=20 to its own window
// of 20 (the Envoy-shaped workload). conns=1 puts every stream on one
// connection (the stream's own cost); conns=n gives each its own, as a
// fleet connects (connection included). Each stream has its own node id,
// as a fleet's clients do; ledger=on (as the relay runs) settles each
// stream's initial sync in the propagation ledger, ledger=off does not
// record it; delivery=on runs safe delivery at its defaults
// (benchFeatures; 20-name streams with the relay's defaults only).
// XDS_RELAY_IDLE_STREAMS sets n (2000 by default; 200 under the race
// detector, where make test runs every benchmark once, instrumented, and
// the figures mean nothing). rss-B/stream is the process's resident set,
// grown by what the cases before left: it means something in the first
// case a process runs (run one per process, -bench naming the case in
// full).
func BenchmarkIdleStreams(b *testing.B) {
	n := 2000
	if raceEnabled {
		n = 200
	}
	if v, err := strconv.Atoi(os.Getenv("XDS_RELAY_IDLE_STREAMS")); err == nil && v > 0 {
		n = v
	}
	for _, variant := range []xdstype.Variant{xdstype.Delta, xdstype.SotW} {
		for _, names := range []int{1, 20} {
			for _, conns := range []int{1, n} {
				for i, f := range benchFeatures {
					if i > 0 && names > 1 {
						continue // what the features cost: one case is enough
					}
					b.Run(fmt.Sprintf("variant=%s/names=%d/conns=%d/%s", variant, names, conns, f), func(b *testing.B) {
						for range b.N {
							measureIdle(b, idleCase{n: n, conns: conns, names: names, variant: variant, f: f})
						}
					})
				}
			}
		}
	}
}

// idleCase is one case of BenchmarkIdleStreams.
type idleCase struct {
	n, conns, names int
	variant         xdstype.Variant
	f               features
}

// measureIdle opens c.n idle streams from a client process and reports
// the server's goroutines, heap and stack in use per stream.
func measureIdle(b *testing.B, c idleCase) {
	profile := os.Getenv(idleHeapProfileEnv)
	if profile != "" {
		runtime.MemProfileRate = 512 // each case's streams sampled finely
	}
	e := newEnvOn(b, newTestCacheWith(b, c.f), 0)
	for i := range idleResources {
		e.put(edsType, idleNames(i, 1)[0], "1")
	}
	m0 := inUse()
	rss0 := rssBytes(b)
	cmd := exec.Command(os.Args[0], "-test.run=^TestIdleClientsProcess$")
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s,%d,%d,%s,%d", idleClientsEnv, e.conn.Target(), c.n, c.conns, c.variant, c.names))
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() {
		stdin.Close() // the client process ends its streams and exits
		if err := cmd.Wait(); err != nil {
			b.Errorf("client process: %v", err)
		}
	}()
	if line, err := bufio.NewReader(stdout).ReadString('\n'); err != nil || line != "synced\n" {
		b.Fatalf("client process: %q, %v", line, err)
	}
	xdstest.Poll(b, "writers idle", func() error { return writersIdle(e.srv, c.n) })
	rss1 := rssBytes(b) // as the bench reads it: after the sync, no collection forced
	m1 := inUse()
	per := func(a, b uint64) float64 { return (float64(b) - float64(a)) / float64(c.n) }
	b.ReportMetric(per(uint64(m0.goroutines), uint64(m1.goroutines)), "goroutines/stream")
	b.ReportMetric(per(m0.heap, m1.heap), "heap-B/stream")
	b.ReportMetric(per(m0.live, m1.live), "live-B/stream")
	b.ReportMetric(per(m0.stack, m1.stack), "stack-B/stream")
	b.ReportMetric(per(m0.stackScan, m1.stackScan), "stack-scanned-B/stream")
	b.ReportMetric(per(rss0, rss1), "rss-B/stream")
	if profile != "" {
		writeHeapProfile(b, profile+"-"+strings.ReplaceAll(b.Name(), "/", "-"))
	}
}

// writeHeapProfile writes the heap profile to path.
func writeHeapProfile(b *testing.B, path string) {
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	if err := pprof.WriteHeapProfile(f); err != nil {
		b.Fatal(err)
	}
}

// memInUse is what the server holds after a collection: goroutines,
// heap in use, of it the bytes of live objects (what the next
// collection's goal grows from; heap in use also counts the free slots of
// spans in use), stacks in use, and of them the bytes scanned (the part
// of each stack in use, which the goal also grows from).
type memInUse struct {
	goroutines                   int
	heap, live, stack, stackScan uint64
}

// rssBytes is this process's resident set (VmRSS), the bench's measure
// of a serving process's memory.
func rssBytes(b *testing.B) uint64 {
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		b.Skipf("no resident set size here: %v", err)
	}
	for line := range strings.Lines(string(status)) {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kib, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				b.Fatalf("VmRSS: %v", err)
			}
			return kib << 10
		}
	}
	b.Skip("no VmRSS in /proc/self/status")
	return 0
}

// inUse returns what the server holds after a collection.
func inUse() memInUse {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	s := []rtmetrics.Sample{{Name: "/gc/heap/live:bytes"}, {Name: "/gc/scan/stack:bytes"}}
	rtmetrics.Read(s)
	return memInUse{goroutines: runtime.NumGoroutine(), heap: ms.HeapInuse, live: s[0].Value.Uint64(), stack: ms.StackInuse, stackScan: s[1].Value.Uint64()}
}

// TestIdleClientsProcess is BenchmarkIdleStreams' client process: it
// opens the idle streams idleClientsEnv asks for, says "synced" and holds
// them until its stdin closes.
func TestIdleClientsProcess(t *testing.T) {
	spec, ok := os.LookupEnv(idleClientsEnv)
	if !ok {
		t.Skip("run by BenchmarkIdleStreams")
	}
	f := strings.Split(spec, ",")
	n, _ := strconv.Atoi(f[1])
	nconns, _ := strconv.Atoi(f[2])
	conns := make([]*grpc.ClientConn, nconns)
	for i := range conns {
		c, err := grpc.NewClient(f[0], grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		conns[i] = c
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w, _ := strconv.Atoi(f[4])
	if err := openIdle(ctx, conns, n, xdstype.Variant(f[3]), func(i int) []string { return idleNames(i, w) }); err != nil {
		t.Fatal(err)
	}
	fmt.Println("synced")
	_, _ = bufio.NewReader(os.Stdin).ReadString('\n') // until EOF
}
