package cache

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// fakeValidator refuses bodies that start with "bad" and records what it
// was asked, as "name version-prefix".
type fakeValidator struct {
	mu    sync.Mutex
	asked []string // guarded by mu
}

func (v *fakeValidator) Validate(k Key, r *Resource) error {
	v.mu.Lock()
	v.asked = append(v.asked, k.Name+" "+r.OriginVersion)
	v.mu.Unlock()
	if strings.HasPrefix(string(r.Body.GetValue()), "bad") {
		return errors.New("invalid Listener.Name: value length must be at least 1 runes")
	}
	return nil
}

func (v *fakeValidator) take() []string {
	v.mu.Lock()
	defer v.mu.Unlock()
	out := v.asked
	v.asked = nil
	return out
}

// Each new revision is validated once, before it is cached; an unchanged
// resend is not asked again; a refused one is neither cached nor
// announced, and the rest of its update is applied.
func TestValidatorSeesNewRevisionsOnly(t *testing.T) {
	v := &fakeValidator{}
	opts := unbounded
	opts.Validator = v
	f := newFixture(t, opts)
	w := &fakeWatcher{}
	f.c.Watch(w, nil, key(legacyStream, lds, "a"), key(legacyStream, lds, "b"))

	got := f.c.Apply(Update{Link: legacyStream, TypeURL: lds, Resources: []*Resource{res("a", "1", 4), res("b", "1", 4)}})
	if len(got.Refused) != 0 {
		t.Fatalf("Refused = %v, want none", got.Refused)
	}
	if diff := cmp.Diff([]string{"a 1", "b 1"}, v.take()); diff != "" {
		t.Errorf("asked (-want +got):\n%s", diff)
	}
	w.take()

	// A resend (SotW republishes the type) with one change, made invalid.
	got = f.c.Apply(Update{Link: legacyStream, TypeURL: lds, Resources: []*Resource{res("a", "1", 4), res("b", "bad2", 4)}})
	if diff := cmp.Diff([]string{"b bad2"}, v.take()); diff != "" {
		t.Errorf("asked of a resend with one change (-want +got):\n%s", diff)
	}
	if len(got.Refused) != 1 || got.Refused[0].Name != "b" || !strings.Contains(got.Refused[0].Err.Error(), "Listener.Name") {
		t.Errorf("Refused = %v, want b with the validator's error", got.Refused)
	}
	if r := f.c.Lookup(nil, key(legacyStream, lds, "b")).Res; r.OriginVersion != "1" {
		t.Errorf("b = version %q, want the previous revision kept (1)", r.OriginVersion)
	}
	if n := w.take(); len(n) != 0 {
		t.Errorf("watchers told of %v; a refused revision changes nothing", n)
	}

	// The refused content again, with a valid change beside it: asked
	// again (the cache keeps no refused revision; delivery remembers it),
	// the valid one applied.
	got = f.c.Apply(Update{Link: legacyStream, TypeURL: lds, Resources: []*Resource{res("a", "2", 4), res("b", "bad2", 4)}})
	if diff := cmp.Diff([]string{"a 2", "b bad2"}, v.take()); diff != "" {
		t.Errorf("asked (-want +got):\n%s", diff)
	}
	if len(got.Refused) != 1 {
		t.Errorf("Refused = %v, want b", got.Refused)
	}
	if diff := cmp.Diff([]string{"a"}, w.take()); diff != "" {
		t.Errorf("notified (-want +got):\n%s", diff)
	}
}

