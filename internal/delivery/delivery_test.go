package delivery

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/xds-relay/xds-relay/config"
	"github.com/xds-relay/xds-relay/internal/cache"
	"github.com/xds-relay/xds-relay/internal/xdstest"
	"github.com/xds-relay/xds-relay/internal/xdstype"
)

const auth = "auth.example"

var link = cache.LinkID{Authority: auth, Group: "g"}

func TestGuard(t *testing.T) {
	def := config.DefaultDelivery().DeletionGuard
	for _, tc := range []struct {
		name string
		g    config.DeletionGuard
		r    cache.Removals
		want string
	}{
		{"a few of many", def, cache.Removals{Present: 95, Removed: 2}, ""},
		{"half exactly", def, cache.Removals{Present: 10, Removed: 5}, ""},
		{"more than half", def, cache.Removals{Present: 95, Removed: 80}, ReasonShare},
		{"more than half of a small type", def, cache.Removals{Present: 9, Removed: 8}, ""},
		{"a small watched wildcard emptied", def, cache.Removals{Present: 3, Removed: 3, Emptied: []string{"*"}}, ReasonEmpty},
		{"a large one emptied", def, cache.Removals{Present: 50, Removed: 50, Emptied: []string{"*"}}, ReasonEmpty},
		{"off", config.DeletionGuard{MaxRemovedShare: 1, MinResources: 10}, cache.Removals{Present: 50, Removed: 50, Emptied: []string{"*"}}, ""},
		{"share 0: any removal", config.DeletionGuard{MaxRemovedShare: 0, MinResources: 10}, cache.Removals{Present: 10, Removed: 1}, ReasonShare},
		{"nothing removed", def, cache.Removals{Present: 10}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := guard(tc.g, tc.r); got != tc.want {
				t.Errorf("guard(%+v, %+v) = %q, want %q", tc.g, tc.r, got, tc.want)
			}
		})
	}
}

// fixture is a Delivery screening a real cache, with its logs and
// metrics.
type fixture struct {
	d    *Delivery
	c    *cache.Cache
	reg  *prometheus.Registry
	logs *observer.ObservedLogs
	w    *watcher
}

func newFixture(t *testing.T, edit func(*config.Config)) *fixture {
	t.Helper()
	cfg := config.Default()
	cfg.Authorities = []config.Authority{{Name: auth, Origins: []string{"127.0.0.1:1"}}}
	if edit != nil {
		edit(cfg)
	}
	core, logs := observer.New(zap.DebugLevel)
	f := &fixture{reg: prometheus.NewRegistry(), logs: logs, w: newWatcher()}
	f.d = New(Options{Config: cfg, Logger: zap.New(core), Registry: f.reg, ReleasePath: "/debug/delivery/release"})
	f.c = cache.New(cache.Options{MaxResources: -1, MaxBytes: -1, Validator: f.d, Guard: f.d, Gate: f.d, Upstream: nopSubscriber{}})
	t.Cleanup(f.c.Close)
	f.d.SetCache(f.c)
	return f
}

type nopSubscriber struct{}

func (nopSubscriber) Subscribe(cache.LinkID, *corev3.Node, string, []string) {}
func (nopSubscriber) Unsubscribe(cache.LinkID, string, []string)             {}

// watcher counts notifications by name.
type watcher struct {
	mu  sync.Mutex
	got map[string]int // guarded by mu
}

func newWatcher() *watcher                { return &watcher{got: map[string]int{}} }
func (w *watcher) Flush(*cache.ChangeSet) {}
func (w *watcher) Notify(k cache.Key) {
	w.mu.Lock()
	w.got[k.Name]++
	w.mu.Unlock()
}

func (w *watcher) take() map[string]int {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.got
	w.got = map[string]int{}
	return out
}

