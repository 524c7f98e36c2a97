package integration

import (
	"fmt"
	"net"
	"sort"
	"testing"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/xds-relay/xds-relay/config"
	"github.com/xds-relay/xds-relay/internal/cache"
	"github.com/xds-relay/xds-relay/internal/xdstype"
)

var legacyStream = cache.LinkID{Authority: "origin", Group: "g1"}

func cdsKey(name string) cache.Key {
	return cache.Key{Link: legacyStream, TypeURL: resource.ClusterType, Name: name}
}

// subscribedNames lists, in order, every name the origin was asked to
// subscribe (delta) for typeURL.
func subscribedNames(reqs []*discoveryv3.DeltaDiscoveryRequest, typeURL string, unsubscribe bool) []string {
	var out []string
	for _, r := range reqs {
		if r.GetTypeUrl() != typeURL {
			continue
		}
		if unsubscribe {
			out = append(out, r.GetResourceNamesUnsubscribe()...)
		} else {
			out = append(out, r.GetResourceNamesSubscribe()...)
		}
	}
	return out
}

// TestUpstreamFanIn: 50 watchers of one resource cost the origin one
// stream and one subscription, and all 50 get it.
func TestUpstreamFanIn(t *testing.T) {
	o := newGCPOrigin(t)
	o.set(resource.ClusterType, "c1", cluster("c1", 1))
	r := newRelay(t, nil, config.Authority{Name: "origin", Origins: []string{o.addr}})

	const n = 50
	ws := make([]*watcher, n)
	for i := range ws {
		ws[i] = newWatcher()
		r.c.Watch(ws[i], nil, cdsKey("c1"))
	}
	want := mustAny(t, cluster("c1", 1))
	for i, w := range ws {
		got := w.waitState(t, r.c, cdsKey("c1"), cache.StatePresent)
		if diff := cmp.Diff(want, got.Body, protocmp.Transform()); diff != "" {
			t.Fatalf("watcher %d: body (-want +got):\n%s", i, diff)
		}
		w.waitNotified(t, "c1", 1)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.deltaOpens != 1 {
		t.Errorf("origin saw %d delta streams, want 1", o.deltaOpens)
	}
	if diff := cmp.Diff([]string{"c1"}, subscribedNames(o.deltaReqs, resource.ClusterType, false)); diff != "" {
		t.Errorf("origin subscriptions (-want +got):\n%s", diff)
	}
}

// TestUpstreamOriginRestart: after the origin restarts the relay
// reconnects with initial_resource_versions, the origin resends nothing
// unchanged, and a later update reaches every watcher.
func TestUpstreamOriginRestart(t *testing.T) {
	o := newGCPOrigin(t)
	o.set(resource.ClusterType, "c1", cluster("c1", 1))
	o.set(resource.ClusterType, "c2", cluster("c2", 1))
	r := newRelay(t, nil, config.Authority{Name: "origin", Origins: []string{o.addr}})
	ws := []*watcher{newWatcher(), newWatcher(), newWatcher()}
	for _, w := range ws {
		r.c.Watch(w, nil, cdsKey("c1"), cdsKey("c2"))
	}
	for _, w := range ws {
		w.waitNotified(t, "c1", 1)
		w.waitNotified(t, "c2", 1)
	}
	versions := r.c.Versions(legacyStream, resource.ClusterType)

	o.stop()
	o.mu.Lock()
	before := len(o.deltaReqs)
	respBefore := len(o.deltaResps)
	o.mu.Unlock()
	o.restart()

	// The reconnect's first CDS request carries what the relay holds.
	var first *discoveryv3.DeltaDiscoveryRequest
	o.waitFor("reconnect request", func() bool {
		for _, q := range o.deltaReqs[before:] {
			if q.GetTypeUrl() == resource.ClusterType && len(q.GetResourceNamesSubscribe()) > 0 {
				first = q
				return true
			}
		}
		return false
	})
	if diff := cmp.Diff(versions, first.GetInitialResourceVersions()); diff != "" {
		t.Errorf("initial_resource_versions (-want +got):\n%s", diff)
	}
	names := append([]string(nil), first.GetResourceNamesSubscribe()...)
	sort.Strings(names)
	if diff := cmp.Diff([]string{"c1", "c2"}, names); diff != "" {
		t.Errorf("resubscribed (-want +got):\n%s", diff)
	}

	// A later update reaches every watcher; nothing unchanged was resent
	// on the new stream before it.
	counts := make([]int, len(ws))
	for i, w := range ws {
		counts[i] = w.count("c1")
	}
	o.set(resource.ClusterType, "c1", cluster("c1", 2))
	want := mustAny(t, cluster("c1", 2))
	for i, w := range ws {
		w.waitFor(t, "c1 update", func() bool {
			got := r.c.Lookup(nil, cdsKey("c1")).Res
			return w.count("c1") > counts[i] && got != nil && cmp.Diff(want, got.Body, protocmp.Transform()) == ""
		})
	}
	o.waitFor("update response", func() bool { return len(o.deltaResps) > respBefore })
	o.mu.Lock()
	var resent []string
	for _, resp := range o.deltaResps[respBefore:] {
		for _, res := range resp.GetResources() {
			resent = append(resent, res.GetName())
		}
	}
	o.mu.Unlock()
	if diff := cmp.Diff([]string{"c1"}, resent); diff != "" {
		t.Errorf("resources sent after reconnect (-want only the update +got):\n%s", diff)
	}
	if got := ws[0].count("c2"); got != 1 {
		t.Errorf("c2 notified %d times, want 1 (unchanged across the restart)", got)
	}
}

// TestUpstreamOriginDown: with the origin gone, cached resources are still
// served and a new watch of a cached key is a hit.
func TestUpstreamOriginDown(t *testing.T) {
	o := newGCPOrigin(t)
	o.set(resource.ClusterType, "c1", cluster("c1", 1))
	r := newRelay(t, nil, config.Authority{Name: "origin", Origins: []string{o.addr}})
	w := newWatcher()
	r.c.Watch(w, nil, cdsKey("c1"))
	w.waitState(t, r.c, cdsKey("c1"), cache.StatePresent)
	o.stop()

	hits := metricValue(t, r, "xds_relay_cache_hits_total", "type", "envoy.config.cluster.v3.Cluster")
	w2 := newWatcher()
	r.c.Watch(w2, nil, cdsKey("c1"))
	if got := w2.count("c1"); got != 1 {
		t.Errorf("new watcher notified %d times at Watch, want 1", got)
	}
	if got := metricValue(t, r, "xds_relay_cache_hits_total", "type", "envoy.config.cluster.v3.Cluster"); got != hits+1 {
		t.Errorf("cache hits = %v, want %v", got, hits+1)
	}
	read := r.c.Lookup(nil, cdsKey("c1"))
	got, st := read.Res, read.State
	if st != cache.StatePresent {
		t.Fatalf("Get state %v, want present", st)
	}
	if diff := cmp.Diff(mustAny(t, cluster("c1", 1)), got.Body, protocmp.Transform()); diff != "" {
		t.Errorf("body (-want +got):\n%s", diff)
	}
}

// TestUpstreamLRUUnsubscribes: churn through unwatched keys; the cache
// keeps at most MaxResources of them and the origin sees the evicted ones
// unsubscribed.
func TestUpstreamLRUUnsubscribes(t *testing.T) {
	o := newGCPOrigin(t)
	const n, keep = 10, 2
	for i := range n {
		name := fmt.Sprintf("r-%d", i)
		o.set(resource.ClusterType, name, cluster(name, 1))
	}
	r := newRelay(t, func(c *config.Config) { c.Cache.MaxResources = keep }, config.Authority{Name: "origin", Origins: []string{o.addr}})
	for i := range n {
		w := newWatcher()
		k := cdsKey(fmt.Sprintf("r-%d", i))
		r.c.Watch(w, nil, k)
		w.waitState(t, r.c, k, cache.StatePresent)
		r.c.Unwatch(w, k)
	}
	var want []string
	for i := range n - keep {
		want = append(want, fmt.Sprintf("r-%d", i))
	}
	o.waitFor("evicted keys unsubscribed", func() bool {
		return len(subscribedNames(o.deltaReqs, resource.ClusterType, true)) >= len(want)
	})
	o.mu.Lock()
	got := subscribedNames(o.deltaReqs, resource.ClusterType, true)
	o.mu.Unlock()
	sort.Strings(got)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("unsubscribed upstream (-want +got):\n%s", diff)
	}
	for i := range n {
		st := r.c.Lookup(nil, cdsKey(fmt.Sprintf("r-%d", i))).State
		wantSt := cache.StatePending
		if i >= n-keep {
			wantSt = cache.StatePresent
		}
		if st != wantSt {
			t.Errorf("r-%d: %v, want %v", i, st, wantSt)
		}
	}
	if got := metricValue(t, r, "xds_relay_cache_resources"); got != keep {
		t.Errorf("xds_relay_cache_resources = %v, want %d", got, keep)
	}
}

