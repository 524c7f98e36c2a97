package cache

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/xds-relay/xds-relay/internal/propagation"
	"github.com/xds-relay/xds-relay/internal/xdstype"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const (
	lds = resource.ListenerType
	cds = resource.ClusterType
)

var (
	xdstpStream  = LinkID{Authority: "auth"}
	legacyStream = LinkID{Authority: "auth", Group: "g1"}
)

// fakeWatcher records what it is notified of. Notify runs synchronously
// inside the cache call that decided it, so tests read got after the call.
type fakeWatcher struct {
	mu  sync.Mutex
	got []Key // guarded by mu
	// flushes records, per Flush, how many keys had been notified by then
	// and the change set it came with. guarded by mu
	flushes []flushAt
}

type flushAt struct {
	notified int
	cs       *ChangeSet
}

func (w *fakeWatcher) Notify(k Key) {
	w.mu.Lock()
	w.got = append(w.got, k)
	w.mu.Unlock()
}

func (w *fakeWatcher) Flush(cs *ChangeSet) {
	w.mu.Lock()
	w.flushes = append(w.flushes, flushAt{notified: len(w.got), cs: cs})
	w.mu.Unlock()
}

// takeFlushes returns the flushes since the last call.
func (w *fakeWatcher) takeFlushes() []flushAt {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.flushes
	w.flushes = nil
	return out
}

// take returns the names notified since the last take, sorted.
func (w *fakeWatcher) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for _, k := range w.got {
		out = append(out, k.Name)
	}
	w.got = nil
	sort.Strings(out)
	return out
}

// fakeSubscriber records Subscriber calls as "+type name" / "-type name".
type fakeSubscriber struct {
	mu  sync.Mutex
	ops []string // guarded by mu
}

func (s *fakeSubscriber) Subscribe(_ LinkID, _ *corev3.Node, typeURL string, names []string) {
	s.record("+", typeURL, names)
}

func (s *fakeSubscriber) Unsubscribe(_ LinkID, typeURL string, names []string) {
	s.record("-", typeURL, names)
}

func (s *fakeSubscriber) record(op, typeURL string, names []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, n := range names {
		s.ops = append(s.ops, op+strings.TrimPrefix(typeURL, resource.APITypePrefix)+" "+n)
	}
}

func (s *fakeSubscriber) take() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.ops
	s.ops = nil
	return out
}

// unbounded keeps every unwatched key (zero bounds keep none).
var unbounded = Options{MaxResources: -1, MaxBytes: -1}

type fixture struct {
	c      *Cache
	sub    *fakeSubscriber
	reg    *prometheus.Registry
	now    time.Time
	timers *fakeTimers
}

func newFixture(t testing.TB, opts Options) *fixture {
	t.Helper()
	f := &fixture{sub: &fakeSubscriber{}, reg: prometheus.NewRegistry(), now: time.Unix(1000, 0), timers: &fakeTimers{}}
	opts.Upstream = f.sub
	opts.Registry = f.reg
	opts.Now = func() time.Time { return f.now }
	opts.AfterFunc = f.timers.afterFunc
	f.c = New(opts)
	t.Cleanup(f.c.Close)
	return f
}

func key(s LinkID, typeURL, name string) Key { return Key{Link: s, TypeURL: typeURL, Name: name} }

// res is a revision of size bytes that start with the origin's version, so
// a new version is new content (the cache compares bytes, not versions).
func res(name, version string, size int) *Resource {
	v := []byte(strings.Repeat("x", size))
	copy(v, version)
	return &Resource{Name: name, OriginVersion: version, Body: &anypb.Any{TypeUrl: lds, Value: v}}
}

// withVersion sets r's Version as Apply does, for comparing with Get.
func withVersion(r *Resource) *Resource {
	r.Version = RevisionVersion(r)
	return r
}

// heldBytes is what cache.max_bytes counts of res(name, version, size)
// once applied (its Version set): size.go.
func heldBytes(name, version string, size int) int64 {
	return int64(withVersion(res(name, version, size)).Size())
}

func hits(f *fixture, typeURL string) float64 {
	return testutil.ToFloat64(f.c.m.hits.WithLabelValues(xdstype.Label(typeURL)))
}

func misses(f *fixture, typeURL string) float64 {
	return testutil.ToFloat64(f.c.m.misses.WithLabelValues(xdstype.Label(typeURL)))
}

