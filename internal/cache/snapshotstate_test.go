package cache

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"
)

// The collect/restore API warm restart uses (snapshotstate.go). The
// format, the file and the Snapshotter are tested in internal/snapshot,
// which also round-trips these entries through the format.

const globName = "xdstp://auth/envoy.config.listener.v3.Listener/dir/*"

// snapFixture is a cache holding: a watched legacy resource with a TTL,
// two unwatched ones (b used more recently than c), an xdstp resource in
// a glob the origin answered, and the legacy stream's known Wildcard.
func snapFixture(t *testing.T) *fixture {
	t.Helper()
	f := newFixture(t, unbounded)
	w := &fakeWatcher{}
	a, b, c := key(legacyStream, lds, "a"), key(legacyStream, lds, "b"), key(legacyStream, lds, "c")
	g := key(xdstpStream, lds, globName)
	f.c.Watch(w, nil, a, b, c, g, key(legacyStream, lds, Wildcard))
	f.c.Apply(Update{Link: legacyStream, TypeURL: lds, FullState: true, Resources: []*Resource{
		withTTL(res("a", "1", 10), time.Minute, f.now), res("b", "2", 20), res("c", "3", 30),
	}})
	f.c.Apply(Update{Link: xdstpStream, TypeURL: lds, Complete: []string{globName}, Resources: []*Resource{
		res("xdstp://auth/envoy.config.listener.v3.Listener/dir/x", "4", 40),
	}})
	f.c.Unwatch(w, c, key(legacyStream, lds, Wildcard))
	f.c.Unwatch(w, b) // b newer in the LRU than c
	return f
}

func TestSnapshotOrder(t *testing.T) {
	f := snapFixture(t)
	es, _ := f.c.SnapshotEntries()
	var got []string
	for _, e := range es {
		got = append(got, e.Key.Name)
	}
	// Watched (a, the glob member) by key, then the LRU newest first (b,
	// c), then the known collections by key.
	want := []string{"xdstp://auth/envoy.config.listener.v3.Listener/dir/x", "a", "b", "c", globName, "*"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("entries (-want +got):\n%s", diff)
	}
}

// TestSnapshotRestore: what SnapshotEntries collected, Restore puts back
// as it was (the snapshot package's round trip puts the same entries
// through the file format first).
func TestSnapshotRestore(t *testing.T) {
	f := snapFixture(t)
	es, _ := f.c.SnapshotEntries()

	g := newFixture(t, unbounded)
	g.now = f.now.Add(30 * time.Second)
	rr := g.c.Restore(es)
	if diff := cmp.Diff(RestoreResult{Resources: 4, Collections: 2}, rr); diff != "" {
		t.Errorf("restore (-want +got):\n%s", diff)
	}
	for _, k := range []Key{key(legacyStream, lds, "a"), key(legacyStream, lds, "b"), key(legacyStream, lds, "c"), key(xdstpStream, lds, "xdstp://auth/envoy.config.listener.v3.Listener/dir/x")} {
		want := f.c.Lookup(nil, k).Res
		read := g.c.Lookup(nil, k)
		got, st := read.Res, read.State
		if st != StatePresent {
			t.Errorf("%s: %v after restore", k.Name, st)
			continue
		}
		if diff := cmp.Diff(want, got, protocmp.Transform()); diff != "" {
			t.Errorf("%s (-before +restored):\n%s", k.Name, diff)
		}
	}
	if diff := cmp.Diff(f.c.Versions(legacyStream, lds), g.c.Versions(legacyStream, lds)); diff != "" {
		t.Errorf("Versions (initial_resource_versions) (-before +restored):\n%s", diff)
	}
	// Nothing restored is subscribed or watched: a watch subscribes and is
	// a hit, answered at once; the known Wildcard answers with its members.
	w := &fakeWatcher{}
	g.c.Watch(w, nil, key(legacyStream, lds, Wildcard))
	if diff := cmp.Diff([]string{"a", "b", "c"}, w.take()); diff != "" {
		t.Errorf("wildcard watch notified (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"+envoy.config.listener.v3.Listener *"}, g.sub.take()); diff != "" {
		t.Errorf("subscriptions (-want +got):\n%s", diff)
	}
	if hits(g, lds) != 1 || misses(g, lds) != 0 {
		t.Errorf("hits %v misses %v, want 1 0", hits(g, lds), misses(g, lds))
	}
	// a's TTL lapses when it would have: 1 minute after it arrived.
	g.now = f.now.Add(time.Minute)
	if st := g.c.Lookup(nil, key(legacyStream, lds, "a")).State; st != StateAbsent {
		t.Errorf("a after its TTL: %v, want absent", st)
	}
}

func TestSnapshotRestoreExpiredAndBounds(t *testing.T) {
	f := snapFixture(t)
	es, _ := f.c.SnapshotEntries()
	t.Run("expired", func(t *testing.T) {
		g := newFixture(t, unbounded)
		g.now = f.now.Add(2 * time.Minute)
		rr := g.c.Restore(es)
		if diff := cmp.Diff(RestoreResult{Resources: 3, Collections: 2, Expired: 1}, rr); diff != "" {
			t.Errorf("restore (-want +got):\n%s", diff)
		}
	})
	t.Run("bounds", func(t *testing.T) {
		// Room for two keys: the first two entries, no collection.
		g := newFixture(t, Options{MaxResources: 2, MaxBytes: -1})
		rr := g.c.Restore(es)
		if diff := cmp.Diff(RestoreResult{Resources: 2, OverBounds: 4}, rr); diff != "" {
			t.Errorf("restore (-want +got):\n%s", diff)
		}
		if st := g.c.Lookup(nil, key(legacyStream, lds, "a")).State; st != StatePresent {
			t.Errorf("a: %v, want present (first in the snapshot)", st)
		}
		if st := g.c.Lookup(nil, key(legacyStream, lds, "b")).State; st != StatePending {
			t.Errorf("b: %v, want pending (not restored)", st)
		}
	})
}
