package cache

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/xds-relay/xds-relay/internal/xdstype"
)

func refetchesLimited(f *fixture) float64 {
	return testutil.ToFloat64(f.c.m.refetchesLimited.WithLabelValues(xdstype.Label(lds)))
}

// TestRefetchRateLimited: a do_not_cache key is asked of the origin for
// new watchers at most once per refetch interval. A watcher arriving
// within the interval of the last fetch waits for a refetch held back
// until the interval has passed (so does the next one, joining it); the
// timer makes it; the origin's answer goes to both. A watcher arriving
// while a refetch is in flight joins it. None is sent the cached revision.
func TestRefetchRateLimited(t *testing.T) {
	const interval = time.Second
	f := newFixture(t, Options{MaxResources: -1, MaxBytes: -1, RefetchInterval: interval})
	a := key(legacyStream, lds, "a")
	dnc := func(v string) *Resource { return withFields(res("a", v, 3), nil, nil, true) }
	w1 := &fakeWatcher{}
	f.c.Watch(w1, nil, a) // fetched now
	f.c.Apply(Update{Link: legacyStream, TypeURL: lds, Resources: []*Resource{dnc("1")}})
	f.sub.take()

	w2, w3 := &fakeWatcher{}, &fakeWatcher{}
	f.now = f.now.Add(interval / 4)
	f.c.Watch(w2, nil, a)
	f.c.Watch(w3, nil, a)
	if got := f.sub.take(); len(got) != 0 {
		t.Errorf("within the interval: subscriber calls %v, want none (held back)", got)
	}
	if d := f.timers.armed(t); d != 3*interval/4 {
		t.Errorf("timer armed for %v, want %v (the interval after the last fetch)", d, 3*interval/4)
	}
	cached := f.c.Lookup(nil, a).Res
	for _, w := range []*fakeWatcher{w2, w3} {
		if !f.c.Lookup(w, a).Withheld(cached) {
			t.Errorf("the cached revision is not withheld from a watcher waiting for the held-back refetch")
		}
	}
	if refetches(f) != 0 || refetchesLimited(f) != 2 {
		t.Errorf("refetches %v, limited %v; want 0, 2", refetches(f), refetchesLimited(f))
	}

	f.now = f.now.Add(3 * interval / 4)
	f.timers.fire(t)
	if diff := cmp.Diff([]string{"-envoy.config.listener.v3.Listener a", "+envoy.config.listener.v3.Listener a"}, f.sub.take()); diff != "" {
		t.Errorf("at the end of the interval, one refetch (-want +got):\n%s", diff)
	}
	w4 := &fakeWatcher{}
	f.c.Watch(w4, nil, a) // a refetch in flight: joins it
	if got := f.sub.take(); len(got) != 0 {
		t.Errorf("while a refetch is in flight: subscriber calls %v, want none", got)
	}
	f.c.Apply(Update{Link: legacyStream, TypeURL: lds, Resources: []*Resource{dnc("2")}})
	fresh := f.c.Lookup(nil, a).Res
	for i, w := range []*fakeWatcher{w2, w3, w4} {
		if got := w.take(); len(got) != 1 || f.c.Lookup(w, a).Withheld(fresh) {
			t.Errorf("watcher %d: told %v, withheld %v; want told of the fresh copy, not withheld", i+2, got, f.c.Lookup(w, a).Withheld(fresh))
		}
	}
	if refetches(f) != 1 || refetchesLimited(f) != 3 {
		t.Errorf("refetches %v, limited %v; want 1, 3", refetches(f), refetchesLimited(f))
	}
}