func TestWatchHitMissAndSubscribe(t *testing.T) {
	a := key(legacyStream, lds, "a")
	glob := key(xdstpStream, lds, "xdstp://auth/envoy.config.listener.v3.Listener/dir/*")
	for _, tc := range []struct {
		name string
		// prepare runs with watcher w1 before w2 watches k.
		prepare    func(f *fixture, w1 *fakeWatcher)
		k          Key
		wantHits   float64
		wantMisses float64
		wantNotify []string // what w2 is notified of on Watch
		wantSub    []string // Subscriber calls made by w2's Watch
	}{
		{
			name:       "new key is a miss and subscribed",
			prepare:    func(*fixture, *fakeWatcher) {},
			k:          a,
			wantMisses: 1,
			wantSub:    []string{"+envoy.config.listener.v3.Listener a"},
		},
		{
			name: "pending key is a miss, not subscribed again",
			prepare: func(f *fixture, w1 *fakeWatcher) {
				f.c.Watch(w1, nil, a)
			},
			k:          a,
			wantMisses: 2,
		},
		{
			name: "present key is a hit and notified at once",
			prepare: func(f *fixture, w1 *fakeWatcher) {
				f.c.Watch(w1, nil, a)
				f.c.Apply(Update{Link: legacyStream, TypeURL: lds, Resources: []*Resource{res("a", "1", 3)}})
			},
			k:          a,
			wantHits:   1,
			wantMisses: 1,
			wantNotify: []string{"a"},
		},
		{
			name: "absent key is a hit and notified",
			prepare: func(f *fixture, w1 *fakeWatcher) {
				f.c.Watch(w1, nil, a)
				f.c.Apply(Update{Link: legacyStream, TypeURL: lds, Removed: []string{"a"}})
			},
			k:          a,
			wantHits:   1,
			wantMisses: 1,
			wantNotify: []string{"a"},
		},
		{
			name: "unwatched key still cached is a hit",
			prepare: func(f *fixture, w1 *fakeWatcher) {
				f.c.Watch(w1, nil, a)
				f.c.Apply(Update{Link: legacyStream, TypeURL: lds, Resources: []*Resource{res("a", "1", 3)}})
				f.c.Unwatch(w1, a)
			},
			k:          a,
			wantHits:   1,
			wantMisses: 1,
			wantNotify: []string{"a"},
		},
		{
			name: "known empty glob is a hit, notified of the glob itself",
			prepare: func(f *fixture, w1 *fakeWatcher) {
				f.c.Watch(w1, nil, glob)
				f.c.Apply(Update{Link: xdstpStream, TypeURL: lds, Removed: []string{glob.Name}})
			},
			k:          glob,
			wantHits:   1,
			wantMisses: 1,
			wantNotify: []string{glob.Name},
		},
		{
			name: "known glob is a hit, notified of each member",
			prepare: func(f *fixture, w1 *fakeWatcher) {
				f.c.Watch(w1, nil, glob)
				f.c.Apply(Update{Link: xdstpStream, TypeURL: lds, Complete: []string{glob.Name}, Resources: []*Resource{
					res("xdstp://auth/envoy.config.listener.v3.Listener/dir/x", "1", 1),
					res("xdstp://auth/envoy.config.listener.v3.Listener/dir/y", "1", 1),
				}})
			},
			k:          glob,
			wantHits:   1,
			wantMisses: 1,
			wantNotify: []string{
				"xdstp://auth/envoy.config.listener.v3.Listener/dir/x",
				"xdstp://auth/envoy.config.listener.v3.Listener/dir/y",
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, unbounded)
			w1, w2 := &fakeWatcher{}, &fakeWatcher{}
			tc.prepare(f, w1)
			f.sub.take()
			f.c.Watch(w2, nil, tc.k)
			if diff := cmp.Diff(tc.wantNotify, w2.take()); diff != "" {
				t.Errorf("notified (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantSub, f.sub.take()); diff != "" {
				t.Errorf("subscriber calls (-want +got):\n%s", diff)
			}
			if got := hits(f, lds); got != tc.wantHits {
				t.Errorf("hits = %v, want %v", got, tc.wantHits)
			}
			if got := misses(f, lds); got != tc.wantMisses {
				t.Errorf("misses = %v, want %v", got, tc.wantMisses)
			}
		})
	}
}

// TestWatchCountsByType: one Watch call of keys of several types, hits
// and misses interleaved, counts each key under its own type (the metrics
// are added once per run of one type, then at the call's end).
func TestWatchCountsByType(t *testing.T) {
	f := newFixture(t, unbounded)
	cached := []Key{key(legacyStream, lds, "l1"), key(legacyStream, cds, "c1"), key(legacyStream, cds, "c2")}
	w1 := &fakeWatcher{}
	f.c.Watch(w1, nil, cached...)
	for _, k := range cached {
		f.c.Apply(Update{Link: legacyStream, TypeURL: k.TypeURL, Resources: []*Resource{res(k.Name, "1", 3)}})
	}
	f.c.Watch(&fakeWatcher{}, nil,
		cached[0], key(legacyStream, lds, "l2"), cached[1], key(legacyStream, cds, "c3"), cached[2], key(legacyStream, lds, "l3"))
	for _, tc := range []struct {
		typeURL              string
		wantHits, wantMisses float64
	}{{lds, 1, 1 + 2}, {cds, 2, 2 + 1}} {
		if got := hits(f, tc.typeURL); got != tc.wantHits {
			t.Errorf("%s: hits = %v, want %v", tc.typeURL, got, tc.wantHits)
		}
		if got := misses(f, tc.typeURL); got != tc.wantMisses {
			t.Errorf("%s: misses = %v, want %v", tc.typeURL, got, tc.wantMisses)
		}
	}
	if st := f.c.Stats(); st.Hits != 3 || st.Misses != 6 {
		t.Errorf("Stats hits %d misses %d, want 3 and 6", st.Hits, st.Misses)
	}
}

