package downstream

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/xds-relay/xds-relay/internal/cache"
	"github.com/xds-relay/xds-relay/internal/xdstest"
	"github.com/xds-relay/xds-relay/internal/xdstype"
)

// laterSubscriber stands for an upstream whose origin answers later, in
// the pieces the test applies: it only records what is subscribed.
type laterSubscriber struct{ subscribed chan []string }

func (s *laterSubscriber) Subscribe(_ cache.LinkID, _ *corev3.Node, _ string, names []string) {
	select {
	case s.subscribed <- names:
	default: // tests that care read every one
	}
}

func (s *laterSubscriber) Unsubscribe(cache.LinkID, string, []string) {}

// fakeTimers stands for the server's timers: a gather window passes only
// when the test fires it.
type fakeTimers struct {
	mu    sync.Mutex
	fs    []*fakeTimer // guarded by mu
	armed chan struct{}
}

type fakeTimer struct {
	f    func()
	done bool // stopped or fired; guarded by fakeTimers.mu
}

func newFakeTimers() *fakeTimers { return &fakeTimers{armed: make(chan struct{}, 100)} }

func (ft *fakeTimers) afterFunc(_ time.Duration, f func()) func() bool {
	t := &fakeTimer{f: f}
	ft.mu.Lock()
	ft.fs = append(ft.fs, t)
	ft.mu.Unlock()
	ft.armed <- struct{}{}
	return func() bool {
		ft.mu.Lock()
		defer ft.mu.Unlock()
		was := !t.done
		t.done = true
		return was
	}
}

// waitArmed waits until a window is armed.
func (ft *fakeTimers) waitArmed(t *testing.T) {
	t.Helper()
	select {
	case <-ft.armed:
	case <-time.After(xdstest.WaitTimeout):
		t.Fatalf("no gather window armed within %v", xdstest.WaitTimeout)
	}
}

// fire passes every window armed and not stopped.
func (ft *fakeTimers) fire() {
	ft.mu.Lock()
	var fs []func()
	for _, t := range ft.fs {
		if !t.done {
			t.done = true
			fs = append(fs, t.f)
		}
	}
	ft.mu.Unlock()
	for _, f := range fs {
		f() // as time.AfterFunc does: in its own goroutine, without locks
	}
}

// gatherEnv is an env whose origin answers only what the test applies and
// whose gather windows pass only when the test fires them.
func gatherEnv(t *testing.T) (*env, *laterSubscriber, *fakeTimers) {
	e := newEnv(t, 0)
	sub := &laterSubscriber{subscribed: make(chan []string, 100)}
	e.cache.SetUpstream(sub)
	ft := newFakeTimers()
	e.srv.afterFunc = ft.afterFunc
	return e, sub, ft
}

// eds returns n xdstp EDS names e00, e01, ... and a revision of each.
func eds(prefix string, n int) ([]string, []*cache.Resource) {
	names := make([]string, n)
	rs := make([]*cache.Resource, n)
	for i := range names {
		names[i] = xdstp(edsType, fmt.Sprintf("%s%02d", prefix, i))
		rs[i] = res(edsType, names[i], "1")
	}
	return names, rs
}

// answer applies rs as one origin response that answers them.
func (e *env) answer(rs ...*cache.Resource) {
	u := cache.Update{Link: key(edsType, rs[0].Name).Link, TypeURL: edsType, Resources: rs}
	for _, r := range rs {
		u.Complete = append(u.Complete, key(edsType, r.Name).Name)
	}
	e.cache.Apply(u)
}

// gatherClient is a client of either variant, as the gather tests use it.
type gatherClient struct {
	subscribe func(names ...string) // adds names to the subscription
	recv      func(rs ...*cache.Resource)
	none      func()
}

