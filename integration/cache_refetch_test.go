package integration

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/xds-relay/xds-relay/config"
	"github.com/xds-relay/xds-relay/internal/xdstest"
)

// freshOrigin answers every subscription of name on a scripted origin's
// delta stream with a new copy of it, marked do_not_cache, numbered from
// 1 (its gen, as the cluster's connect timeout): what an origin that
// serves per-request data does. It counts the subscriptions.
type freshOrigin struct {
	name string
	gen  atomic.Int64 // the last copy sent
	subs atomic.Int64 // subscriptions of name received
}

// serveFresh runs f's responder on o until the test ends.
func serveFresh(t *testing.T, o *scriptedOrigin, name string) *freshOrigin {
	f := &freshOrigin{name: name}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-ctx.Done():
				return
			case r := <-o.delta.reqs:
				if !slices.Contains(r.GetResourceNamesSubscribe(), name) {
					continue
				}
				f.subs.Add(1)
				g := f.gen.Add(1)
				body, err := anypb.New(cluster(name, g))
				if err != nil {
					panic(err) // a fixed, valid message
				}
				resp := &discoveryv3.DeltaDiscoveryResponse{TypeUrl: resource.ClusterType, Nonce: fmt.Sprint(g), Resources: []*discoveryv3.Resource{
					{Name: name, Version: fmt.Sprint(g), Resource: body, CacheControl: &discoveryv3.Resource_CacheControl{DoNotCache: true}},
				}}
				select {
				case o.delta.resps <- resp:
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	t.Cleanup(func() { cancel(); wg.Wait() })
	return f
}

// TestDoNotCacheRefetchRateLimited: a client reconnecting in a loop to
// subscribe to a do_not_cache resource makes the relay ask the origin for
// it at most once per cache.refetch_interval, and still every client gets
// a fresh copy (one the origin sent after it subscribed), never the cached
// one. Alone (each time it left, the relay dropped the resource) and
// beside another client that keeps watching it (the relay refetches it).
func TestDoNotCacheRefetchRateLimited(t *testing.T) {
	const interval, rounds = 50 * time.Millisecond, 10
	for _, tc := range []struct {
		name   string
		anchor bool // another client watches the resource throughout
	}{{"alone", false}, {"beside another client", true}} {
		t.Run(tc.name, func(t *testing.T) {
			o := newScriptedOrigin(t)
			name := dsCluster("per-request")
			f := serveFresh(t, o, name)
			r := startRelay(t, func(c *config.Config) {
				c.Cache.RefetchInterval = interval
				c.Log.Level = config.LogInfo
			}, o.addr)
			conn := dial(t, r.XDSAddr())
			if tc.anchor {
				a := newADSClient(t, conn, "delta", "anchor", "c", nil)
				a.subscribe(resource.ClusterType, name)
				a.waitTimeout(name, 1)
			}
			start := time.Now()
			for i := range rounds {
				before := f.gen.Load() // the copies the origin sent before this client asked
				c, leave := startADSClient(t, conn, "delta", fmt.Sprint("client-", i), "c", nil)
				c.subscribe(resource.ClusterType, name)
				ctx, cancel := context.WithTimeout(context.Background(), xdstest.WaitTimeout)
				for c.timeoutSeconds(name) < 0 {
					if _, ok := c.recvOne(ctx.Done()); !ok {
						t.Fatalf("client %d got no copy of %s", i, name)
					}
				}
				cancel()
				if got := c.timeoutSeconds(name); got <= before {
					t.Errorf("client %d got copy %d, sent before it subscribed (the last then: %d): want a fresh one", i, got, before)
				}
				leave()
			}
			elapsed := time.Since(start)
			// The first fetch, then at most one per interval.
			most := 2 + int64(elapsed/interval)
			if tc.anchor {
				most++ // the anchor's own subscription
			}
			got := f.subs.Load()
			t.Logf("%d reconnects in %v: the origin was asked %d times (at most %d)", rounds, elapsed, got, most)
			if got > most {
				t.Errorf("the origin was asked for %s %d times in %v, want at most %d (one per %v)", name, got, elapsed, most, interval)
			}
			if limited := relayMetric(t, r, "xds_relay_cache_refetches_limited_total", "type", clusterLabel); limited == 0 {
				t.Errorf("xds_relay_cache_refetches_limited_total = 0, want the limit to have bitten")
			}
		})
	}
}