func TestApplyNotifiesOnChangeOnly(t *testing.T) {
	a := key(legacyStream, lds, "a")
	for _, tc := range []struct {
		name       string
		second     *Resource
		wantNotify []string
		wantGet    *Resource
	}{
		{name: "identical revision notifies nobody", second: res("a", "1", 3), wantGet: withVersion(res("a", "1", 3))},
		{
			name:    "new origin version of the same bytes notifies nobody",
			second:  &Resource{Name: "a", OriginVersion: "2", Body: res("a", "1", 3).Body},
			wantGet: withVersion(res("a", "1", 3)),
		},
		{name: "new bytes notify", second: res("a", "2", 3), wantNotify: []string{"a"}, wantGet: withVersion(res("a", "2", 3))},
		{name: "same origin version new bytes notify", second: res("a", "1", 4), wantNotify: []string{"a"}, wantGet: withVersion(res("a", "1", 4))},
		{
			name:       "new TTL notifies",
			second:     &Resource{Name: "a", OriginVersion: "1", Body: res("a", "1", 3).Body, TTL: durationpb.New(time.Hour)},
			wantNotify: []string{"a"},
			wantGet:    withVersion(&Resource{Name: "a", OriginVersion: "1", Body: res("a", "1", 3).Body, TTL: durationpb.New(time.Hour)}),
		},
		{
			name:       "heartbeat notifies and keeps the body",
			second:     &Resource{Name: "a", OriginVersion: "1", Heartbeat: true, TTL: durationpb.New(time.Minute)},
			wantNotify: []string{"a"},
			wantGet:    withVersion(&Resource{Name: "a", OriginVersion: "1", Body: res("a", "1", 3).Body, TTL: durationpb.New(time.Minute)}),
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, unbounded)
			w, other := &fakeWatcher{}, &fakeWatcher{}
			f.c.Watch(w, nil, a)
			f.c.Watch(other, nil, key(legacyStream, lds, "b"))
			f.c.Apply(Update{Link: legacyStream, TypeURL: lds, Resources: []*Resource{res("a", "1", 3)}})
			if diff := cmp.Diff([]string{"a"}, w.take()); diff != "" {
				t.Fatalf("first revision notified (-want +got):\n%s", diff)
			}
			f.c.Apply(Update{Link: legacyStream, TypeURL: lds, Resources: []*Resource{tc.second}})
			if diff := cmp.Diff(tc.wantNotify, w.take()); diff != "" {
				t.Errorf("second revision notified (-want +got):\n%s", diff)
			}
			if got := other.take(); len(got) != 0 {
				t.Errorf("watcher of another key notified of %v", got)
			}
			got, st := f.c.Get(a)
			if st != StatePresent {
				t.Fatalf("Get state = %v, want present", st)
			}
			if diff := cmp.Diff(tc.wantGet, got, protocmp.Transform()); diff != "" {
				t.Errorf("Get (-want +got):\n%s", diff)
			}
		})
	}
}

const ldsT = "xdstp://auth/envoy.config.listener.v3.Listener/"

func TestGlobMembership(t *testing.T) {
	for _, tc := range []struct {
		name        string
		glob        string
		resources   []string
		wantMembers []string
	}{
		{
			name:        "direct children only, not deeper",
			glob:        ldsT + "dir/*",
			resources:   []string{ldsT + "dir/a", ldsT + "dir/sub/b", ldsT + "other/c", ldsT + "dir"},
			wantMembers: []string{ldsT + "dir/a"},
		},
		{
			name:        "context parameters must match",
			glob:        ldsT + "dir/*?node_type=ingress",
			resources:   []string{ldsT + "dir/a?node_type=ingress", ldsT + "dir/b", ldsT + "dir/c?node_type=egress", ldsT + "dir/d?node_type=ingress&x=1"},
			wantMembers: []string{ldsT + "dir/a?node_type=ingress"},
		},
		{
			name:        "parameter order does not matter",
			glob:        ldsT + "dir/*?b=2&a=1",
			resources:   []string{ldsT + "dir/x?a=1&b=2", ldsT + "dir/y?b=2&a=1"},
			wantMembers: []string{ldsT + "dir/x?a=1&b=2", ldsT + "dir/y?a=1&b=2"},
		},
		{
			name:      "deeper glob",
			glob:      ldsT + "some/longer/path/*",
			resources: []string{ldsT + "some/longer/path/a", ldsT + "some/longer/b"},
			wantMembers: []string{
				ldsT + "some/longer/path/a",
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, unbounded)
			gname, err := CanonicalName(tc.glob)
			if err != nil {
				t.Fatal(err)
			}
			g := key(xdstpStream, lds, gname)
			w := &fakeWatcher{}
			f.c.Watch(w, nil, g)
			var rs []*Resource
			for _, n := range tc.resources {
				rs = append(rs, res(n, "1", 1))
			}
			f.c.Apply(Update{Link: xdstpStream, TypeURL: lds, Resources: rs, Complete: []string{gname}})
			var want []string
			for _, n := range tc.wantMembers {
				cn, err := CanonicalName(n)
				if err != nil {
					t.Fatal(err)
				}
				want = append(want, cn)
			}
			sort.Strings(want)
			if diff := cmp.Diff(want, w.take()); diff != "" {
				t.Errorf("glob watcher notified (-want +got):\n%s", diff)
			}
			members, st := f.c.Members(g)
			if st != StatePresent {
				t.Errorf("Members state = %v, want present", st)
			}
			var got []string
			for _, m := range members {
				cn, _ := CanonicalName(m.Name)
				got = append(got, cn)
			}
			sort.Strings(got)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("Members (-want +got):\n%s", diff)
			}

			// Deleting a member notifies the glob watcher; deleting the
			// last one makes the glob known-empty.
			f.c.Apply(Update{Link: xdstpStream, TypeURL: lds, Removed: want})
			got = w.take()
			wantGone := append(append([]string(nil), want...), gname)
			sort.Strings(wantGone)
			if diff := cmp.Diff(wantGone, got); diff != "" {
				t.Errorf("after removal notified (-want +got):\n%s", diff)
			}
			if _, st := f.c.Members(g); st != StateAbsent {
				t.Errorf("Members state after removal = %v, want absent", st)
			}
		})
	}
}