func anyOf(t *testing.T, m proto.Message) *anypb.Any {
	t.Helper()
	a, err := anypb.New(m)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// cla is a ClusterLoadAssignment of one endpoint on port.
func cla(name string, port uint32) *endpointv3.ClusterLoadAssignment {
	return &endpointv3.ClusterLoadAssignment{ClusterName: name, Endpoints: []*endpointv3.LocalityLbEndpoints{{
		LbEndpoints: []*endpointv3.LbEndpoint{{HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{
			Address: &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
				Address: "10.0.0.1", PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: port}}}}}}}}}}}
}

func (f *fixture) apply(t *testing.T, typeURL string, full bool, ms map[string]proto.Message) cache.Applied {
	t.Helper()
	u := cache.Update{Link: link, TypeURL: typeURL, FullState: full}
	for name, m := range ms {
		u.Resources = append(u.Resources, &cache.Resource{Name: name, Body: anyOf(t, m)})
	}
	return f.c.Apply(u)
}

func (f *fixture) invalidCount(typeURL string) float64 {
	return testutil.ToFloat64(f.d.m.invalid.WithLabelValues(auth, xdstype.Label(typeURL)))
}

// An invalid version is refused, counted and logged once; the origin
// resending it is refused again without either; a valid version after it
// is applied and forgets the refusal.
func TestValidate(t *testing.T) {
	f := newFixture(t, nil)
	k := cache.Key{Link: link, TypeURL: resource.EndpointType, Name: "cla"}
	f.c.Watch(f.w, nil, k)
	f.apply(t, resource.EndpointType, false, map[string]proto.Message{"cla": cla("cla", 8080)})
	f.w.take()

	for i := range 3 {
		got := f.apply(t, resource.EndpointType, false, map[string]proto.Message{"cla": cla("cla", 70000)})
		if len(got.Refused) != 1 || !strings.Contains(got.Refused[0].Err.Error(), "SocketAddress.PortValue: value must be less than or equal to 65535") {
			t.Fatalf("resend %d: Refused = %v, want cla with the port's field", i, got.Refused)
		}
	}
	if n := f.w.take(); len(n) != 0 {
		t.Errorf("watchers told of %v", n)
	}
	if r, _ := f.c.Get(k); !proto.Equal(mustUnmarshal(t, r.Body), cla("cla", 8080)) {
		t.Errorf("cached cla is not the last valid version")
	}
	if v := f.invalidCount(resource.EndpointType); v != 1 {
		t.Errorf("invalid_total = %v, want 1 (once per version)", v)
	}
	if n := f.logs.FilterMessageSnippet("origin version refused").Len(); n != 1 {
		t.Errorf("%d log lines, want 1", n)
	}
	p := f.d.Page()
	if p.Invalid.Total != 1 || len(p.Invalid.Recent) != 1 || p.Invalid.Recent[0].Name != "cla" {
		t.Errorf("page invalid = %+v", p.Invalid)
	}

	f.apply(t, resource.EndpointType, false, map[string]proto.Message{"cla": cla("cla", 9090)})
	if diff := cmp.Diff(map[string]int{"cla": 1}, f.w.take()); diff != "" {
		t.Errorf("notified (-want +got):\n%s", diff)
	}
	f.d.mu.Lock()
	remembered := len(f.d.refused)
	f.d.mu.Unlock()
	if remembered != 0 {
		t.Errorf("%d refusals remembered after a valid version", remembered)
	}
	// The same invalid content again: a new refusal, counted.
	f.apply(t, resource.EndpointType, false, map[string]proto.Message{"cla": cla("cla", 70000)})
	if v := f.invalidCount(resource.EndpointType); v != 2 {
		t.Errorf("invalid_total = %v, want 2", v)
	}
}

