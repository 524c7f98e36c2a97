package downstream

import (
	"context"
	"encoding/binary"
	"fmt"
	"testing"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/xds-relay/xds-relay/internal/cache"
	"github.com/xds-relay/xds-relay/internal/xdstest"
)

// bigBody is revision v of a resource of size bytes: new bytes per v.
func bigBody(size, v int) *anypb.Any {
	b := make([]byte, size)
	binary.BigEndian.PutUint64(b, uint64(v))
	return &anypb.Any{TypeUrl: edsType, Value: b}
}

// bodyRevision is the v of a bigBody.
func bodyRevision(a *anypb.Any) int { return int(binary.BigEndian.Uint64(a.GetValue())) }

// openSlowClient opens, on a connection of its own with the smallest
// flow-control windows, a delta stream subscribed to name that the test
// reads by hand (or never).
func openSlowClient(t *testing.T, e *env, name string) grpc.BidiStreamingClient[discoveryv3.DeltaDiscoveryRequest, discoveryv3.DeltaDiscoveryResponse] {
	t.Helper()
	conn, err := grpc.NewClient(e.conn.Target(), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithInitialWindowSize(64<<10), grpc.WithInitialConnWindowSize(64<<10),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	slow, err := discoveryv3.NewAggregatedDiscoveryServiceClient(conn).DeltaAggregatedResources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := slow.Send(&discoveryv3.DeltaDiscoveryRequest{Node: testNode, TypeUrl: edsType, ResourceNamesSubscribe: []string{name}}); err != nil {
		t.Fatal(err)
	}
	return slow
}

// slowScene is an env serving a big resource (size bytes, past the slow
// client's window and gRPC's 64 KiB write quota), to which a slow client
// (openSlowClient) subscribes, and a small one a reading client holds.
type slowScene struct {
	e     *env
	big   cache.Key
	small string
	slow  grpc.BidiStreamingClient[discoveryv3.DeltaDiscoveryRequest, discoveryv3.DeltaDiscoveryResponse]
	fast  *deltaStreamC
}

func newSlowScene(t *testing.T, sendTimeout time.Duration, size int) *slowScene {
	t.Helper()
	e := newEnv(t, sendTimeout)
	s := &slowScene{e: e, big: key(edsType, xdstp(edsType, "big")), small: xdstp(edsType, "small")}
	e.cache.set(s.big, &cache.Resource{Name: s.big.Name, Body: bigBody(size, 1)})
	r := e.put(edsType, s.small, "1")
	s.slow = openSlowClient(t, e, s.big.Name)
	s.fast = e.delta()
	s.fast.Send(&discoveryv3.DeltaDiscoveryRequest{Node: testNode, TypeUrl: edsType, ResourceNamesSubscribe: []string{s.small}})
	checkDelta(t, deltaResp(edsType, nil, dres(s.small, r)), s.fast.Recv())
	return s
}

// changeSmall publishes version v of the small resource and checks that
// the reading client gets it.
func (s *slowScene) changeSmall(t *testing.T, v int) {
	t.Helper()
	r := s.e.put(edsType, s.small, fmt.Sprint(v))
	checkDelta(t, deltaResp(edsType, nil, dres(s.small, r)), s.fast.Recv())
}

// publishUntil publishes new revisions of k (bodies of size bytes) from
// revision v on, each a moment after the last, until done is closed; it
// returns the next revision. One response is queued whatever its size;
// the next one waits for flow control that the slow client never grants.
// The session coalesces (newest state wins), so a single new revision may
// reach the writer before the first was built and yield one send only:
// publishing goes on until the outcome.
func publishUntil(t *testing.T, e *env, k cache.Key, size, v int, step time.Duration, done <-chan struct{}) int {
	t.Helper()
	deadline := time.NewTimer(xdstest.WaitTimeout)
	defer deadline.Stop()
	for ; ; v++ {
		e.cache.set(k, &cache.Resource{Name: k.Name, Body: bigBody(size, v)})
		select {
		case <-done:
			return v + 1
		case <-time.After(step): // not a wait for the outcome: the next stimulus
		case <-deadline.C:
			t.Fatalf("no outcome within %v", xdstest.WaitTimeout)
		}
	}
}

// With downstream.slow_clients: disconnect, a client that does not read
// is cut off with ResourceExhausted once a Send has waited sendTimeout; a
// concurrent client is not delayed.
func TestSlowClientDisconnected(t *testing.T) {
	const sendTimeout = 100 * time.Millisecond
	const size = 4<<20 - 1024
	s := newSlowScene(t, sendTimeout, size)
	e := s.e
	if err := e.srv.SetSlowClients(DisconnectSlowClients); err != nil {
		t.Fatal(err)
	}
	cut := make(chan struct{})
	e.srv.slowHook = func() { close(cut) }
	publishUntil(t, e, s.big, size, 2, sendTimeout, cut)
	s.changeSmall(t, 2)

	// Draining the slow stream now ends in ResourceExhausted.
	if err := xdstest.Drain(t, s.slow.Recv); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("slow client ended with %v, want ResourceExhausted", err)
	}
	if got := testutil.ToFloat64(e.srv.m.slowDisconnects); got != 1 {
		t.Errorf("slow_disconnects_total = %v, want 1", got)
	}
	if got := testutil.ToFloat64(e.srv.m.parks); got != 0 {
		t.Errorf("parked_total = %v, want 0 (disconnect)", got)
	}
}