func TestWildcard(t *testing.T) {
	f := newFixture(t, unbounded)
	w, other := &fakeWatcher{}, &fakeWatcher{}
	f.c.Watch(w, nil, key(legacyStream, cds, Wildcard))
	f.c.Watch(other, nil, key(LinkID{Authority: "auth", Group: "g2"}, cds, Wildcard))
	if diff := cmp.Diff([]string{"+envoy.config.cluster.v3.Cluster *", "+envoy.config.cluster.v3.Cluster *"}, f.sub.take()); diff != "" {
		t.Errorf("subscriber (-want +got):\n%s", diff)
	}
	f.c.Apply(Update{Link: legacyStream, TypeURL: cds, FullState: true, Complete: []string{Wildcard},
		Resources: []*Resource{res("c1", "1", 1), res("c2", "1", 1)}})
	if diff := cmp.Diff([]string{"c1", "c2"}, w.take()); diff != "" {
		t.Errorf("wildcard watcher notified (-want +got):\n%s", diff)
	}
	if got := other.take(); len(got) != 0 {
		t.Errorf("other stream's wildcard watcher notified of %v", got)
	}
	f.c.Apply(Update{Link: legacyStream, TypeURL: cds, FullState: true, Resources: []*Resource{res("c2", "2", 1)}})
	if diff := cmp.Diff([]string{"c1", "c2"}, w.take()); diff != "" {
		t.Errorf("after full state without c1 (-want +got):\n%s", diff)
	}
	ms, st := f.c.Members(key(legacyStream, cds, Wildcard))
	if st != StatePresent || len(ms) != 1 || ms[0].Name != "c2" {
		t.Errorf("Members = %v %v, want [c2] present", ms, st)
	}
	// c1 came only through the wildcard: the cache forgets it, and says
	// nothing of it by name.
	if _, st := f.c.Get(key(legacyStream, cds, "c1")); st != StatePending {
		t.Errorf("c1 state = %v, want pending (not known by name)", st)
	}
	// A named watch of a resource the known wildcard does not hold is asked
	// of the origin (which may serve names outside its wildcard): pending,
	// subscribed, nobody told it does not exist.
	w2 := &fakeWatcher{}
	f.c.Watch(w2, nil, key(legacyStream, cds, "nope"))
	if got := w2.take(); len(got) != 0 {
		t.Errorf("named watch under known wildcard notified %v, want nothing until the origin answers", got)
	}
	if _, st := f.c.Get(key(legacyStream, cds, "nope")); st != StatePending {
		t.Errorf("nope state = %v, want pending", st)
	}
	if diff := cmp.Diff([]string{"+envoy.config.cluster.v3.Cluster nope"}, f.sub.take()); diff != "" {
		t.Errorf("subscriber (-want +got):\n%s", diff)
	}
}

func TestFullStateAndComplete(t *testing.T) {
	for _, tc := range []struct {
		name  string
		u     Update
		want  map[string]State
		wantN []string
	}{
		{
			name:  "full state turns others absent, pending included",
			u:     Update{Link: legacyStream, TypeURL: lds, FullState: true, Resources: []*Resource{res("b", "2", 1)}},
			want:  map[string]State{"a": StateAbsent, "b": StatePresent, "p": StateAbsent},
			wantN: []string{"a", "b", "p"},
		},
		{
			name:  "complete turns a pending name absent, leaves present alone",
			u:     Update{Link: legacyStream, TypeURL: lds, Complete: []string{"p", "a"}},
			want:  map[string]State{"a": StatePresent, "b": StatePresent, "p": StateAbsent},
			wantN: []string{"p"},
		},
		{
			name:  "neither leaves pending pending",
			u:     Update{Link: legacyStream, TypeURL: lds, Resources: []*Resource{res("b", "2", 1)}},
			want:  map[string]State{"a": StatePresent, "b": StatePresent, "p": StatePending},
			wantN: []string{"b"},
		},
		{
			name: "full state leaves unanswered names alone",
			u: Update{Link: legacyStream, TypeURL: lds, FullState: true, Unanswered: []string{"p"},
				Resources: []*Resource{res("b", "2", 1)}},
			want:  map[string]State{"a": StateAbsent, "b": StatePresent, "p": StatePending},
			wantN: []string{"a", "b"},
		},
		{
			name:  "other stream untouched",
			u:     Update{Link: LinkID{Authority: "x"}, TypeURL: lds, FullState: true},
			want:  map[string]State{"a": StatePresent, "b": StatePresent, "p": StatePending},
			wantN: nil,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, unbounded)
			w := &fakeWatcher{}
			f.c.Watch(w, nil, key(legacyStream, lds, "a"), key(legacyStream, lds, "b"), key(legacyStream, lds, "p"))
			f.c.Apply(Update{Link: legacyStream, TypeURL: lds, Resources: []*Resource{res("a", "1", 1), res("b", "1", 1)}})
			w.take()
			f.c.Apply(tc.u)
			got := map[string]State{}
			for n := range tc.want {
				_, got[n] = f.c.Get(key(legacyStream, lds, n))
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("states (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantN, w.take()); diff != "" {
				t.Errorf("notified (-want +got):\n%s", diff)
			}
		})
	}
}