func newGatherClient(t *testing.T, e *env, variant xdstype.Variant) *gatherClient {
	if variant == xdstype.Delta {
		c := e.delta()
		first := true
		return &gatherClient{
			subscribe: func(names ...string) {
				req := &discoveryv3.DeltaDiscoveryRequest{TypeUrl: edsType, ResourceNamesSubscribe: names}
				if first {
					req.Node, first = testNode, false
				}
				c.Send(req)
			},
			recv: func(rs ...*cache.Resource) {
				t.Helper()
				want := deltaResp(edsType, nil)
				for _, r := range rs {
					want.Resources = append(want.Resources, dres(r.Name, r))
				}
				got := c.Recv()
				checkDelta(t, want, got)
				c.Send(ack(edsType, got))
			},
			none: c.None,
		}
	}
	c := e.sotw()
	var names []string
	var last *discoveryv3.DiscoveryResponse
	version := 0
	return &gatherClient{
		subscribe: func(more ...string) {
			names = append(names, more...)
			req := &discoveryv3.DiscoveryRequest{TypeUrl: edsType, ResourceNames: names}
			if last == nil {
				req.Node = testNode
			} else {
				req.VersionInfo, req.ResponseNonce = last.GetVersionInfo(), last.GetNonce()
			}
			c.Send(req)
		},
		recv: func(rs ...*cache.Resource) {
			t.Helper()
			version++
			var bodies []*anypb.Any
			for _, r := range rs {
				bodies = append(bodies, r.Body)
			}
			got := c.Recv()
			checkSotW(t, sotwResp(edsType, fmt.Sprint(version), bodies...), got)
			last = got
			c.Send(sotwAck(got, names...))
		},
		none: c.None,
	}
}

// A cold relay: the origin answers a client's 20 names in four pieces (as
// it answers four upstream requests, each holding some of them). The
// client gets one response holding all 20, as from the origin itself.
func TestGatherColdSubscription(t *testing.T) {
	for _, variant := range []xdstype.Variant{xdstype.Delta, xdstype.SotW} {
		t.Run(string(variant), func(t *testing.T) {
			e, sub, ft := gatherEnv(t)
			c := newGatherClient(t, e, variant)
			names, rs := eds("e", 20)
			c.subscribe(names...)
			<-sub.subscribed
			for i := 0; i < len(rs); i += 5 {
				e.answer(rs[i : i+5]...)
				if i == 0 {
					c.none() // not the first piece alone
				}
			}
			c.recv(rs...)
			c.none()
			ft.fire() // a window no longer on changes nothing
			c.none()
		})
	}
}

// A name the origin is slow to answer holds the others back only until
// the window passes: then what is known goes out, and the rest as it
// comes.
func TestGatherWindowBounds(t *testing.T) {
	for _, variant := range []xdstype.Variant{xdstype.Delta, xdstype.SotW} {
		t.Run(string(variant), func(t *testing.T) {
			e, sub, ft := gatherEnv(t)
			c := newGatherClient(t, e, variant)
			names, rs := eds("e", 3)
			c.subscribe(names...)
			<-sub.subscribed
			e.answer(rs[0])
			ft.waitArmed(t)
			e.answer(rs[1])
			c.none()
			ft.fire()
			c.recv(rs[0], rs[1])
			e.answer(rs[2])
			c.recv(rs[2])
			c.none()
			if got := testutil.ToFloat64(e.srv.m.gatherExpired.WithLabelValues(typeLabel(edsType))); got != 1 {
				t.Errorf("xds_relay_downstream_gather_expired_total = %v, want 1", got)
			}
		})
	}
}

// While a client's new names are gathered, a change to a name it already
// holds goes out at once, without them; and a request made meanwhile
// adds its names to the gather.
func TestGatherHoldsOnlyWhatIsAwaited(t *testing.T) {
	for _, variant := range []xdstype.Variant{xdstype.Delta, xdstype.SotW} {
		t.Run(string(variant), func(t *testing.T) {
			e, sub, _ := gatherEnv(t)
			c := newGatherClient(t, e, variant)
			held, heldRs := eds("held", 1)
			c.subscribe(held...)
			<-sub.subscribed
			e.answer(heldRs...)
			c.recv(heldRs...)

			names, rs := eds("e", 4)
			c.subscribe(names[:3]...)
			<-sub.subscribed
			e.answer(rs[0])
			changed := res(edsType, held[0], "2")
			e.answer(changed)
			c.recv(changed)
			c.subscribe(names[3])
			<-sub.subscribed
			e.answer(rs[1], rs[3])
			c.none()
			e.answer(rs[2])
			c.recv(rs...)
			c.none()
		})
	}
}

