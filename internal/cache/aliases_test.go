package cache

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

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