func TestTTL(t *testing.T) {
	f := newFixture(t, unbounded)
	a := key(legacyStream, lds, "a")
	w := &fakeWatcher{}
	f.c.Watch(w, nil, a)
	r := res("a", "1", 1)
	r.TTL = durationpb.New(10 * time.Second)
	r.Arrived = f.now
	f.c.Apply(Update{Link: legacyStream, TypeURL: lds, Resources: []*Resource{r}})
	f.now = f.now.Add(9 * time.Second)
	if _, st := f.c.Get(a); st != StatePresent {
		t.Fatalf("before TTL: state %v, want present", st)
	}
	// Heartbeat at 9s: lives until 19s.
	f.c.Apply(Update{Link: legacyStream, TypeURL: lds, Resources: []*Resource{{Name: "a", Version: "1", Heartbeat: true, TTL: durationpb.New(10 * time.Second), Arrived: f.now}}})
	f.now = f.now.Add(9 * time.Second)
	if _, st := f.c.Get(a); st != StatePresent {
		t.Fatalf("after heartbeat: state %v, want present", st)
	}
	f.now = f.now.Add(2 * time.Second)
	if _, st := f.c.Get(a); st != StateAbsent {
		t.Fatalf("after TTL elapsed: state %v, want absent", st)
	}
	// The same revision again brings it back, and is a change.
	w.take()
	r2 := res("a", "1", 1)
	r2.TTL = durationpb.New(10 * time.Second)
	r2.Arrived = f.now
	f.c.Apply(Update{Link: legacyStream, TypeURL: lds, Resources: []*Resource{r2}})
	if diff := cmp.Diff([]string{"a"}, w.take()); diff != "" {
		t.Errorf("resend after expiry notified (-want +got):\n%s", diff)
	}
	if _, st := f.c.Get(a); st != StatePresent {
		t.Errorf("after resend: state %v, want present", st)
	}
}

func TestGauges(t *testing.T) {
	f := newFixture(t, unbounded)
	w := &fakeWatcher{}
	f.c.Watch(w, nil, key(legacyStream, lds, "a"), key(legacyStream, lds, "b"))
	f.c.Apply(Update{Link: legacyStream, TypeURL: lds, Resources: []*Resource{res("a", "1", 10), res("b", "1", 5)}})
	f.c.Apply(Update{Link: legacyStream, TypeURL: lds, Resources: []*Resource{res("a", "2", 7)}, Removed: []string{"b"}})
	if got := testutil.ToFloat64(f.c.m.resources); got != 1 {
		t.Errorf("xds_relay_cache_resources = %v, want 1", got)
	}
	if got, want := testutil.ToFloat64(f.c.m.bytes), float64(heldBytes("a", "2", 7)); got != want {
		t.Errorf("xds_relay_cache_bytes = %v, want %v", got, want)
	}
	n, err := testutil.GatherAndCount(f.reg, "xds_relay_cache_resources", "xds_relay_cache_bytes", "xds_relay_cache_hits_total", "xds_relay_cache_misses_total", "xds_relay_cache_evictions_total")
	if err != nil || n < 4 {
		t.Errorf("registered metrics: %d, %v", n, err)
	}
}