// What the relay holds already is answered at once, in one response with
// what it does not: a client whose names are partly cached waits for the
// rest, not sending what is cached first.
func TestGatherWarmAndCold(t *testing.T) {
	for _, variant := range []xdstype.Variant{xdstype.Delta, xdstype.SotW} {
		t.Run(string(variant), func(t *testing.T) {
			e, sub, _ := gatherEnv(t)
			names, rs := eds("e", 6)
			warm := newGatherClient(t, e, variant)
			warm.subscribe(names[:3]...)
			<-sub.subscribed
			e.answer(rs[:3]...)
			warm.recv(rs[:3]...)

			c := newGatherClient(t, e, variant)
			c.subscribe(names...)
			<-sub.subscribed
			c.none()
			e.answer(rs[3:]...)
			c.recv(rs...)
			c.none()
		})
	}
}

// While a client's names are held back, the pieces of the origin's answer
// that leave some still to come wake no writer: a burst of clients does
// not cost a round of lookups per client and piece.
func TestGatherQuietUntilComplete(t *testing.T) {
	for _, variant := range []xdstype.Variant{xdstype.Delta, xdstype.SotW} {
		t.Run(string(variant), func(t *testing.T) {
			e, sub, ft := gatherEnv(t)
			c := newGatherClient(t, e, variant)
			names, rs := eds("e", 20)
			c.subscribe(names...)
			<-sub.subscribed
			ft.waitArmed(t)
			c.none() // the writer is idle, holding them back
			var gets atomic.Int64
			e.cache.setHooks(cacheHooks{afterGet: func(cache.Key) { gets.Add(1) }})
			for i := 0; i < 15; i += 5 {
				e.answer(rs[i : i+5]...)
			}
			c.none()
			if n := gets.Load(); n != 0 {
				t.Errorf("%d lookups while names were still to come, want 0", n)
			}
			e.answer(rs[15:]...)
			c.recv(rs...)
			c.none()
		})
	}
}

// A name the origin answers with a resource error is answered, as one
// present or absent is: the others held back with it go out in the same
// response, beside the error.
func TestGatherEndsOnResourceError(t *testing.T) {
	e, sub, _ := gatherEnv(t)
	d := e.delta()
	names, rs := eds("e", 3)
	d.Send(&discoveryv3.DeltaDiscoveryRequest{Node: testNode, TypeUrl: edsType, ResourceNamesSubscribe: names})
	<-sub.subscribed
	e.answer(rs[:2]...)
	d.None()
	e.cache.setError(key(edsType, names[2]), unavailable)
	checkDelta(t, deltaWithErrors(edsType, nil, []*discoveryv3.ResourceError{resourceError(names[2], unavailable)},
		dres(names[0], rs[0]), dres(names[1], rs[1])), d.Recv())
	d.None()
}

// A client that keeps replacing its names while a gather is on (their
// origin silent) makes the gather keep only the names it still holds,
// never every name it ever asked for.
func TestGatherKeepsOnlyHeldNames(t *testing.T) {
	e, _, _ := gatherEnv(t)
	c := e.delta()
	const rounds, batch = 20, 5
	var held []string
	for i := range rounds {
		names, _ := eds(fmt.Sprintf("r%d-", i), batch)
		req := &discoveryv3.DeltaDiscoveryRequest{TypeUrl: edsType, ResourceNamesSubscribe: names, ResourceNamesUnsubscribe: held}
		if i == 0 {
			req.Node = testNode
		}
		c.Send(req)
		held = names
	}
	e.syncDelta(c) // every request above is applied
	ss := e.srv.snapshotSessions()[0]
	ss.mu.Lock()
	g := ss.typeOf(edsType).gather
	var kept []string
	if g != nil {
		kept = slices.Clone(g.names)
	}
	ss.mu.Unlock()
	if len(kept) > batch {
		t.Errorf("the gather keeps %d names after %d rounds of %d; want at most the %d still held", len(kept), rounds, batch, batch)
	}
}