// By default a client that does not read is parked, not cut off: its
// stream stays; what the session keeps for it does not grow with the
// changes it misses and it holds no origin change (so the fan-out
// measurement is not held up by it); another client is served meanwhile;
// and once it reads it gets what was queued before it stopped, then the
// newest state, once.
func TestSlowClientParked(t *testing.T) {
	const sendTimeout = 100 * time.Millisecond
	const size = 1 << 20
	s := newSlowScene(t, sendTimeout, size)
	e := s.e
	parked := make(chan struct{})
	e.srv.parkHook = func() { close(parked) }

	v := publishUntil(t, e, s.big, size, 2, sendTimeout, parked)
	ss := sessionWatching(t, e, s.big)
	held := func() (int64, error) {
		ss.mu.Lock()
		defer ss.mu.Unlock()
		if !ss.parked {
			return 0, fmt.Errorf("not parked")
		}
		if n := len(ss.sets); n > 0 {
			return 0, fmt.Errorf("holds %d origin changes", n)
		}
		if ss.sending != nil && len(ss.sending.sets) > 0 {
			return 0, fmt.Errorf("its round being sent holds %d origin changes", len(ss.sending.sets))
		}
		if n := ss.dirty.len(); n > 1 {
			return 0, fmt.Errorf("%d dirty keys, want at most its 1 subscription", n)
		}
		return retainedBytes(ss), nil
	}
	// The changes it misses, while another client is served each one.
	change := func(i int) {
		e.cache.set(s.big, &cache.Resource{Name: s.big.Name, Body: bigBody(size, v)})
		v++
		s.changeSmall(t, i)
	}
	change(2)
	before, err := held()
	if err != nil {
		t.Fatal(err)
	}
	for i := 3; i < 30; i++ {
		change(i)
	}
	after, err := held()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("the parked session keeps %d bytes after one missed change, %d after 28", before, after)
	if after > before {
		t.Errorf("the parked session keeps %d bytes after 27 more changes, %d before: it grows with what it misses", after, before)
	}
	if got := testutil.ToFloat64(e.srv.m.slowDisconnects); got != 0 {
		t.Errorf("slow_disconnects_total = %v, want 0 (parked)", got)
	}
	if p, n := testutil.ToFloat64(e.srv.m.parked), testutil.ToFloat64(e.srv.m.parks); p != 1 || n != 1 {
		t.Errorf("parked_streams = %v, parked_total = %v, want 1 and 1", p, n)
	}
	if c := e.srv.ClientCounts(); c.Parked != 1 {
		t.Errorf("ClientCounts().Parked = %d, want 1", c.Parked)
	}

	newest := v - 1
	got := readParked(t, s.slow, newest)
	// Queued before it stopped: the response past gRPC's write quota and
	// the one whose Send waited; then the newest state.
	if len(got) > 3 {
		t.Errorf("the parked client read revisions %v: more than the 2 queued and the newest", got)
	}
	xdstest.Poll(t, "unparked", func() error {
		if p := testutil.ToFloat64(e.srv.m.parked); p != 0 {
			return fmt.Errorf("parked_streams = %v", p)
		}
		return nil
	})
}