// TestLRUBounds churns through many unwatched keys and checks the bounds
// hold, evicted keys are unsubscribed, and watched keys survive.
func TestLRUBounds(t *testing.T) {
	for _, tc := range []struct {
		name     string
		opts     Options
		size     int
		wantKept int
	}{
		{name: "by count", opts: Options{MaxResources: 10, MaxBytes: -1}, size: 100, wantKept: 10},
		// A revision of the last names ("r-29x") holds heldBytes of them.
		{name: "by bytes", opts: Options{MaxResources: -1, MaxBytes: 10*heldBytes("r-299", "1", 100) + 100}, size: 100, wantKept: 10},
		{name: "both, bytes tighter", opts: Options{MaxResources: 50, MaxBytes: 5*heldBytes("r-299", "1", 100) + 100}, size: 100, wantKept: 5},
		{name: "zero keeps none", opts: Options{MaxResources: 0, MaxBytes: 0}, size: 100, wantKept: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, tc.opts)
			pinned := &fakeWatcher{}
			var pinnedKeys []Key
			for i := range 20 {
				pinnedKeys = append(pinnedKeys, key(legacyStream, lds, fmt.Sprintf("pinned-%d", i)))
			}
			f.c.Watch(pinned, nil, pinnedKeys...)
			var pinnedRes []*Resource
			for _, k := range pinnedKeys {
				pinnedRes = append(pinnedRes, res(k.Name, "1", tc.size))
			}
			f.c.Apply(Update{Link: legacyStream, TypeURL: lds, Resources: pinnedRes})
			f.sub.take()

			const churn = 300
			for i := range churn {
				w := &fakeWatcher{}
				k := key(legacyStream, lds, fmt.Sprintf("r-%d", i))
				f.c.Watch(w, nil, k)
				f.c.Apply(Update{Link: legacyStream, TypeURL: lds, Resources: []*Resource{res(k.Name, "1", tc.size)}})
				f.c.Unwatch(w, k)
				f.c.mu.Lock()
				n, b := f.c.lru.Len(), f.c.lruBytes
				f.c.mu.Unlock()
				if (tc.opts.MaxResources > 0 && n > tc.opts.MaxResources) || (tc.opts.MaxBytes > 0 && b > tc.opts.MaxBytes) {
					t.Fatalf("after %d: LRU holds %d keys, %d bytes; bounds %d, %d", i, n, b, tc.opts.MaxResources, tc.opts.MaxBytes)
				}
			}
			var wantOps []string
			for i := range churn {
				wantOps = append(wantOps, fmt.Sprintf("+envoy.config.listener.v3.Listener r-%d", i))
				if j := i - tc.wantKept; j >= 0 {
					wantOps = append(wantOps, fmt.Sprintf("-envoy.config.listener.v3.Listener r-%d", j))
				}
			}
			if diff := cmp.Diff(wantOps, f.sub.take()); diff != "" {
				t.Errorf("subscriber calls (-want +got):\n%s", diff)
			}
			for _, k := range pinnedKeys {
				if _, st := f.c.Get(k); st != StatePresent {
					t.Errorf("watched %s: state %v, want present (never evicted)", k.Name, st)
				}
			}
			for i := range churn {
				_, st := f.c.Get(key(legacyStream, lds, fmt.Sprintf("r-%d", i)))
				want := StatePending // evicted: unknown
				if i >= churn-tc.wantKept {
					want = StatePresent
				}
				if st != want {
					t.Errorf("r-%d: state %v, want %v", i, st, want)
				}
			}
			if got, want := testutil.ToFloat64(f.c.m.evictions), float64(churn-tc.wantKept); got != want {
				t.Errorf("evictions = %v, want %v", got, want)
			}
			if got, want := testutil.ToFloat64(f.c.m.resources), float64(20+tc.wantKept); got != want {
				t.Errorf("resources gauge = %v, want %v", got, want)
			}
		})
	}
}

// TestLRUWatchAgainLeavesLRU: a key watched again is not evicted however
// much churn follows.
func TestLRUWatchAgainLeavesLRU(t *testing.T) {
	f := newFixture(t, Options{MaxResources: 2, MaxBytes: -1})
	w := &fakeWatcher{}
	a := key(legacyStream, lds, "a")
	f.c.Watch(w, nil, a)
	f.c.Apply(Update{Link: legacyStream, TypeURL: lds, Resources: []*Resource{res("a", "1", 1)}})
	f.c.Unwatch(w, a)
	f.c.Watch(w, nil, a)
	for i := range 10 {
		k := key(legacyStream, lds, fmt.Sprintf("r-%d", i))
		f.c.Watch(w, nil, k)
		f.c.Unwatch(w, k)
	}
	if _, st := f.c.Get(a); st != StatePresent {
		t.Errorf("re-watched key: state %v, want present", st)
	}
}

// TestLRUCollections: members of a watched glob are never evicted; evicting
// a member of an unwatched subscribed glob evicts the glob with it.
func TestLRUCollections(t *testing.T) {
	f := newFixture(t, Options{MaxResources: 3, MaxBytes: -1})
	g := key(xdstpStream, lds, ldsT+"dir/*")
	w := &fakeWatcher{}
	f.c.Watch(w, nil, g)
	var rs []*Resource
	for i := range 5 {
		rs = append(rs, res(fmt.Sprintf("%sdir/m%d", ldsT, i), "1", 1))
	}
	f.c.Apply(Update{Link: xdstpStream, TypeURL: lds, Resources: rs, Complete: []string{g.Name}})
	f.sub.take()
	for i := range 10 { // churn other keys
		k := key(legacyStream, lds, fmt.Sprintf("r-%d", i))
		f.c.Watch(w, nil, k)
		f.c.Unwatch(w, k)
	}
	if ms, st := f.c.Members(g); len(ms) != 5 || st != StatePresent {
		t.Fatalf("watched glob lost members: %d %v", len(ms), st)
	}
	f.sub.take()
	f.c.Unwatch(w, g) // glob + 5 members unwatched: over the bound of 3
	ops := f.sub.take()
	if diff := cmp.Diff([]string{"-envoy.config.listener.v3.Listener " + g.Name}, filter(ops, g.Name)); diff != "" {
		t.Errorf("glob unsubscribed (-want +got):\n%s\nall ops: %v", diff, ops)
	}
	if ms, st := f.c.Members(g); len(ms) != 0 || st != StatePending {
		t.Errorf("evicted glob: Members %d %v, want 0 pending", len(ms), st)
	}
}

func filter(ops []string, substr string) []string {
	var out []string
	for _, o := range ops {
		if strings.HasSuffix(o, substr) {
			out = append(out, o)
		}
	}
	return out
}