// In a FullState update a refused revision is not a removal: its key
// keeps its revision; a pending key it would answer stays pending.
func TestRefusedInFullStateKeepsTheKey(t *testing.T) {
	opts := unbounded
	opts.Validator = &fakeValidator{}
	f := newFixture(t, opts)
	w := &fakeWatcher{}
	f.c.Watch(w, nil, key(legacyStream, cds, Wildcard))
	f.c.Apply(Update{Link: legacyStream, TypeURL: cds, FullState: true, Complete: []string{Wildcard},
		Resources: []*Resource{res("a", "1", 4), res("b", "1", 4)}})
	f.c.Watch(w, nil, key(legacyStream, cds, "p")) // pending: asked of the origin
	w.take()

	got := f.c.Apply(Update{Link: legacyStream, TypeURL: cds, FullState: true, Complete: []string{Wildcard, "p"},
		Resources: []*Resource{res("a", "bad", 4), res("b", "2", 4), res("p", "bad", 4)}})
	if len(got.Refused) != 2 {
		t.Errorf("Refused = %v, want a and p", got.Refused)
	}
	states := map[string]State{}
	for _, n := range []string{"a", "b", "p"} {
		states[n] = f.c.Lookup(nil, key(legacyStream, cds, n)).State
	}
	if diff := cmp.Diff(map[string]State{"a": StatePresent, "b": StatePresent, "p": StatePending}, states); diff != "" {
		t.Errorf("states (-want +got):\n%s", diff)
	}
	if r := f.c.Lookup(nil, key(legacyStream, cds, "a")).Res; r.OriginVersion != "1" {
		t.Errorf("a = version %q, want 1 (kept)", r.OriginVersion)
	}
	if diff := cmp.Diff([]string{"b"}, w.take()); diff != "" {
		t.Errorf("notified (-want +got):\n%s", diff)
	}
}

// fakeGuard defers every removal while reason is set, and records what it
// is asked and told.
type fakeGuard struct {
	mu     sync.Mutex
	reason string          // guarded by mu
	asked  []Removals      // guarded by mu
	events []DeferralEvent // guarded by mu
}

func (g *fakeGuard) DeferRemovals(r Removals) string {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.asked = append(g.asked, r)
	return g.reason
}

func (g *fakeGuard) Deferred(evs []DeferralEvent) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.events = append(g.events, evs...)
}

func (g *fakeGuard) set(reason string) {
	g.mu.Lock()
	g.reason = reason
	g.mu.Unlock()
}

// take returns what the guard was asked ("present removed emptied...")
// and told ("started|returned reason count") since the last call.
func (g *fakeGuard) take() (asked, told []string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, r := range g.asked {
		asked = append(asked, fmt.Sprintf("%d %d %v", r.Present, r.Removed, r.Emptied))
	}
	for _, ev := range g.events {
		kind := "started"
		if ev.Kind == DeferralReturned {
			kind = "returned"
		}
		told = append(told, fmt.Sprintf("%s %s %d", kind, ev.Reason, ev.Count))
	}
	g.asked, g.events = nil, nil
	return asked, told
}

// guardFixture is a cache with a fakeGuard, w watching cds's wildcard on
// legacyStream, holding c0..c(n-1) at version 1.
func guardFixture(t *testing.T, n int) (*fixture, *fakeGuard, *fakeWatcher) {
	t.Helper()
	g := &fakeGuard{}
	opts := unbounded
	opts.Guard = g
	f := newFixture(t, opts)
	w := &fakeWatcher{}
	f.c.Watch(w, nil, key(legacyStream, cds, Wildcard))
	f.c.Apply(Update{Link: legacyStream, TypeURL: cds, FullState: true, Complete: []string{Wildcard}, Resources: clusters(0, n, "1")})
	w.take()
	g.take()
	return f, g, w
}

// clusters are revisions c<from>..c<to-1> at version.
func clusters(from, to int, version string) []*Resource {
	var out []*Resource
	for i := from; i < to; i++ {
		out = append(out, res(fmt.Sprintf("c%d", i), version, 4))
	}
	return out
}

func presentNames(f *fixture, st LinkID, typeURL string) int {
	ms := f.c.LookupMembers(key(st, typeURL, Wildcard)).Members
	return len(ms)
}

