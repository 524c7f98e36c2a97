package cache

import (
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/xds-relay/xds-relay/internal/xdstype"
)

func metadata(v string) *corev3.Metadata {
	return &corev3.Metadata{FilterMetadata: map[string]*structpb.Struct{
		"trace": {Fields: map[string]*structpb.Value{"id": structpb.NewStringValue(v)}},
	}}
}

// withFields returns a copy of r with the origin's wrapper fields.
func withFields(r *Resource, aliases []string, md *corev3.Metadata, doNotCache bool) *Resource {
	cp := *r
	cp.Aliases, cp.Metadata = aliases, md
	if doNotCache {
		cp.CacheControl = &discoveryv3.Resource_CacheControl{DoNotCache: true}
	}
	return &cp
}

// TestFieldsAreContent: a revision that differs from the cached one only
// in aliases, metadata or cache control is a change (a new version,
// watchers notified); the same fields again are not.
func TestFieldsAreContent(t *testing.T) {
	a := key(legacyStream, lds, "a")
	base := withFields(res("a", "1", 3), []string{"x"}, metadata("m1"), false)
	for _, tc := range []struct {
		name       string
		second     *Resource
		wantNotify []string
	}{
		{name: "same fields, new origin version, notify nobody", second: withFields(&Resource{Name: "a", OriginVersion: "2", Body: res("a", "1", 3).Body}, []string{"x"}, metadata("m1"), false)},
		{name: "metadata only notifies", second: withFields(res("a", "1", 3), []string{"x"}, metadata("m2"), false), wantNotify: []string{"a"}},
		{name: "aliases only notify", second: withFields(res("a", "1", 3), []string{"x", "y"}, metadata("m1"), false), wantNotify: []string{"a"}},
		{name: "cache control only notifies", second: withFields(res("a", "1", 3), []string{"x"}, metadata("m1"), true), wantNotify: []string{"a"}},
		{name: "fields dropped notify", second: res("a", "1", 3), wantNotify: []string{"a"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, unbounded)
			w := &fakeWatcher{}
			f.c.Watch(w, nil, a)
			f.c.Apply(Update{Link: legacyStream, TypeURL: lds, Resources: []*Resource{base}})
			first := f.c.Lookup(nil, a).Res
			w.take()
			f.c.Apply(Update{Link: legacyStream, TypeURL: lds, Resources: []*Resource{tc.second}})
			if diff := cmp.Diff(tc.wantNotify, w.take()); diff != "" {
				t.Errorf("notified (-want +got):\n%s", diff)
			}
			read := f.c.Lookup(nil, a)
			got, st := read.Res, read.State
			if st != StatePresent {
				t.Fatalf("Get: %v", st)
			}
			if changed := got.Version != first.Version; changed != (tc.wantNotify != nil) {
				t.Errorf("version %s → %s: changed %v, want %v", first.Version, got.Version, changed, tc.wantNotify != nil)
			}
			if diff := cmp.Diff(withVersion(tc.second).Metadata, got.Metadata, protocmp.Transform()); tc.wantNotify != nil && diff != "" {
				t.Errorf("metadata kept (-want +got):\n%s", diff)
			}
		})
	}
	// Without fields, the version is go-control-plane's hash of the bytes.
	plain := res("p", "1", 3)
	if got, want := RevisionVersion(plain), ContentVersion(plain.Body); got != want {
		t.Errorf("RevisionVersion without fields = %s, want ContentVersion %s", got, want)
	}
}