// TestConcurrentWatchApply runs watchers, unwatchers, updates and readers
// at once; -race checks the locking, and the end state must be consistent.
func TestConcurrentWatchApply(t *testing.T) {
	f := newFixture(t, Options{MaxResources: 20, MaxBytes: -1})
	const n = 8
	var wg sync.WaitGroup
	for g := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w := &fakeWatcher{}
			for i := range 200 {
				k := key(legacyStream, lds, fmt.Sprintf("r-%d", (g*7+i)%50))
				f.c.Watch(w, nil, k, key(legacyStream, lds, Wildcard))
				f.c.Apply(Update{Link: legacyStream, TypeURL: lds, Resources: []*Resource{res(k.Name, fmt.Sprint(i), i%5)}})
				f.c.Get(k)
				f.c.Members(key(legacyStream, lds, Wildcard))
				f.c.Unwatch(w, k)
				if i%50 == 0 {
					f.c.Apply(Update{Link: legacyStream, TypeURL: lds, FullState: true})
				}
			}
			f.c.Unwatch(w, key(legacyStream, lds, Wildcard))
		}()
	}
	wg.Wait()
	f.c.mu.Lock()
	defer f.c.mu.Unlock()
	if got := f.c.lru.Len(); got > 20 {
		t.Errorf("LRU holds %d keys, bound 20", got)
	}
	if len(f.c.watchers) != 0 {
		t.Errorf("watchers left: %d", len(f.c.watchers))
	}
}

// BenchmarkFanout applies one changed resource watched by many watchers,
// with the propagation ledger recording each change (as the relay runs)
// and without.
func BenchmarkFanout(b *testing.B) {
	for _, n := range []int{100, 10000} {
		for _, ledger := range []bool{true, false} {
			b.Run(fmt.Sprintf("watchers=%d/ledger=%s", n, onOff(ledger)), func(b *testing.B) {
				benchmarkFanout(b, n, ledger)
			})
		}
	}
}

func onOff(on bool) string {
	if on {
		return "on"
	}
	return "off"
}

func benchmarkFanout(b *testing.B, n int, ledger bool) {
	opts := unbounded
	if ledger {
		opts.Ledger = propagation.New(propagation.Options{})
	}
	f := newFixture(b, opts)
	k := key(legacyStream, lds, "a")
	for range n {
		f.c.Watch(&nopWatcher{}, nil, k)
	}
	// Two revisions with different bytes: every Apply is a change
	// (the cache compares bytes, not versions).
	bodies := [2]*anypb.Any{{TypeUrl: lds, Value: make([]byte, 512)}, {TypeUrl: lds, Value: make([]byte, 512)}}
	bodies[1].Value[0] = 1
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		f.c.Apply(Update{Link: legacyStream, TypeURL: lds, Resources: []*Resource{{Name: "a", Body: bodies[i%2]}}})
	}
}

// nopWatcher is not zero-sized so that each &nopWatcher{} is distinct.
type nopWatcher struct{ _ int }

func (*nopWatcher) Notify(Key)       {}
func (*nopWatcher) Flush(*ChangeSet) {}

// TestWatcherSetCopyOnWrite: a list handed out for fan-out is not changed
// by later removes (they copy first), nor by adds (they only append).
func TestWatcherSetCopyOnWrite(t *testing.T) {
	c := New(Options{})
	ws := make([]*watcherRec, 4)
	s := &watcherSet{}
	for i := range ws {
		ws[i] = c.watcherRecLocked(&fakeWatcher{}, 1)
		s.add(ws[i])
	}
	shared := s.share()
	s.remove(ws[0])
	s.add(c.watcherRecLocked(&fakeWatcher{}, 1))
	s.remove(ws[2])
	for i, w := range shared {
		if w != ws[i].w {
			t.Errorf("shared[%d] changed after remove/add", i)
		}
	}
	if s.size() != 3 || s.has(ws[0]) || s.has(ws[2]) || !s.has(ws[1]) || !s.has(ws[3]) {
		t.Errorf("set after changes: size %d", s.size())
	}
	for i, r := range s.recs {
		if at, ok := r.pos(s); s.list[i] != r.w || !ok || at != int32(i) {
			t.Errorf("list[%d] is %p, its record says %p at %d", i, s.list[i], r.w, at)
		}
	}
}