func mustUnmarshal(t *testing.T, a *anypb.Any) proto.Message {
	t.Helper()
	m, err := a.UnmarshalNew()
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// delivery.validate off (here for the authority) lets anything through;
// a type the process cannot decode, or without rules, is not validated.
func TestValidateOffAndUnknownTypes(t *testing.T) {
	f := newFixture(t, func(c *config.Config) { c.Authorities[0].Delivery.Validate = new(false) })
	if got := f.apply(t, resource.EndpointType, false, map[string]proto.Message{"cla": cla("cla", 70000)}); len(got.Refused) != 0 {
		t.Errorf("validate off: Refused = %v", got.Refused)
	}
	if err := Check(&anypb.Any{TypeUrl: "type.googleapis.com/mesh.example.v1.Workload", Value: []byte{1, 2, 3}}); err != nil {
		t.Errorf("an unknown type: %v, want not validated", err)
	}
	if err := Check(anyOf(t, durationpb.New(time.Second))); err != nil {
		t.Errorf("a type without rules: %v", err)
	}
	if err := Check(anyOf(t, &clusterv3.Cluster{Name: ""})); err == nil || !strings.Contains(err.Error(), "Cluster.Name") {
		t.Errorf("a Cluster without a name: %v, want the field named", err)
	}
}

func clusters(from, to int) map[string]proto.Message {
	out := map[string]proto.Message{}
	for i := from; i < to; i++ {
		n := fmt.Sprintf("c%02d", i)
		out[n] = &clusterv3.Cluster{Name: n, ConnectTimeout: durationpb.New(time.Second)}
	}
	return out
}

// held reads xds_relay_delivery_held{authority=auth, type=Cluster, reason}.
func (f *fixture) held(t *testing.T, reason string) float64 {
	t.Helper()
	mfs, err := f.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "xds_relay_delivery_held" {
			continue
		}
		for _, m := range mf.GetMetric() {
			l := map[string]string{}
			for _, lp := range m.GetLabel() {
				l[lp.GetName()] = lp.GetValue()
			}
			if l["authority"] == auth && l["type"] == xdstype.Label(resource.ClusterType) && l["reason"] == reason {
				return m.GetGauge().GetValue()
			}
		}
	}
	t.Fatalf("no xds_relay_delivery_held series of reason %s", reason)
	return 0
}

// wildcardFixture is a fixture whose watcher watches the Cluster wildcard
// of link, holding c00..c(n-1).
func wildcardFixture(t *testing.T, n int, edit func(*config.Config)) *fixture {
	t.Helper()
	f := newFixture(t, edit)
	f.c.Watch(f.w, nil, cache.Key{Link: link, TypeURL: resource.ClusterType, Name: cache.Wildcard})
	f.full(t, clusters(0, n))
	f.w.take()
	return f
}

// full applies ms as the full state of Clusters, answering the wildcard.
func (f *fixture) full(t *testing.T, ms map[string]proto.Message) {
	t.Helper()
	u := cache.Update{Link: link, TypeURL: resource.ClusterType, FullState: true, Complete: []string{cache.Wildcard}}
	for name, m := range ms {
		u.Resources = append(u.Resources, &cache.Resource{Name: name, Body: anyOf(t, m)})
	}
	f.c.Apply(u)
}

// A mass deletion is held: shown, counted, logged once; a normal one is
// not; released by hand, clients are told and the gauge is back at 0.
func TestHoldAndRelease(t *testing.T) {
	f := wildcardFixture(t, 95, nil)
	f.full(t, clusters(0, 93)) // 2 of 95: delivered
	if got := len(f.w.take()); got != 2 {
		t.Errorf("a change removing 2 of 95: %d removals told, want 2", got)
	}
	f.full(t, clusters(0, 13)) // 80 of 93: held
	if got := f.w.take(); len(got) != 0 {
		t.Errorf("a change removing 80 of 93: told %v, want nothing", got)
	}
	f.full(t, clusters(0, 13)) // the origin repeats it
	if v := f.held(t, ReasonShare); v != 80 {
		t.Errorf("held{deletion_share} = %v, want 80", v)
	}
	if n := f.logs.FilterMessageSnippet("origin removals held").Len(); n != 1 {
		t.Errorf("%d hold log lines, want 1", n)
	}
	p := f.d.Page()
	if len(p.Held) != 1 || p.Held[0].Resources != 80 || p.Held[0].Reason != ReasonShare || p.Held[0].ReleaseAt != nil ||
		p.Held[0].Release != "POST /debug/delivery/release?authority=auth.example&type=type.googleapis.com%2Fenvoy.config.cluster.v3.Cluster" {
		t.Errorf("page held = %+v", p.Held)
	}

	if got := f.d.Release("other.example", "", "test"); len(got) != 0 {
		t.Errorf("released %v of another authority", got)
	}
	got := f.d.Release(auth, resource.ClusterType, "test")
	if len(got) != 1 || got[0].Resources != 80 || got[0].Names[0] != "c13" {
		t.Errorf("released %+v, want the 80", got)
	}
	if n := len(f.w.take()); n != 80 {
		t.Errorf("%d removals told after the release, want 80", n)
	}
	if v := f.held(t, ReasonShare); v != 0 {
		t.Errorf("held after the release = %v", v)
	}
	if n := f.logs.FilterMessageSnippet("held removals released").Len(); n != 1 {
		t.Errorf("%d release log lines, want 1", n)
	}
}

