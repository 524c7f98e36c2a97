package delivery

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	statuspb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/xds-relay/xds-relay/config"
	"github.com/xds-relay/xds-relay/internal/cache"
	"github.com/xds-relay/xds-relay/internal/xdstest"
	"github.com/xds-relay/xds-relay/internal/xdstype"
)

// fakeOrigins records the NACKs the breaker asks for.
type fakeOrigins struct {
	mu    sync.Mutex
	nacks []*statuspb.Status // guarded by mu
}

func (o *fakeOrigins) NackHeld(_ cache.LinkID, _ string, detail *statuspb.Status) {
	o.mu.Lock()
	o.nacks = append(o.nacks, detail)
	o.mu.Unlock()
}

func (o *fakeOrigins) take() []*statuspb.Status {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := o.nacks
	o.nacks = nil
	return out
}

// edsFixture is a fixture whose watcher watches ClusterLoadAssignment
// "cla", at port 8080 and settled (the last accepted version when the
// next arrives); origins records the breaker's NACKs.
func edsFixture(t *testing.T, edit func(*config.Config)) (*fixture, *fakeOrigins, cache.Key) {
	t.Helper()
	f := newFixture(t, edit)
	o := &fakeOrigins{}
	f.d.SetOrigins(o)
	k := cache.Key{Link: link, TypeURL: resource.EndpointType, Name: "cla"}
	f.c.Watch(f.w, nil, k)
	f.apply(t, resource.EndpointType, false, map[string]proto.Message{"cla": cla("cla", 8080)})
	v1 := f.c.Lookup(nil, k).Res
	f.c.Settle([]cache.Revision{{Key: k, Res: v1}})
	f.w.take()
	return f, o, k
}

// nack is a client's NACK of r, as a session reports it.
func nack(node string, r *cache.Resource) cache.Nack {
	return cache.Nack{Node: node, TypeURL: resource.EndpointType, Detail: &statuspb.Status{Code: 3, Message: "cannot use " + node}, Revisions: []*cache.Resource{r}}
}

func (f *fixture) trips() float64 {
	return testutil.ToFloat64(f.d.m.breakerTrips.WithLabelValues(auth, xdstype.Label(resource.EndpointType)))
}

// Three distinct clients' NACKs of a version trip the breaker: the version
// is held from every client (each is served the last accepted one), the
// trip is counted, logged once, on the page and in the gauge, and the
// origin is NACKed once with the clients' errors and the versions a relay
// above recognises. A client's second NACK counts once; NACKs after the
// trip change nothing. A release sends it to everyone and stops counting
// it; the next version starts afresh, and one relay below's breaker NACK
// trips it at once; a newer version ends that trip.
func TestBreakerTrips(t *testing.T) {
	f, origins, k := edsFixture(t, nil)
	f.apply(t, resource.EndpointType, false, map[string]proto.Message{"cla": cla("cla", 8081)})
	v2 := f.c.Lookup(nil, k).Res
	f.w.take()
	for _, n := range []string{"a", "a", "b"} {
		f.d.Nacked(nack(n, v2))
	}
	if f.trips() != 0 || len(origins.take()) != 0 {
		t.Fatalf("two distinct clients tripped the breaker")
	}
	f.d.Nacked(nack("c", v2))
	f.d.Nacked(nack("d", v2))
	ro := f.c.Lookup(nil, k).Rollout
	if ro.Hold == nil || ro.Hold.Reason != cache.HoldBreaker || ro.Accepted == nil || ro.Accepted.Version == v2.Version {
		t.Fatalf("after three clients: %+v, want held by the breaker beside the last accepted version", ro)
	}
	if got := f.w.take(); got["cla"] != 1 {
		t.Errorf("watchers told %v, want cla once", got)
	}
	nacks := origins.take()
	if len(nacks) != 1 || !strings.Contains(nacks[0].GetMessage(), `"cla"`) || !strings.Contains(nacks[0].GetMessage(), `"c": cannot use c`) {
		t.Fatalf("origin NACKs %v, want one naming cla and the clients' errors", nacks)
	}
	if vs, ok := xdstype.BreakerVersions(nacks[0]); !ok || vs["cla"] != v2.Version {
		t.Errorf("the NACK's breaker detail names %v, want cla at %s", vs, v2.Version)
	}
	if f.trips() != 1 || f.logs.FilterMessageSnippet("version held by the NACK breaker").Len() != 1 {
		t.Errorf("trips %v, log lines %d, want 1 and 1", f.trips(), f.logs.FilterMessageSnippet("version held by the NACK breaker").Len())
	}
	p := f.d.Page()
	if len(p.Versions) != 1 || len(p.Versions[0].Nackers) != 3 || p.Versions[0].Nack != "cannot use a" || p.Versions[0].Name != "cla" {
		t.Errorf("page versions %+v, want cla NACKed by a, b, c", p.Versions)
	}
	if n := f.d.heldVersions()[heldSeries{auth, xdstype.Label(resource.EndpointType), ReasonBreaker}]; n != 1 {
		t.Errorf("held by the breaker: %d, want 1", n)
	}

	released := f.d.Release(auth, "", "test")
	if len(released) != 1 || released[0].Reason != ReasonBreaker {
		t.Fatalf("released %+v, want the breaker's hold", released)
	}
	for _, n := range []string{"e", "f", "g"} {
		f.d.Nacked(nack(n, v2))
	}
	if ro := f.c.Lookup(nil, k).Rollout; ro.Hold != nil || f.trips() != 1 {
		t.Errorf("a released version tripped again: %+v, trips %v", ro, f.trips())
	}

	f.apply(t, resource.EndpointType, false, map[string]proto.Message{"cla": cla("cla", 8082)})
	v3 := f.c.Lookup(nil, k).Res
	relay := nack("relay-below", v3)
	relay.Relay = true
	f.d.Nacked(relay)
	if f.trips() != 2 {
		t.Errorf("a relay below's breaker NACK: trips %v, want 2", f.trips())
	}
	f.apply(t, resource.EndpointType, false, map[string]proto.Message{"cla": cla("cla", 8083)})
	if n := f.d.heldVersions()[heldSeries{auth, xdstype.Label(resource.EndpointType), ReasonBreaker}]; n != 0 ||
		f.logs.FilterMessageSnippet("no longer held by the NACK breaker: the origin sent another version").Len() != 1 {
		t.Errorf("a newer version: %d held, want the trip ended and logged", n)
	}
}