// What the guard is asked: the present resources (deferred ones left
// out), how many the change would remove, and the watched collections it
// would empty.
func TestRemovalsAsked(t *testing.T) {
	f, g, _ := guardFixture(t, 10)
	f.c.Watch(&fakeWatcher{}, nil, key(xdstpStream, lds, "xdstp://auth/"+lds+"/d/*"))
	glob := "xdstp://auth/" + lds + "/d/*"
	f.c.Apply(Update{Link: xdstpStream, TypeURL: lds, Complete: []string{glob},
		Resources: []*Resource{res("xdstp://auth/"+lds+"/d/x", "1", 4), res("xdstp://auth/"+lds+"/d/y", "1", 4)}})
	g.take()

	f.c.Apply(Update{Link: legacyStream, TypeURL: cds, Removed: []string{"c1", "c2", "nope"}})
	f.c.Apply(Update{Link: legacyStream, TypeURL: cds, FullState: true, Resources: clusters(0, 1, "1")})
	f.c.Apply(Update{Link: xdstpStream, TypeURL: lds, Removed: []string{glob}})
	asked, _ := g.take()
	want := []string{
		"10 2 []",            // two of ten, nothing emptied
		"8 7 []",             // a full state of c0 alone: the other seven
		"2 2 [" + glob + "]", // the glob's two members: the glob emptied
	}
	if diff := cmp.Diff(want, asked); diff != "" {
		t.Errorf("asked (-want +got):\n%s", diff)
	}
	f.c.Apply(Update{Link: legacyStream, TypeURL: cds, FullState: true})
	if asked, _ := g.take(); !cmp.Equal(asked, []string{"1 1 [*]"}) {
		t.Errorf("emptying the wildcard: asked %v, want [1 1 [*]]", asked)
	}
	// Nothing to remove: not asked.
	f.c.Apply(Update{Link: legacyStream, TypeURL: cds, FullState: true})
	if asked, _ := g.take(); len(asked) != 0 {
		t.Errorf("a change removing nothing: asked %v", asked)
	}
}