// TestWatcherRecords: a watcher's record (its positions in the sets it is
// in: a list while few, a map past fewSets) stays right through watches
// and unwatches in any order, and is dropped once it watches nothing, so
// a cache whose clients all left holds no record of them.
func TestWatcherRecords(t *testing.T) {
	f := newFixture(t, unbounded)
	keys := make([]Key, fewSets+8)
	for i := range keys {
		keys[i] = key(legacyStream, lds, fmt.Sprintf("r-%d", i))
	}
	// In 40 sets (a map), 32 (a list), then 24, 16 and 8.
	ws := make([]*fakeWatcher, 5)
	for i := range ws {
		ws[i] = &fakeWatcher{}
		f.c.Watch(ws[i], nil, keys[8*i:]...)
		f.c.Watch(ws[i], nil, keys[8*i]) // again: nothing changes
	}
	f.c.Watch(ws[1], nil, keys[:4]...) // past fewSets one call later: a map
	f.c.Unwatch(ws[2], keys[17], keys[30], keys[39])
	f.c.Unwatch(ws[0], keys...)
	f.c.Unwatch(ws[3], keys[39])
	check := func() {
		t.Helper()
		f.c.mu.Lock()
		defer f.c.mu.Unlock()
		held := 0
		for k, s := range f.c.watchers {
			for i, r := range s.recs {
				if at, ok := r.pos(s); s.list[i] != r.w || !ok || at != int32(i) || f.c.recs[r.w] != r {
					t.Errorf("%s: watcher %d's record is out of step", k.Name, i)
				}
			}
			held += s.size()
		}
		n := 0
		for _, r := range f.c.recs {
			n += r.sets()
		}
		if n != held {
			t.Errorf("records hold %d positions, the sets %d watchers", n, held)
		}
	}
	check()
	if got := f.c.Stats().WatchedKeys; got != fewSets+4 { // r-4 to r-7 were ws[0]'s alone
		t.Errorf("watched keys %d, want %d", got, fewSets+4)
	}
	for _, w := range ws {
		f.c.Unwatch(w, keys...)
	}
	check()
	f.c.mu.Lock()
	defer f.c.mu.Unlock()
	if len(f.c.recs) != 0 || len(f.c.watchers) != 0 {
		t.Errorf("after every watcher left: %d records, %d watched keys", len(f.c.recs), len(f.c.watchers))
	}
}

// The cache names its logger once, "cache": the relay hands it the
// process logger as it does to upstream and downstream.
func TestLoggerName(t *testing.T) {
	core, logs := observer.New(zap.WarnLevel)
	f := newFixture(t, Options{Logger: zap.New(core)})
	f.c.Apply(Update{Link: legacyStream, TypeURL: lds, Resources: []*Resource{{Name: "a"}}}) // no body: warns
	entries := logs.All()
	if len(entries) != 1 || entries[0].LoggerName != "cache" {
		t.Fatalf("logged %+v, want one warning from logger \"cache\"", entries)
	}
}

// TestSetBounds: bounds lowered at run time evict the oldest unwatched keys
// at once (unsubscribing them), never a watched one; raised bounds keep
// more from then on.
func TestSetBounds(t *testing.T) {
	f := newFixture(t, unbounded)
	pinned := &fakeWatcher{}
	pk := key(legacyStream, lds, "pinned")
	f.c.Watch(pinned, nil, pk)
	f.c.Apply(Update{Link: legacyStream, TypeURL: lds, Resources: []*Resource{res(pk.Name, "1", 10)}})
	for i := range 10 {
		w := &fakeWatcher{}
		k := key(legacyStream, lds, fmt.Sprintf("r-%d", i))
		f.c.Watch(w, nil, k)
		f.c.Apply(Update{Link: legacyStream, TypeURL: lds, Resources: []*Resource{res(k.Name, "1", 10)}})
		f.c.Unwatch(w, k)
	}
	f.sub.take()

	f.c.SetBounds(3, -1)
	var want []string
	for i := range 7 {
		want = append(want, fmt.Sprintf("-envoy.config.listener.v3.Listener r-%d", i))
	}
	if diff := cmp.Diff(want, f.sub.take()); diff != "" {
		t.Errorf("subscriber calls after lowering to 3 (-want +got):\n%s", diff)
	}
	if _, st := f.c.Get(pk); st != StatePresent {
		t.Errorf("watched key: %v, want present", st)
	}
	f.c.SetBounds(-1, 2*heldBytes("r-9", "1", 10)+5) // bytes now tighter: keeps 2
	if diff := cmp.Diff([]string{"-envoy.config.listener.v3.Listener r-7"}, f.sub.take()); diff != "" {
		t.Errorf("subscriber calls after lowering bytes (-want +got):\n%s", diff)
	}
	f.c.SetBounds(-1, -1)
	w := &fakeWatcher{}
	k := key(legacyStream, lds, "later")
	f.c.Watch(w, nil, k)
	f.c.Apply(Update{Link: legacyStream, TypeURL: lds, Resources: []*Resource{res(k.Name, "1", 10)}})
	f.c.Unwatch(w, k)
	if got := f.sub.take(); len(got) != 1 || got[0] != "+envoy.config.listener.v3.Listener later" {
		t.Errorf("after raising: subscriber calls %v, want only the subscribe", got)
	}
}

// BenchmarkWatch measures one client's Watch of 20 cached keys, each
// watched by 200 others (the envoy workload at N = 10000), and its
// Unwatch when it leaves: the cache's part of a reconnect storm.
func BenchmarkWatch(b *testing.B) {
	f := newFixture(b, unbounded)
	const pool, names, others = 1000, 20, 200
	keys := make([]Key, pool)
	rs := make([]*Resource, pool)
	for i := range keys {
		keys[i] = key(legacyStream, lds, fmt.Sprintf("r-%04d", i))
		rs[i] = res(keys[i].Name, "1", 100)
	}
	for range others {
		w := &nopWatcher{}
		f.c.Watch(w, nil, keys...)
	}
	f.c.Apply(Update{Link: legacyStream, TypeURL: lds, Resources: rs})
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		w := &nopWatcher{}
		start := (i * 7) % (pool - names)
		f.c.Watch(w, nil, keys[start:start+names]...)
		f.c.Unwatch(w, keys[start:start+names]...)
	}
}
