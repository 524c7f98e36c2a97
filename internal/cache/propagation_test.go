package cache

import (
	"testing"

	"github.com/xds-relay/xds-relay/internal/propagation"
)

// With a ledger, an Apply that brings new revisions is one change: one
// record, listed, that each new revision points to, described by what it
// brought; the fan-out's end (the last watcher's Done) is told to it. An
// Apply that brings nothing new, a removal, or a heartbeat records
// nothing; without a ledger, no revision points to a record.
func TestApplyRecordsChanges(t *testing.T) {
	l := propagation.New(propagation.Options{})
	opts := unbounded
	opts.Ledger = l
	f := newFixture(t, opts)
	w := &takingWatcher{}
	ka, kb := key(legacyStream, lds, "a"), key(legacyStream, lds, "b")
	f.c.Watch(w, nil, ka, kb)

	ra, rb := res("b", "7", 10), res("a", "7", 10)
	rb.Name, ra.Name = "b", "a"
	f.c.Apply(Update{Link: legacyStream, TypeURL: lds, Resources: []*Resource{rb, ra}})
	page := l.Page(propagation.PageQuery{})
	if len(page.Changes) != 1 {
		t.Fatalf("%d changes listed, want 1", len(page.Changes))
	}
	v := page.Changes[0]
	if v.Resources != 2 || v.First != "a" || v.Version != "7" || v.Authority != legacyStream.Authority {
		t.Errorf("change %+v, want 2 resources, first a, version 7, authority %s", v, legacyStream.Authority)
	}
	got := f.c.Lookup(nil, ka).Res
	other := f.c.Lookup(nil, kb).Res
	if got.Change == nil || got.Change != other.Change {
		t.Fatalf("revisions point to %p and %p, want one record", got.Change, other.Change)
	}
	// The watcher took the set and is not done: the fan-out is not over.
	if len(w.sets) != 1 {
		t.Fatalf("%d change sets taken, want 1", len(w.sets))
	}
	if st := l.Page(propagation.PageQuery{}).Changes[0].State; st != propagation.StateConverging {
		t.Errorf("before the watcher is done: %s, want %s", st, propagation.StateConverging)
	}
	w.sets[0].Done()
	if st := l.Page(propagation.PageQuery{}).Changes[0].State; st != propagation.StateUnsent {
		t.Errorf("after the last Done, nobody sent it: %s, want %s", st, propagation.StateUnsent)
	}

	// The same bytes again, a removal: no change recorded.
	same := res("a", "7", 10)
	f.c.Apply(Update{Link: legacyStream, TypeURL: lds, Resources: []*Resource{same}})
	f.c.Apply(Update{Link: legacyStream, TypeURL: lds, Removed: []string{"b"}})
	if n := len(l.Page(propagation.PageQuery{}).Changes); n != 1 {
		t.Errorf("%d changes after a resend and a removal, want still 1", n)
	}

	// A revision already published, applied again after another: a copy
	// points to the new record, the published one keeps its own.
	f.c.Apply(Update{Link: legacyStream, TypeURL: lds, Resources: []*Resource{res("a", "8", 10)}})
	first := got.Change
	f.c.Apply(Update{Link: legacyStream, TypeURL: lds, Resources: []*Resource{got}})
	again := f.c.Lookup(nil, ka).Res
	if again == got || again.Change == first || got.Change != first || again.Version != got.Version {
		t.Errorf("re-applied revision: stored %p (change %p), published %p (change %p): want a copy with a new record", again, again.Change, got, got.Change)
	}
}

// Without a ledger nothing is recorded.
func TestApplyWithoutLedger(t *testing.T) {
	f := newFixture(t, unbounded)
	k := key(legacyStream, lds, "a")
	f.c.Apply(Update{Link: legacyStream, TypeURL: lds, Resources: []*Resource{res("a", "1", 10)}})
	if r := f.c.Lookup(nil, k).Res; r.Change != nil {
		t.Errorf("revision points to a record %p without a ledger", r.Change)
	}
}
