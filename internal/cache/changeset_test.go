package cache

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/xds-relay/xds-relay/internal/xdstype"
)

// TestApplyAnnouncesChangeAsWhole: one Apply of many resources is one
// change: every watcher is notified of all its keys before any Flush, and
// every Flush carries the Apply's change set. A Watch's initial state is
// flushed without one.
func TestApplyAnnouncesChangeAsWhole(t *testing.T) {
	f := newFixture(t, unbounded)
	var keys []Key
	var rs []*Resource
	for i := range 10 {
		n := fmt.Sprintf("r%d", i)
		keys = append(keys, key(legacyStream, lds, n))
		rs = append(rs, res(n, "1", 8))
	}
	named, wild := &fakeWatcher{}, &fakeWatcher{}
	f.c.Watch(named, nil, keys...)
	f.c.Watch(wild, nil, key(legacyStream, lds, Wildcard))
	named.takeFlushes()
	wild.takeFlushes()

	f.c.Apply(Update{Link: legacyStream, TypeURL: lds, Resources: rs})
	var applied *ChangeSet
	for name, w := range map[string]*fakeWatcher{"named": named, "wildcard": wild} {
		fl := w.takeFlushes()
		if len(fl) == 0 {
			t.Fatalf("%s watcher: no Flush", name)
		}
		for i, at := range fl {
			if at.notified != 10 {
				t.Errorf("%s watcher: Flush %d after %d of 10 keys were notified", name, i, at.notified)
			}
			if at.cs == nil || at.cs != fl[0].cs {
				t.Errorf("%s watcher: Flush %d carries change set %p, want the Apply's (%p)", name, i, at.cs, fl[0].cs)
			}
		}
		if got := len(w.take()); got != 10 {
			t.Errorf("%s watcher: notified of %d keys, want 10", name, got)
		}
		applied = fl[0].cs
	}

	// A change of new revisions only lists them, sorted, for sharing.
	var got []string
	for _, r := range applied.Revisions() {
		got = append(got, r.Key.Name)
	}
	want := []string{"r0", "r1", "r2", "r3", "r4", "r5", "r6", "r7", "r8", "r9"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Revisions (-want +got):\n%s", diff)
	}
	// A change that removes something is not only revisions.
	f.c.Apply(Update{Link: legacyStream, TypeURL: lds, Resources: []*Resource{res("r0", "2", 8)}, Removed: []string{"r1"}})
	if fl := named.takeFlushes(); len(fl) == 0 || fl[0].cs == nil || fl[0].cs.Revisions() != nil {
		t.Errorf("change with a removal: flushes %+v, want a change set without Revisions", fl)
	}
	named.take()

	late := &fakeWatcher{}
	f.c.Watch(late, nil, keys[0])
	fl := late.takeFlushes()
	if len(fl) == 0 || fl[0].cs != nil || fl[0].notified != 1 {
		t.Errorf("Watch of a cached key: flushes %+v, want one after 1 key with no change set", fl)
	}
}

// TestContentVersion: the version the relay gives a resource comes from its
// bytes, whatever the origin called it; Versions reports the origin's
// latest version (what the origin understands on reconnect).
func TestContentVersion(t *testing.T) {
	f := newFixture(t, unbounded)
	a := key(legacyStream, lds, "a")
	w := &fakeWatcher{}
	f.c.Watch(w, nil, a)
	body := res("a", "x", 16).Body
	f.c.Apply(Update{Link: legacyStream, TypeURL: lds, Resources: []*Resource{{Name: "a", OriginVersion: "snap-1", Body: body}}})
	first := f.c.Lookup(nil, a).Res
	w.take()
	f.c.Apply(Update{Link: legacyStream, TypeURL: lds, Resources: []*Resource{{Name: "a", OriginVersion: "snap-2", Body: body}}})
	if got := w.take(); len(got) != 0 {
		t.Errorf("republish of the same bytes under a new version notified %v", got)
	}
	again := f.c.Lookup(nil, a).Res
	if again != first {
		t.Errorf("republish replaced the cached revision")
	}
	if diff := cmp.Diff(map[string]string{"a": "snap-2"}, f.c.Versions(legacyStream, lds)); diff != "" {
		t.Errorf("Versions (-want +got):\n%s", diff)
	}
	// The same bytes elsewhere (another stream, another origin version)
	// get the same relay version.
	other := LinkID{Authority: "other"}
	f.c.Watch(w, nil, key(other, lds, "a"))
	f.c.Apply(Update{Link: other, TypeURL: lds, Resources: []*Resource{{Name: "a", OriginVersion: "42", Body: body}}})
	elsewhere := f.c.Lookup(nil, key(other, lds, "a")).Res
	if first.Version == "" || elsewhere.Version != first.Version {
		t.Errorf("versions of equal bytes: %q and %q, want equal and set", first.Version, elsewhere.Version)
	}
}