// TestRefetchHeldBackAnsweredMeanwhile: a held-back refetch whose revision
// the origin sends of its own accord before it is due is not made.
func TestRefetchHeldBackAnsweredMeanwhile(t *testing.T) {
	f := newFixture(t, Options{MaxResources: -1, MaxBytes: -1, RefetchInterval: time.Second})
	a := key(legacyStream, lds, "a")
	f.c.Watch(&fakeWatcher{}, nil, a)
	f.c.Apply(Update{Link: legacyStream, TypeURL: lds, Resources: []*Resource{withFields(res("a", "1", 3), nil, nil, true)}})
	w := &fakeWatcher{}
	f.c.Watch(w, nil, a)
	f.c.Apply(Update{Link: legacyStream, TypeURL: lds, Resources: []*Resource{withFields(res("a", "2", 3), nil, nil, true)}})
	f.sub.take()
	f.now = f.now.Add(time.Second)
	f.timers.fire(t)
	if got := f.sub.take(); len(got) != 0 {
		t.Errorf("subscriber calls %v, want none: the origin already sent it", got)
	}
}

// TestResubscribeRateLimited: a client that leaves and comes back (the
// do_not_cache revision is dropped and unsubscribed when nobody watches
// it) causes at most one fetch per interval: its new subscription is held
// back until the interval after the last fetch has passed.
func TestResubscribeRateLimited(t *testing.T) {
	const interval = time.Second
	f := newFixture(t, Options{MaxResources: -1, MaxBytes: -1, RefetchInterval: interval})
	a := key(legacyStream, lds, "a")
	w := &fakeWatcher{}
	f.c.Watch(w, nil, a)
	f.c.Apply(Update{Link: legacyStream, TypeURL: lds, Resources: []*Resource{withFields(res("a", "1", 3), nil, nil, true)}})
	f.c.Unwatch(w, a)
	if diff := cmp.Diff([]string{"+envoy.config.listener.v3.Listener a", "-envoy.config.listener.v3.Listener a"}, f.sub.take()); diff != "" {
		t.Fatalf("first watch and leave (-want +got):\n%s", diff)
	}

	f.now = f.now.Add(interval / 10)
	w2 := &fakeWatcher{}
	f.c.Watch(w2, nil, a)
	if got := f.sub.take(); len(got) != 0 {
		t.Errorf("back within the interval: subscriber calls %v, want none (held back)", got)
	}
	if st := f.c.Lookup(nil, a).State; st != StatePending {
		t.Errorf("state %v, want pending (nothing served from cache)", st)
	}
	f.now = f.now.Add(interval)
	f.timers.fire(t)
	if diff := cmp.Diff([]string{"+envoy.config.listener.v3.Listener a"}, f.sub.take()); diff != "" {
		t.Errorf("at the end of the interval (-want +got):\n%s", diff)
	}
	if refetches(f) != 1 || refetchesLimited(f) != 1 {
		t.Errorf("refetches %v, limited %v; want 1, 1", refetches(f), refetchesLimited(f))
	}

	// Unlimited (0): back at once, fetched at once.
	g := newFixture(t, unbounded)
	g.c.Watch(w, nil, a)
	g.c.Apply(Update{Link: legacyStream, TypeURL: lds, Resources: []*Resource{withFields(res("a", "1", 3), nil, nil, true)}})
	g.c.Unwatch(w, a)
	g.sub.take()
	g.c.Watch(w2, nil, a)
	if diff := cmp.Diff([]string{"+envoy.config.listener.v3.Listener a"}, g.sub.take()); diff != "" {
		t.Errorf("refetch_interval 0 (-want +got):\n%s", diff)
	}
}

func refetches(f *fixture) float64 {
	return testutil.ToFloat64(f.c.m.refetches.WithLabelValues(xdstype.Label(lds)))
}