// With nack_breaker.clients 0 (and no waves) nothing rolls out: no last
// accepted version is kept, NACKs trip nothing.
func TestBreakerOff(t *testing.T) {
	f, origins, k := edsFixture(t, func(c *config.Config) { c.Delivery.NackBreaker.Clients = 0 })
	f.apply(t, resource.EndpointType, false, map[string]proto.Message{"cla": cla("cla", 8081)})
	v2 := f.c.Lookup(nil, k).Res
	for _, n := range []string{"a", "b", "c", "d"} {
		f.d.Nacked(nack(n, v2))
	}
	if ro := f.c.Lookup(nil, k).Rollout; ro.Hold != nil || ro.Accepted != nil || f.trips() != 0 || len(origins.take()) != 0 {
		t.Errorf("breaker off: %+v, trips %v", ro, f.trips())
	}
}

// A release of a trip inside a rollout going wave by wave sends the held
// version, and the rollout's others, to every client; the rollout then
// ends like any other (here after max_wait, without a ledger).
func TestBreakerReleaseInWaves(t *testing.T) {
	f, _, _ := edsFixture(t, func(c *config.Config) {
		c.Delivery.NackBreaker.Clients = 1
		c.Delivery.Waves = []config.Wave{{NodeClusters: []string{"canary-*"}}}
		c.Delivery.MaxWait = time.Millisecond
	})
	ka, kb := cache.Key{Link: link, TypeURL: resource.EndpointType, Name: "a"}, cache.Key{Link: link, TypeURL: resource.EndpointType, Name: "b"}
	f.c.Watch(f.w, nil, ka, kb)
	f.apply(t, resource.EndpointType, false, map[string]proto.Message{"a": cla("a", 1), "b": cla("b", 1)})
	ra := f.c.Lookup(nil, ka).Res
	rb := f.c.Lookup(nil, kb).Res
	f.d.Nacked(nack("canary-0", ra))
	if _, h := f.c.Rolling(cache.Revision{Key: ka, Res: ra}); h == nil || h.Reason != cache.HoldBreaker {
		t.Fatalf("a: hold %+v, want the breaker's", h)
	}
	if _, h := f.c.Rolling(cache.Revision{Key: kb, Res: rb}); h == nil || h.Reason != cache.HoldWave {
		t.Fatalf("b: hold %+v, want its wave's", h)
	}
	reasons := map[string]string{}
	for _, r := range f.d.Release(auth, "", "test") {
		reasons[strings.Join(r.Names, ",")] += r.Reason
	}
	// (The fixture's own first version rolls out too: nothing steps its
	// waves here.)
	if want := map[string]string{"a": ReasonBreaker, "a,b": ReasonWave, "cla": ReasonWave}; !cmp.Equal(reasons, want) {
		t.Fatalf("released %v, want %v", reasons, want)
	}
	for _, rv := range []cache.Revision{{Key: ka, Res: ra}, {Key: kb, Res: rb}} {
		if _, h := f.c.Rolling(rv); h != nil {
			t.Errorf("%s: hold %+v after the release, want none", rv.Key.Name, h)
		}
	}
	xdstest.Poll(t, "the rollout ended", func() error {
		f.d.settleDue()
		for _, rv := range []cache.Revision{{Key: ka, Res: ra}, {Key: kb, Res: rb}} {
			if rolling, _ := f.c.Rolling(rv); rolling {
				return fmt.Errorf("%s still rolls out", rv.Key.Name)
			}
		}
		return nil
	})
}