// TestAliasWatch: a key watched by alias (VHDS on demand) reads as the
// resource the origin sent under its own name with that alias, is
// notified when it changes or stops naming the alias, and keeps it from
// eviction while watched.
func TestAliasWatch(t *testing.T) {
	f := newFixture(t, Options{MaxResources: 0, MaxBytes: 0}) // nothing unwatched is kept
	alias := key(legacyStream, lds, "rc/www.example.com")
	w := &fakeWatcher{}
	f.c.Watch(w, nil, alias)
	if diff := cmp.Diff([]string{"+envoy.config.listener.v3.Listener rc/www.example.com"}, f.sub.take()); diff != "" {
		t.Fatalf("subscriptions (-want +got):\n%s", diff)
	}
	vh := withFields(res("rc/vh1", "1", 3), []string{"rc/www.example.com", "rc/example.com"}, nil, false)
	f.c.Apply(Update{Link: legacyStream, TypeURL: lds, Resources: []*Resource{vh}})
	if diff := cmp.Diff([]string{alias.Name}, w.take()); diff != "" {
		t.Errorf("alias watcher notified (-want +got):\n%s", diff)
	}
	read := f.c.Lookup(nil, alias)
	got, st := read.Res, read.State
	if st != StatePresent || got.Name != "rc/vh1" {
		t.Fatalf("Get(alias) = %v %v, want rc/vh1 present", got, st)
	}
	if st := f.c.Lookup(nil, key(legacyStream, lds, "rc/vh1")).State; st != StatePresent {
		t.Errorf("the resource itself: %v, want kept (watched through its alias)", st)
	}
	if got := f.sub.take(); len(got) != 0 {
		t.Errorf("subscriber calls %v, want none", got)
	}

	// A second watcher of the alias is a hit, told at once.
	w2 := &fakeWatcher{}
	f.c.Watch(w2, nil, alias)
	if diff := cmp.Diff([]string{alias.Name}, w2.take()); diff != "" {
		t.Errorf("late alias watcher notified (-want +got):\n%s", diff)
	}
	if hits(f, lds) != 1 {
		t.Errorf("hits %v, want 1", hits(f, lds))
	}
	f.c.Unwatch(w2, alias)

	// A metadata change reaches the alias watcher.
	f.c.Apply(Update{Link: legacyStream, TypeURL: lds, Resources: []*Resource{withFields(vh, vh.Aliases, metadata("new"), false)}})
	if diff := cmp.Diff([]string{alias.Name}, w.take()); diff != "" {
		t.Errorf("after a metadata change (-want +got):\n%s", diff)
	}
	// A revision without the alias: the alias watcher is told, and the
	// alias reads as its own key again (pending: the origin did not
	// answer it as a name).
	f.c.Apply(Update{Link: legacyStream, TypeURL: lds, Resources: []*Resource{withFields(res("rc/vh1", "2", 3), []string{"rc/example.com"}, nil, false)}})
	if diff := cmp.Diff([]string{alias.Name}, w.take()); diff != "" {
		t.Errorf("after the alias left (-want +got):\n%s", diff)
	}
	if st := f.c.Lookup(nil, alias).State; st != StatePending {
		t.Errorf("Get(alias) after it left: %v, want pending", st)
	}
	if st := f.c.Lookup(nil, key(legacyStream, lds, "rc/vh1")).State; st != StatePending {
		t.Errorf("the resource, no longer watched through an alias: %v, want evicted (bounds 0)", st)
	}
}

// TestAliasRemoved: the origin removing the resource tells its alias
// watchers.
func TestAliasRemoved(t *testing.T) {
	f := newFixture(t, unbounded)
	alias := key(legacyStream, lds, "rc/a.example")
	w := &fakeWatcher{}
	f.c.Watch(w, nil, alias)
	f.c.Apply(Update{Link: legacyStream, TypeURL: lds, Resources: []*Resource{withFields(res("rc/vh", "1", 3), []string{alias.Name}, nil, false)}})
	w.take()
	f.c.Apply(Update{Link: legacyStream, TypeURL: lds, Removed: []string{"rc/vh"}})
	if diff := cmp.Diff([]string{alias.Name}, w.take()); diff != "" {
		t.Errorf("after removal (-want +got):\n%s", diff)
	}
	if read := f.c.Lookup(nil, alias); read.State == StatePresent {
		t.Errorf("Get(alias) after removal: %v present", read.Res.Name)
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

// TestSnapshotFields: the wrapper fields are restored with the revision
// (an alias reads as its resource); a do_not_cache revision is never
// collected (TestDoNotCache). The format's side: internal/snapshot.
func TestSnapshotFields(t *testing.T) {
	f := newFixture(t, unbounded)
	w := &fakeWatcher{}
	a := key(legacyStream, lds, "a")
	f.c.Watch(w, nil, a)
	f.c.Apply(Update{Link: legacyStream, TypeURL: lds, Resources: []*Resource{withFields(res("a", "1", 3), []string{"al"}, metadata("m"), false)}})
	es, _ := f.c.SnapshotEntries()
	g := newFixture(t, unbounded)
	g.c.Restore(es)
	if read := g.c.Lookup(nil, key(legacyStream, lds, "al")); read.State != StatePresent || read.Res.Name != "a" {
		t.Errorf("restored alias reads %v %v, want a", read.Res, read.State)
	}
}