// An emptied wildcard is held whatever its size; the origin bringing the
// resources back ends the hold by itself.
func TestHoldEndsWhenTheOriginSendsThemAgain(t *testing.T) {
	f := wildcardFixture(t, 3, nil)
	f.full(t, nil)
	if v := f.held(t, ReasonEmpty); v != 3 {
		t.Fatalf("held{deletion_empty} = %v, want 3", v)
	}
	f.full(t, clusters(0, 3))
	if v := f.held(t, ReasonEmpty); v != 0 {
		t.Errorf("held after the origin sent them again = %v", v)
	}
	if got := f.w.take(); len(got) != 0 {
		t.Errorf("told %v: clients had them all along", got)
	}
	if n := f.logs.FilterMessageSnippet("held removals ended").Len(); n != 1 {
		t.Errorf("%d log lines of the end, want 1", n)
	}
}

// release_after releases a hold the origin kept repeating that long.
func TestReleaseAfter(t *testing.T) {
	f := wildcardFixture(t, 20, func(c *config.Config) { c.Delivery.DeletionGuard.ReleaseAfter = 50 * time.Millisecond })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.d.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	f.full(t, clusters(0, 2))
	if p := f.d.Page(); len(p.Held) != 1 || p.Held[0].ReleaseAt == nil {
		t.Errorf("page held = %+v, want one with a release time", p.Held)
	}
	xdstest.Poll(t, "the hold released by release_after", func() error {
		if v := f.held(t, ReasonShare); v != 0 {
			return fmt.Errorf("held = %v", v)
		}
		return nil
	})
	if n := len(f.w.take()); n != 18 {
		t.Errorf("%d removals told, want 18", n)
	}
	if n := f.logs.FilterField(zap.String("by", "release_after")).Len(); n != 1 {
		t.Errorf("%d release log lines by release_after, want 1", n)
	}
}

// What validation keeps of an origin's names is bounded: a refusal of a
// very long name is not remembered (its resend is checked again), and the
// page shows the name cut.
func TestValidateBoundsWhatItKeeps(t *testing.T) {
	f := newFixture(t, nil)
	long := strings.Repeat("n", maxRememberedName+1)
	for range 2 {
		if got := f.apply(t, resource.EndpointType, false, map[string]proto.Message{long: cla(long, 70000)}); len(got.Refused) != 1 {
			t.Fatalf("Refused = %v, want the long-named CLA", got.Refused)
		}
	}
	f.d.mu.Lock()
	remembered := len(f.d.refused)
	f.d.mu.Unlock()
	if remembered != 0 {
		t.Errorf("%d refusals remembered, want none for a name over %d bytes", remembered, maxRememberedName)
	}
	if v := f.invalidCount(resource.EndpointType); v != 2 {
		t.Errorf("invalid_total = %v, want 2 (each resend of an unremembered refusal counted)", v)
	}
	p := f.d.Page()
	if n := len(p.Invalid.Recent[0].Name); n > maxShownName+len("…") {
		t.Errorf("the page shows a name of %d bytes, want at most %d", n, maxShownName)
	}
}