// flushGate is a watcher of the cache that holds up the Flush of the
// changes it is told of until released: the watchers after it hear of a
// change (Notify) and only later that it is complete (Flush).
type flushGate struct {
	entered chan struct{}
	release chan struct{}
}

func (g *flushGate) Notify(cache.Key) {}

func (g *flushGate) Flush(*cache.ChangeSet) {
	g.entered <- struct{}{}
	<-g.release
}

// A name answered while the writer's round is between looking it up
// (pending) and holding the names back: its Notify comes while nothing is
// awaited yet, its Flush once the writer is idle. It must still wake the
// writer: awaited as if unanswered, the name would hold the others back
// until the window passed (a cold sync of 10000 clients saw 8 to 19 such
// clients wait the 2 s window, issue #21).
func TestGatherAnsweredDuringRound(t *testing.T) {
	e, sub, ft := gatherEnv(t)
	names, rs := eds("e", 2)
	gate := &flushGate{entered: make(chan struct{}, 1), release: make(chan struct{})}
	e.cache.Watch(gate, nil, key(edsType, names[0])) // first: its Flush comes before the client's
	<-sub.subscribed
	var once sync.Once
	e.cache.setHooks(cacheHooks{afterGet: func(k cache.Key) {
		if k.Name != names[0] {
			return
		}
		once.Do(func() {
			go e.answer(rs[0])
			<-gate.entered // every watcher has been notified, none flushed
		})
	}})
	c := newGatherClient(t, e, xdstype.Delta)
	c.subscribe(names...)
	ft.waitArmed(t) // the round holds both back
	// The round's writer returns: the session is idle.
	xdstest.Poll(t, "the writer idle", func() error { return writersIdle(e.srv, 1) })
	close(gate.release)
	e.answer(rs[1])
	c.recv(rs...)
	c.none()
	if got := testutil.ToFloat64(e.srv.m.gatherExpired.WithLabelValues(typeLabel(edsType))); got != 0 {
		t.Errorf("xds_relay_downstream_gather_expired_total = %v, want 0", got)
	}
}

// TestGatherKeepsNoRepeats: a client that asks again and again for names
// still pending, while its writer is held up in Send (so it never looks at
// the gather), makes the gather keep each name once: what it keeps stays
// within the names the stream holds.
func TestGatherKeepsNoRepeats(t *testing.T) {
	e, _, _ := gatherEnv(t)
	atSend, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	t.Cleanup(func() { once.Do(func() { close(release) }) })
	var first atomic.Bool
	e.srv.sendHook = func(string) {
		if first.CompareAndSwap(false, true) {
			close(atSend)
			<-release
		}
	}
	cached := e.put(edsType, xdstp(edsType, "cached"), "1")
	c := e.delta()
	c.Send(&discoveryv3.DeltaDiscoveryRequest{Node: testNode, TypeUrl: edsType, ResourceNamesSubscribe: []string{cached.Name}})
	select {
	case <-atSend:
	case <-time.After(xdstest.WaitTimeout):
		t.Fatal("the writer never reached Send")
	}
	pending, _ := eds("p", 5)
	const requests = 20
	for range requests {
		c.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: edsType, ResourceNamesSubscribe: pending})
	}
	// A request of another type: once it is being applied, every request
	// above was.
	c.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: cdsType, ResourceNamesSubscribe: []string{"after"}})
	ss := e.srv.snapshotSessions()[0]
	var kept, subs int
	xdstest.Poll(t, "the last request applied", func() error {
		ss.mu.Lock()
		defer ss.mu.Unlock()
		if !ss.types.has(cdsType) {
			return errors.New("not yet")
		}
		ts, _ := ss.types.get(edsType)
		kept, subs = 0, ts.subs.len()
		if ts.gather != nil {
			kept = len(ts.gather.names)
		}
		return nil
	})
	if kept > subs {
		t.Errorf("the gather keeps %d names after %d requests for the same %d; want at most the %d subscribed", kept, requests, len(pending), subs)
	}
	once.Do(func() { close(release) })
}