// TestDoNotCache: a revision the origin marked do_not_cache is not served
// from cache to a later watcher: that watcher reads it as pending and the
// key is asked of the origin again; the origin's answer (even unchanged)
// is told to it only, a changed one to everyone. Once unwatched it is
// dropped and unsubscribed, and it is never in a snapshot.
func TestDoNotCache(t *testing.T) {
	a := key(legacyStream, lds, "a")
	rev := withFields(res("a", "1", 3), nil, nil, true)
	for _, tc := range []struct {
		name       string
		answer     *Resource
		wantFirst  []string // what the first watcher is told of the answer
		wantNewest string   // origin version both read afterwards
	}{
		{name: "origin resends it unchanged", answer: withFields(res("a", "1", 3), nil, nil, true), wantNewest: "1"},
		{name: "origin sends a new revision", answer: withFields(res("a", "2", 3), nil, nil, true), wantFirst: []string{"a"}, wantNewest: "2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, unbounded)
			w1, w2 := &fakeWatcher{}, &fakeWatcher{}
			f.c.Watch(w1, nil, a)
			f.c.Apply(Update{Link: legacyStream, TypeURL: lds, Resources: []*Resource{rev}})
			w1.take()
			f.sub.take()
			if es, _ := f.c.SnapshotEntries(); len(es) != 0 {
				t.Errorf("snapshot entries %v, want none (do_not_cache)", es)
			}

			f.c.Watch(w2, nil, a)
			if got := w2.take(); len(got) != 0 {
				t.Errorf("late watcher told %v at once, want nothing before the origin answers", got)
			}
			if diff := cmp.Diff([]string{"-envoy.config.listener.v3.Listener a", "+envoy.config.listener.v3.Listener a"}, f.sub.take()); diff != "" {
				t.Errorf("asked of the origin again (-want +got):\n%s", diff)
			}
			read := f.c.Lookup(nil, a)
			cached, st := read.Res, read.State
			if st != StatePresent {
				t.Fatalf("Get: %v, want the cached revision present", st)
			}
			if !f.c.Lookup(w2, a).Withheld(cached) {
				t.Errorf("cached revision not withheld from the late watcher")
			}
			if f.c.Lookup(w1, a).Withheld(cached) {
				t.Errorf("cached revision withheld from the first watcher")
			}
			if hits(f, lds) != 0 || refetches(f) != 1 {
				t.Errorf("hits %v refetches %v, want 0 1", hits(f, lds), refetches(f))
			}

			f.c.Apply(Update{Link: legacyStream, TypeURL: lds, Resources: []*Resource{tc.answer}})
			if diff := cmp.Diff([]string{"a"}, w2.take()); diff != "" {
				t.Errorf("late watcher told of the answer (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantFirst, w1.take()); diff != "" {
				t.Errorf("first watcher told of the answer (-want +got):\n%s", diff)
			}
			read = f.c.Lookup(nil, a)
			r, st := read.Res, read.State
			if st != StatePresent || r.OriginVersion != tc.wantNewest {
				t.Fatalf("Get after the answer: %v %v, want present at %s", r, st, tc.wantNewest)
			}
			for _, w := range []*fakeWatcher{w1, w2} {
				if f.c.Lookup(w, a).Withheld(r) {
					t.Errorf("the origin's answer withheld from a watcher")
				}
			}
			if stale := r != cached; stale != f.c.Lookup(w1, a).Withheld(cached) {
				t.Errorf("the earlier revision withheld %v, want %v (only when no longer current)", !stale, stale)
			}

			f.c.Unwatch(w1, a)
			f.c.Unwatch(w2, a)
			if st := f.c.Lookup(nil, a).State; st != StatePending {
				t.Errorf("unwatched: %v, want dropped (never kept in the LRU)", st)
			}
			if diff := cmp.Diff([]string{"-envoy.config.listener.v3.Listener a"}, f.sub.take()); diff != "" {
				t.Errorf("unwatched: subscriber calls (-want +got):\n%s", diff)
			}
		})
	}
}

// TestDoNotCacheUnwatchedWhileOwed: a watcher that leaves before the
// origin answered is not told.
func TestDoNotCacheUnwatchedWhileOwed(t *testing.T) {
	f := newFixture(t, unbounded)
	a := key(legacyStream, lds, "a")
	w1, w2 := &fakeWatcher{}, &fakeWatcher{}
	f.c.Watch(w1, nil, a)
	f.c.Apply(Update{Link: legacyStream, TypeURL: lds, Resources: []*Resource{withFields(res("a", "1", 3), nil, nil, true)}})
	f.c.Watch(w2, nil, a)
	f.c.Unwatch(w2, a)
	w2.take()
	f.c.Apply(Update{Link: legacyStream, TypeURL: lds, Resources: []*Resource{withFields(res("a", "1", 3), nil, nil, true)}})
	if got := w2.take(); len(got) != 0 {
		t.Errorf("left watcher told %v", got)
	}
}