// A deferred removal leaves the resources present for watchers old and
// new; a repeat of the change asks and changes nothing; removals the
// guard lets through while some are deferred are applied; the origin
// sending a resource again ends its deferral; a release removes the rest
// as one change.
func TestDeferredRemovals(t *testing.T) {
	f, g, w := guardFixture(t, 10)
	g.set("deletion_share")
	f.c.Apply(Update{Link: legacyStream, TypeURL: cds, FullState: true, Resources: clusters(0, 2, "1")})
	if n := presentNames(f, legacyStream, cds); n != 10 {
		t.Errorf("present after a deferred removal of 8: %d, want 10", n)
	}
	if got := w.take(); len(got) != 0 {
		t.Errorf("watchers told of %v, want nothing", got)
	}
	asked, told := g.take()
	if diff := cmp.Diff([]string{"10 8 []"}, asked); diff != "" {
		t.Errorf("asked (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"started deletion_share 8"}, told); diff != "" {
		t.Errorf("told (-want +got):\n%s", diff)
	}
	late := &fakeWatcher{}
	f.c.Watch(late, nil, key(legacyStream, cds, Wildcard))
	if got := late.take(); len(got) != 10 {
		t.Errorf("a new watcher is served %d, want the 10 (deferred ones included)", len(got))
	}

	// The origin repeats its state: nothing new to ask about.
	f.c.Apply(Update{Link: legacyStream, TypeURL: cds, FullState: true, Resources: clusters(0, 2, "1")})
	if asked, told := g.take(); len(asked)+len(told) != 0 {
		t.Errorf("repeat: asked %v, told %v; want nothing", asked, told)
	}
	// It removes one more, which the guard lets through (asked of the 2
	// not deferred).
	g.set("")
	f.c.Apply(Update{Link: legacyStream, TypeURL: cds, FullState: true, Resources: clusters(0, 1, "1")})
	if asked, _ := g.take(); !cmp.Equal(asked, []string{"2 1 []"}) {
		t.Errorf("asked %v, want [2 1 []]", asked)
	}
	if diff := cmp.Diff([]string{"c1"}, w.take()); diff != "" {
		t.Errorf("notified (-want +got):\n%s", diff)
	}
	// It sends c2 and c3 again: their deferral ends.
	f.c.Apply(Update{Link: legacyStream, TypeURL: cds, FullState: true, Resources: append(clusters(0, 1, "1"), clusters(2, 4, "1")...)})
	if _, told := g.take(); !cmp.Equal(told, []string{"returned deletion_share 2"}) {
		t.Errorf("told %v, want [returned deletion_share 2]", told)
	}
	if got := w.take(); len(got) != 0 {
		t.Errorf("an unchanged return notified %v", got)
	}
	d := f.c.Deferrals()
	if len(d) != 1 || d[0].Count != 6 || d[0].Reason != "deletion_share" || d[0].Names[0] != "c4" {
		t.Fatalf("Deferrals = %+v, want 6 of cds (c4..c9)", d)
	}

	rel := f.c.ReleaseDeferred(DeferralFilter{Authority: "other"})
	if len(rel) != 0 {
		t.Errorf("release of another authority released %v", rel)
	}
	rel = f.c.ReleaseDeferred(DeferralFilter{Authority: "auth", TypeURL: cds})
	if len(rel) != 1 || rel[0].Count != 6 {
		t.Errorf("released %+v, want 6", rel)
	}
	if diff := cmp.Diff([]string{"c4", "c5", "c6", "c7", "c8", "c9"}, w.take()); diff != "" {
		t.Errorf("notified of the release (-want +got):\n%s", diff)
	}
	if n := presentNames(f, legacyStream, cds); n != 3 {
		t.Errorf("present after the release: %d, want 3 (c0, c2, c3)", n)
	}
	if d := f.c.Deferrals(); len(d) != 0 || len(f.c.DeferredCounts()) != 0 {
		t.Errorf("Deferrals after the release = %+v", d)
	}
}

// What ends a deferral besides a release: an Unguarded update removes
// deferred resources; a lapsed TTL removes them; a new revision replaces
// one.
func TestDeferralEnds(t *testing.T) {
	f, g, w := guardFixture(t, 10)
	g.set("deletion_share")
	f.c.Apply(Update{Link: legacyStream, TypeURL: cds, Removed: []string{"c0", "c1", "c2", "c3", "c4", "c5"}})
	w.take()
	// A new revision of c0.
	f.c.Apply(Update{Link: legacyStream, TypeURL: cds, Resources: clusters(0, 1, "2")})
	if diff := cmp.Diff([]string{"c0"}, w.take()); diff != "" {
		t.Errorf("notified (-want +got):\n%s", diff)
	}
	if d := f.c.DeferredCounts(); len(d) != 1 || d[0].Count != 5 {
		t.Errorf("DeferredCounts = %+v, want 5", d)
	}
	// The relay's own removal of everything (an authority removed).
	f.c.Apply(Update{Link: legacyStream, TypeURL: cds, FullState: true, Unguarded: true})
	if n := presentNames(f, legacyStream, cds); n != 0 {
		t.Errorf("present after an unguarded full state: %d, want 0", n)
	}
	if d := f.c.DeferredCounts(); len(d) != 0 {
		t.Errorf("DeferredCounts = %+v, want none", d)
	}
	if asked, _ := g.take(); len(asked) != 1 {
		t.Errorf("asked %v: the unguarded update must not ask", asked)
	}
}

func TestDeferredTTLLapses(t *testing.T) {
	f, g, w := guardFixture(t, 0)
	r := withTTL(res("t", "1", 4), 10*time.Second, f.now)
	f.c.Apply(Update{Link: legacyStream, TypeURL: cds, Resources: []*Resource{r}})
	w.take()
	g.set("deletion_empty")
	f.c.Apply(Update{Link: legacyStream, TypeURL: cds, Removed: []string{"t"}})
	if n := presentNames(f, legacyStream, cds); n != 1 {
		t.Fatalf("present = %d, want t deferred", n)
	}
	f.now = f.now.Add(10 * time.Second)
	f.timers.fire(t)
	if got := w.take(); !cmp.Equal(got, []string{"*", "t"}) {
		t.Errorf("notified %v at the TTL, want [* t] (the wildcard is empty)", got)
	}
	if d := f.c.DeferredCounts(); len(d) != 0 {
		t.Errorf("DeferredCounts = %+v after the lapse", d)
	}
}