// takingWatcher takes every change set it is flushed with, once.
type takingWatcher struct{ sets []*ChangeSet }

func (*takingWatcher) Notify(Key) {}
func (w *takingWatcher) Flush(cs *ChangeSet) {
	if cs != nil && (len(w.sets) == 0 || w.sets[len(w.sets)-1] != cs) {
		cs.Take()
		w.sets = append(w.sets, cs)
	}
}

// TestFanoutDuration: an origin change is measured once, when the last
// watcher that took it is done; a change nobody took is not measured.
func TestFanoutDuration(t *testing.T) {
	f := newFixture(t, unbounded)
	count := func() int { return testutil.CollectAndCount(f.c.m.fanout) }
	sampleCount := func() uint64 {
		var m dto.Metric
		if err := f.c.m.fanout.WithLabelValues(xdstype.Label(lds)).(prometheus.Metric).Write(&m); err != nil {
			t.Fatal(err)
		}
		return m.GetHistogram().GetSampleCount()
	}
	f.c.Apply(Update{Link: legacyStream, TypeURL: lds, Resources: []*Resource{res("nobody", "1", 1)}})
	if n := count(); n != len(xdstype.Labels()) { // every type's series exists from start, with no sample
		t.Fatalf("series = %d", n)
	}
	if got := sampleCount(); got != 0 {
		t.Errorf("a change no watcher took was measured (%d samples)", got)
	}

	w1, w2 := &takingWatcher{}, &takingWatcher{}
	f.c.Watch(w1, nil, key(legacyStream, lds, "a"))
	f.c.Watch(w2, nil, key(legacyStream, lds, "a"))
	f.c.Apply(Update{Link: legacyStream, TypeURL: lds, Resources: []*Resource{res("a", "1", 1)}})
	if len(w1.sets) != 1 || len(w2.sets) != 1 || w1.sets[0] != w2.sets[0] {
		t.Fatalf("watchers took %v and %v, want one shared change set", w1.sets, w2.sets)
	}
	w1.sets[0].Done()
	if got := sampleCount(); got != 0 {
		t.Errorf("measured before the last watcher was done (%d samples)", got)
	}
	w2.sets[0].Done()
	if got := sampleCount(); got != 1 {
		t.Errorf("after the last watcher: %d samples, want 1", got)
	}
}

// TestForgetLink: a stream some client watches is not released; once
// nobody does, everything cached for it is forgotten without unsubscribing
// (its link is closing), and a later watch is a miss that subscribes anew.
func TestForgetLink(t *testing.T) {
	f := newFixture(t, unbounded)
	a := key(legacyStream, lds, "a")
	other := key(xdstpStream, lds, "o")
	w := &fakeWatcher{}
	f.c.Watch(w, nil, a, other)
	f.c.Apply(Update{Link: legacyStream, TypeURL: lds, Resources: []*Resource{res("a", "1", 4)}})
	f.sub.take()
	if f.c.ForgetLink(legacyStream) || !f.c.Watched(legacyStream) {
		t.Fatal("released a stream a client watches")
	}
	f.c.Unwatch(w, a)
	if f.c.Watched(legacyStream) || !f.c.Watched(xdstpStream) {
		t.Fatalf("Watched: legacy %v (want false), xdstp %v (want true)", f.c.Watched(legacyStream), f.c.Watched(xdstpStream))
	}
	if !f.c.ForgetLink(legacyStream) {
		t.Fatal("did not release an unwatched stream")
	}
	if ops := f.sub.take(); len(ops) != 0 {
		t.Errorf("release unsubscribed %v; the link is closing, nothing to unsubscribe", ops)
	}
	if st := f.c.Lookup(nil, a).State; st != StatePending {
		t.Errorf("a after release: %v, want pending (forgotten)", st)
	}
	f.c.Watch(w, nil, a)
	if diff := cmp.Diff([]string{"+envoy.config.listener.v3.Listener a"}, f.sub.take()); diff != "" {
		t.Errorf("watch after release (-want +got):\n%s", diff)
	}
	if st := f.c.Lookup(nil, other).State; st != StatePending {
		t.Errorf("another stream's key: %v", st)
	}
}
