package downstream

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	rpcstatus "google.golang.org/genproto/googleapis/rpc/status"

	"github.com/xds-relay/xds-relay/internal/cache"
	"github.com/xds-relay/xds-relay/internal/xdstest"
)

// fuzzNames are what fuzzed clients ask for: good xdstp names (two
// spellings of one), a glob, legacy names and the wildcard, names that end
// a stream (malformed, another type, no rule) and one of an authority
// with no configuration.
var fuzzNames = []string{
	xdstp(edsType, "a"), xdstp(edsType, "b"), xdstp(edsType, "p?x=1&y=2"), xdstp(edsType, "p?y=2&x=1"),
	xdstp(edsType, "dir/*"), xdstp(edsType, "dir/m"), "legacy-1", cache.Wildcard,
	"xdstp://a.example/", xdstp(ldsType, "l"), "nomatch-1", "xdstp://nowhere.example/envoy.config.endpoint.v3.ClusterLoadAssignment/x",
}

// fuzzClient is a raw client stream a fuzz input drives: it sends what it
// is told (errors ignored: the server may have ended the stream) and
// drains its responses, remembering the latest nonce.
type fuzzClient struct {
	delta  bool
	cancel context.CancelFunc
	sendD  func(*discoveryv3.DeltaDiscoveryRequest) error
	sendS  func(*discoveryv3.DiscoveryRequest) error
	mu     sync.Mutex
	nonce  string        // guarded by mu
	ended  chan struct{} // closed when the stream ended (its reader returned)
}

// openFuzzClient opens a raw ADS stream of either variant on e; the
// test's Cleanup ends it and waits for its reader.
func openFuzzClient(t testing.TB, e *env, delta bool) *fuzzClient {
	ctx, cancel := context.WithCancel(context.Background())
	c := &fuzzClient{delta: delta, cancel: cancel}
	ads := discoveryv3.NewAggregatedDiscoveryServiceClient(e.conn)
	var recv func() (string, error)
	if delta {
		st, err := ads.DeltaAggregatedResources(ctx)
		if err != nil {
			t.Fatal(err)
		}
		c.sendD = st.Send
		recv = func() (string, error) { r, err := st.Recv(); return r.GetNonce(), err }
	} else {
		st, err := ads.StreamAggregatedResources(ctx)
		if err != nil {
			t.Fatal(err)
		}
		c.sendS = st.Send
		recv = func() (string, error) { r, err := st.Recv(); return r.GetNonce(), err }
	}
	c.ended = make(chan struct{})
	go func() {
		defer close(c.ended)
		for {
			n, err := recv()
			if err != nil {
				return
			}
			c.mu.Lock()
			c.nonce = n
			c.mu.Unlock()
		}
	}()
	t.Cleanup(func() { cancel(); <-c.ended })
	return c
}

func (c *fuzzClient) lastNonce() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nonce
}