// deadAddr is a loopback address nothing listens on.
func deadAddr(t *testing.T) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close()
	return addr
}

// TestUpstreamFailover: the authority's first origin is down; the relay
// moves on to the next one, counts the failed attempt, and reports one
// connected stream.
func TestUpstreamFailover(t *testing.T) {
	o := newGCPOrigin(t)
	o.set(resource.ClusterType, "c1", cluster("c1", 1))
	r := newRelay(t, nil, config.Authority{Name: "origin", Origins: []string{deadAddr(t), o.addr}})
	w := newWatcher()
	r.c.Watch(w, nil, cdsKey("c1"))
	w.waitState(t, r.c, cdsKey("c1"), cache.StatePresent)
	if got := metricValue(t, r, "xds_relay_upstream_reconnects_total", "authority", "origin"); got < 1 {
		t.Errorf("reconnects_total = %v, want >= 1 (the dead origin)", got)
	}
	if got := metricValue(t, r, "xds_relay_upstream_streams", "authority", "origin"); got != 1 {
		t.Errorf("upstream_streams = %v, want 1", got)
	}
}

// TestUpstreamFailback: while the first origin is down a second one
// serves; once the first is back the relay probes it, moves the stream
// back to it, and what it holds is the first origin's again. Watchers see
// it change without ever losing it. Both transports.
func TestUpstreamFailback(t *testing.T) {
	for _, tc := range []struct {
		name      string
		transport string
		opens     func(o *gcpOrigin) int // streams of the transport; under o.mu
	}{
		{name: "delta", transport: xdstype.TransportDelta, opens: func(o *gcpOrigin) int { return o.deltaOpens }},
		{name: "sotw", transport: xdstype.TransportSotW, opens: func(o *gcpOrigin) int { return o.sotwOpens }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			first, second := newGCPOrigin(t), newGCPOrigin(t)
			first.set(resource.ClusterType, "c1", cluster("c1", 1))
			second.set(resource.ClusterType, "c1", cluster("c1", 2))
			first.stop()
			// Probe the recovered first origin soon.
			fast := func(c *config.Config) { c.Upstream.FailbackInterval = 50 * time.Millisecond }
			r := newRelay(t, fast, config.Authority{Name: "origin", Origins: []string{first.addr, second.addr}, Transport: tc.transport})
			w := newWatcher()
			r.c.Watch(w, nil, cdsKey("c1"))
			seen := false // c1 was present once: it must stay so
			from := func(o int64) func() bool {
				want := mustAny(t, cluster("c1", o))
				return func() bool {
					read := r.c.Lookup(nil, cdsKey("c1"))
					res, st := read.Res, read.State
					if st != cache.StatePresent {
						if seen {
							t.Fatalf("c1 %v while moving between origins", st)
						}
						return false
					}
					seen = true
					return cmp.Diff(want, res.Body, protocmp.Transform()) == ""
				}
			}
			w.waitFor(t, "c1 from the second origin", from(2))

			first.restart()
			w.waitFor(t, "c1 from the first origin again", from(1))
			first.mu.Lock()
			opens := tc.opens(first)
			first.mu.Unlock()
			if opens != 1 {
				t.Errorf("first origin saw %d streams, want 1", opens)
			}
			if got := metricValue(t, r, "xds_relay_upstream_failbacks_total", "authority", "origin"); got != 1 {
				t.Errorf("failbacks_total = %v, want 1", got)
			}
			if got := metricValue(t, r, "xds_relay_upstream_streams", "authority", "origin"); got != 1 {
				t.Errorf("upstream_streams = %v, want 1", got)
			}
		})
	}
}

// TestUpstreamPendingSurvivesOutage: a subscription made while the origin
// is down stays pending (nothing is dropped) and is answered once the
// origin is back.
func TestUpstreamPendingSurvivesOutage(t *testing.T) {
	o := newGCPOrigin(t)
	o.set(resource.ClusterType, "c1", cluster("c1", 1))
	o.set(resource.ClusterType, "c9", cluster("c9", 1))
	r := newRelay(t, nil, config.Authority{Name: "origin", Origins: []string{o.addr}})
	w := newWatcher()
	r.c.Watch(w, nil, cdsKey("c1"))
	w.waitState(t, r.c, cdsKey("c1"), cache.StatePresent)
	o.stop()

	r.c.Watch(w, nil, cdsKey("c9"))
	if st := r.c.Lookup(nil, cdsKey("c9")).State; st != cache.StatePending {
		t.Fatalf("c9 with the origin down: %v, want pending", st)
	}
	o.restart()
	w.waitState(t, r.c, cdsKey("c9"), cache.StatePresent)
	if st := r.c.Lookup(nil, cdsKey("c1")).State; st != cache.StatePresent {
		t.Errorf("c1 after the outage: %v, want present", st)
	}
}