// sessionWatching is the one open session that watches k.
func sessionWatching(t *testing.T, e *env, k cache.Key) *session {
	t.Helper()
	for _, ss := range e.srv.snapshotSessions() {
		ss.mu.Lock()
		keys := ss.keysLocked(nil)
		ss.mu.Unlock()
		for _, sk := range keys {
			if sk == k {
				return ss
			}
		}
	}
	t.Fatalf("no session watches %v", k)
	return nil
}

// readParked reads the slow client's responses until one holds revision
// newest, checking that every one before holds an older revision and that
// nothing follows it; it returns the revisions read.
func readParked(t *testing.T, slow grpc.BidiStreamingClient[discoveryv3.DeltaDiscoveryRequest, discoveryv3.DeltaDiscoveryResponse], newest int) []int {
	t.Helper()
	resps := make(chan *discoveryv3.DeltaDiscoveryResponse, 100)
	go func() {
		defer close(resps)
		for {
			m, err := slow.Recv()
			if err != nil {
				return
			}
			resps <- m
		}
	}()
	var got []int
	for {
		select {
		case m, ok := <-resps:
			if !ok {
				t.Fatalf("the parked stream ended after revisions %v", got)
			}
			if len(m.GetResources()) != 1 {
				t.Fatalf("response %v, want one resource", m)
			}
			rev := bodyRevision(m.GetResources()[0].GetResource())
			got = append(got, rev)
			if rev > newest {
				t.Fatalf("revision %d, past the newest %d", rev, newest)
			}
			if rev < newest {
				continue
			}
			select {
			case m := <-resps:
				t.Fatalf("after the newest state (revisions %v), another response: %v", got, m)
			case <-time.After(xdstest.QuietPeriod):
			}
			return got
		case <-time.After(xdstest.WaitTimeout):
			t.Fatalf("the newest revision %d not read within %v (read %v)", newest, xdstest.WaitTimeout, got)
		}
	}
}

// A parked client whose request ends its stream (here one without a
// type_url) gets that request's status at once: the handler does not wait
// on the Send of a client that does not read.
func TestParkedClientRequestEndsStream(t *testing.T) {
	const sendTimeout = 100 * time.Millisecond
	const size = 1 << 20
	s := newSlowScene(t, sendTimeout, size)
	e, slow := s.e, s.slow
	parked := make(chan struct{})
	e.srv.parkHook = func() { close(parked) }
	publishUntil(t, e, s.big, size, 2, sendTimeout, parked)

	if err := slow.Send(&discoveryv3.DeltaDiscoveryRequest{}); err != nil {
		t.Fatal(err)
	}
	// Ended while the client still does not read (reading would release
	// the Send).
	xdstest.Poll(t, "the parked stream ended", func() error {
		if n := len(e.srv.snapshotSessions()); n != 1 {
			return fmt.Errorf("%d sessions open, want the reading client's only", n)
		}
		return nil
	})
	if err := xdstest.Drain(t, slow.Recv); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("parked client ended with %v, want InvalidArgument", err)
	}
	if got := testutil.ToFloat64(e.srv.m.slowDisconnects); got != 0 {
		t.Errorf("slow_disconnects_total = %v, want 0", got)
	}
}