// FuzzSessions drives up to three clients of both variants with a fuzzed
// sequence of subscriptions, unsubscriptions, ACKs, NACKs, malformed names,
// stream ends and origin changes, against a real server over the real
// cache. Whatever they do: nothing panics, a reference client that only
// subscribes to a and b holds exactly what the cache holds of them, every
// session ends when its stream does and leaves nothing watched, and no
// goroutine outlives the test (goleak, TestMain).
func FuzzSessions(f *testing.F) {
	f.Add([]byte{0, 0, 5, 0, 3, 0, 1, 0, 5, 1})
	f.Add([]byte{2, 0x0f, 4, 0, 5, 0, 2, 0xf0, 7, 0})
	f.Add([]byte{0, 4, 0, 7, 5, 5, 6, 5, 1, 4, 0, 8, 5, 0})
	f.Add([]byte{0x10, 2, 0x12, 3, 0x15, 2, 0x20, 0, 0x26, 0, 0x17, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 64 {
			data = data[:64] // bounded: each op is real RPC work
		}
		quietLogs.Store(true)
		defer quietLogs.Store(false)
		e := newEnv(t, 0)
		a, b := xdstp(edsType, "a"), xdstp(edsType, "b")
		rev := 0
		put := func(name string) {
			rev++
			e.put(edsType, name, fmt.Sprint(rev))
		}
		put(a)
		put(b)

		ref := e.delta()
		ref.Send(&discoveryv3.DeltaDiscoveryRequest{Node: testNode, TypeUrl: edsType, ResourceNamesSubscribe: []string{a, b}})

		var clients [3]*fuzzClient
		open := func(i int, delta bool) *fuzzClient {
			if c := clients[i]; c != nil {
				return c
			}
			clients[i] = openFuzzClient(t, e, delta)
			return clients[i]
		}
		for i := 0; i+1 < len(data); i += 2 {
			op, arg := data[i], int(data[i+1])
			c := open(int(op>>4)%3, op&0x08 == 0)
			name := fuzzNames[arg%len(fuzzNames)]
			switch op & 0x07 {
			case 0: // subscribe
				if c.delta {
					_ = c.sendD(&discoveryv3.DeltaDiscoveryRequest{Node: testNode, TypeUrl: edsType, ResourceNamesSubscribe: []string{name}})
				} else {
					_ = c.sendS(&discoveryv3.DiscoveryRequest{Node: testNode, TypeUrl: edsType, ResourceNames: []string{name}})
				}
			case 1: // unsubscribe (SotW: a list picked by the bits of arg)
				if c.delta {
					_ = c.sendD(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: edsType, ResourceNamesUnsubscribe: []string{name}})
				} else {
					var names []string
					for j, n := range fuzzNames {
						if arg&(1<<(j%8)) != 0 && j < 8 {
							names = append(names, n)
						}
					}
					_ = c.sendS(&discoveryv3.DiscoveryRequest{TypeUrl: edsType, ResourceNames: names, ResponseNonce: c.lastNonce()})
				}
			case 2, 3: // ACK, or NACK
				var detail *rpcstatus.Status
				if op&0x07 == 3 {
					detail = &rpcstatus.Status{Code: 3, Message: "fuzz NACK"}
				}
				if c.delta {
					_ = c.sendD(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: edsType, ResponseNonce: c.lastNonce(), ErrorDetail: detail})
				} else {
					_ = c.sendS(&discoveryv3.DiscoveryRequest{TypeUrl: edsType, ResponseNonce: c.lastNonce(), ErrorDetail: detail})
				}
			case 4: // the origin changes a resource
				put(fuzzNames[arg%6])
			case 5: // the origin removes one (never a or b: the reference holds them)
				if n := fuzzNames[2+arg%4]; true {
					e.cache.remove(key(edsType, n))
				}
			case 6: // the client goes away
				c.cancel()
				clients[int(op>>4)%3] = nil
			case 7: // another type on the same stream (ADS)
				if c.delta {
					_ = c.sendD(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: ldsType, ResourceNamesSubscribe: []string{name}})
				} else {
					_ = c.sendS(&discoveryv3.DiscoveryRequest{TypeUrl: ldsType, ResourceNames: []string{name}})
				}
			}
		}

		// The reference client holds exactly the cache's a and b.
		want := map[string]string{}
		for _, n := range []string{a, b} {
			read := e.cache.Lookup(nil, key(edsType, n))
			r, st := read.Res, read.State
			if st != cache.StatePresent {
				t.Fatalf("%s: %v in the cache", n, st)
			}
			want[n] = r.Version
		}
		held := map[string]string{}
		deadline := time.NewTimer(xdstest.WaitTimeout)
		defer deadline.Stop()
		for !equalVersions(held, want) {
			select {
			case r := <-ref.Responses():
				for _, res := range r.GetResources() {
					held[res.GetName()] = res.GetVersion()
				}
				ref.Send(ack(edsType, r))
			case err := <-ref.Errors():
				t.Fatalf("reference client's stream ended: %v", err)
			case <-deadline.C:
				t.Fatalf("reference client holds %v, the cache %v", held, want)
			}
		}

		// Every fuzzed client goes; only the reference's session stays.
		for i, c := range clients {
			if c != nil {
				c.cancel()
				clients[i] = nil
			}
		}
		for {
			if n := len(e.srv.Clients()); n == 1 {
				// Their sessions unwatched everything on the way out: what
				// stays watched is the reference's a and b.
				if got := e.cache.WatchedKeys(key(edsType, a).Link); got != 2 {
					t.Fatalf("%d keys of the xdstp stream stay watched, want the reference's 2", got)
				}
				if got := e.cache.WatchedKeys(legacyStream); got != 0 {
					t.Fatalf("%d legacy keys stay watched after every client that asked for them left", got)
				}
				break
			}
			select {
			case <-deadline.C:
				t.Fatalf("%d sessions after every fuzzed client left, want 1", len(e.srv.Clients()))
			case <-time.After(time.Millisecond): // re-check: sessions end asynchronously
			}
		}
	})
}

func equalVersions(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range b {
		if a[k] != v {
			return false
		}
	}
	return true
}
