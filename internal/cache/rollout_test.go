package cache

import (
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/xds-relay/xds-relay/internal/propagation"
)

// fakeGate rolls every update out, starting under hold, and records what
// it is told.
type fakeGate struct {
	mu     sync.Mutex
	hold   *Hold          // guarded by mu
	starts []RolloutStart // guarded by mu
}

func (g *fakeGate) Begin(LinkID, string) (bool, *Hold) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return true, g.hold
}

func (g *fakeGate) Began(s RolloutStart) {
	g.mu.Lock()
	g.starts = append(g.starts, s)
	g.mu.Unlock()
}

func (g *fakeGate) take() []RolloutStart {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := g.starts
	g.starts = nil
	return out
}

// gateFixture is a cache with a fakeGate and a ledger.
func gateFixture(t *testing.T) (*fixture, *fakeGate) {
	t.Helper()
	g := &fakeGate{}
	opts := unbounded
	opts.Gate = g
	opts.Ledger = propagation.New(propagation.Options{})
	return newFixture(t, opts), g
}

// ack has one client stream ACK r's change, as a session settles it.
func ack(r *Resource) {
	var tr propagation.Tracker
	tr.Sent(r.Change, 1, 1, time.Now())
	tr.Answered(1, 1, nil, time.Now())
}

// A rolling revision keeps the key's last accepted revision beside it:
// the one before when it was settled or ACKed and not held, else the one
// kept before (the next version starts afresh); both count in the bytes;
// the origin sending the last accepted revision again brings the key back
// to that very revision, with one revision counted; Settle drops the
// other.
func TestRolloutKeepsLastAccepted(t *testing.T) {
	f, g := gateFixture(t)
	k := key(legacyStream, lds, "a")
	f.c.Watch(&fakeWatcher{}, nil, k)
	apply := func(version string) *Resource {
		f.c.Apply(Update{Link: legacyStream, TypeURL: lds, Resources: []*Resource{res("a", version, 100)}})
		r := f.c.Lookup(nil, k).Res
		return r
	}
	accepted := func() *Resource {
		ro := f.c.Lookup(nil, k).Rollout
		return ro.Accepted
	}
	v1 := apply("1")
	if accepted() != nil {
		t.Fatalf("a first version keeps %v beside it, want nothing", accepted())
	}
	one := f.c.Stats().Bytes
	v2 := apply("2") // v1 neither settled nor ACKed: nothing to go back to
	if accepted() != nil {
		t.Errorf("v1 unconfirmed: accepted %v, want none", accepted())
	}
	ack(v2)
	v3 := apply("3")
	if accepted() != v2 {
		t.Errorf("v2 ACKed, replaced by v3: accepted %v, want v2", accepted())
	}
	if got := f.c.Stats().Bytes; got != one+int64(v2.Size()) {
		t.Errorf("bytes %d with two revisions, want %d + %d", got, one, v2.Size())
	}
	// v3 held by the breaker, then replaced: v2 stays the one to go back to.
	f.c.SetHold([]Revision{{Key: k, Res: v3}}, &Hold{Reason: HoldBreaker})
	ack(v3)
	apply("4")
	if accepted() != v2 {
		t.Errorf("v3 held, replaced by v4: accepted %v, want v2 still", accepted())
	}
	g.take()
	// The origin sends v2 again: the key is back at that very revision.
	if back := apply("2"); back != v2 || accepted() != nil {
		t.Errorf("v2 again: newest %p (v2 is %p), accepted %v; want v2 itself, nothing beside it", back, v2, accepted())
	}
	if starts := g.take(); len(starts) != 1 || !cmp.Equal(starts[0].Back, []Key{k}) || len(starts[0].Revisions) != 0 {
		t.Errorf("the gate was told %+v, want %v back, nothing rolling out", starts, k)
	}
	if got := f.c.Stats().Bytes; got != one {
		t.Errorf("bytes %d back at one revision, want %d", got, one)
	}
	v5 := apply("5")
	if accepted() != v2 {
		t.Fatalf("accepted %v, want v2", accepted())
	}
	if n := f.c.Settle([]Revision{{Key: k, Res: v1}}); n != 0 {
		t.Errorf("Settle of a version no longer the newest: %d, want 0", n)
	}
	if n := f.c.Settle([]Revision{{Key: k, Res: v5}}); n != 1 || accepted() != nil || f.c.Stats().Bytes != one {
		t.Errorf("Settle: %d settled, accepted %v, bytes %d; want 1, none, %d", n, accepted(), f.c.Stats().Bytes, one)
	}
	// Settled, then replaced: it is the one to go back to.
	apply("6")
	if accepted() != v5 {
		t.Errorf("v5 settled, replaced: accepted %v, want v5", accepted())
	}
	_ = v1
}

// closed admits nobody; open everybody.
type wavesAdmit bool

func (w wavesAdmit) Admits(Viewer) bool { return bool(w) }

// Serve decides, per client, which revision it is sent.
func TestRolloutServe(t *testing.T) {
	newest, acc, older := &Resource{Name: "a", Version: "n"}, &Resource{Name: "a", Version: "acc"}, &Resource{Name: "a", Version: "old"}
	breaker := &Hold{Reason: HoldBreaker}
	closed, open := &Hold{Reason: HoldWave, Waves: wavesAdmit(false)}, &Hold{Reason: HoldWave, Waves: wavesAdmit(true)}
	tests := []struct {
		name       string
		ro         Rollout
		held       *Resource
		want       *Resource
		wantReason HoldReason
	}{
		{"not held", Rollout{Accepted: acc}, older, newest, HoldNone},
		{"breaker: the last accepted", Rollout{Hold: breaker, Accepted: acc}, newest, acc, HoldBreaker},
		{"breaker, none accepted: keeps what it holds", Rollout{Hold: breaker}, older, older, HoldBreaker},
		{"breaker, none accepted, holds the newest: keeps it", Rollout{Hold: breaker}, newest, newest, HoldNone},
		{"breaker, none accepted, holds nothing: nothing", Rollout{Hold: breaker}, nil, nil, HoldBreaker},
		{"wave closed: the last accepted", Rollout{Hold: closed, Accepted: acc}, nil, acc, HoldWave},
		{"wave closed, none accepted: never kept waiting", Rollout{Hold: closed}, nil, newest, HoldNone},
		{"wave open", Rollout{Hold: open, Accepted: acc}, acc, newest, HoldNone},
	}
	for _, tt := range tests {
		got, why := tt.ro.Serve(newest, ViewerOf("n1", "c"), tt.held)
		if got != tt.want || why != tt.wantReason {
			t.Errorf("%s: served %v (%s), want %v (%s)", tt.name, got, why, tt.want, tt.wantReason)
		}
	}
	if a, b := ViewerOf("n1", "x"), ViewerOf("n1", "y"); a.Hash != b.Hash || a.Hash == ViewerOf("n2", "x").Hash {
		t.Errorf("a node id's hash must be stable and its own")
	}
}

// A hold set, changed or settled is one change to the key's watchers and
// its collections'; a read returns it (members too); a revision no longer
// the newest is not held; a change that starts held is not offered to the
// fan-out's fast path (no Revisions).
func TestRolloutHoldNotifies(t *testing.T) {
	f, g := gateFixture(t)
	k := key(legacyStream, cds, "c0")
	byName, byWildcard := &fakeWatcher{}, &fakeWatcher{}
	f.c.Watch(byName, nil, k)
	f.c.Watch(byWildcard, nil, key(legacyStream, cds, Wildcard))
	f.c.Apply(Update{Link: legacyStream, TypeURL: cds, FullState: true, Complete: []string{Wildcard}, Resources: clusters(0, 2, "1")})
	v1 := f.c.Lookup(nil, k).Res
	f.c.Settle([]Revision{{Key: k, Res: v1}})
	g.mu.Lock()
	g.hold = &Hold{Reason: HoldWave, Waves: wavesAdmit(false)}
	g.mu.Unlock()
	byName.takeFlushes()
	f.c.Apply(Update{Link: legacyStream, TypeURL: cds, Resources: []*Resource{res("c0", "2", 4)}})
	fl := byName.takeFlushes()
	if len(fl) == 0 || fl[len(fl)-1].cs == nil || fl[len(fl)-1].cs.Revisions() != nil {
		t.Errorf("a change starting held: flushes %+v, want its set without Revisions (no fast path)", fl)
	}
	v2 := f.c.Lookup(nil, k).Res
	byName.take()
	byWildcard.take()

	breaker := &Hold{Reason: HoldBreaker}
	if n := f.c.SetHold([]Revision{{Key: k, Res: v2}, {Key: k, Res: v1}}, breaker); n != 1 {
		t.Errorf("SetHold: %d set, want 1 (v1 is not the newest)", n)
	}
	if got, want := byName.take(), []string{"c0"}; !cmp.Equal(got, want) {
		t.Errorf("the key's watcher was told %v, want %v", got, want)
	}
	if got, want := byWildcard.take(), []string{"c0"}; !cmp.Equal(got, want) {
		t.Errorf("the wildcard's watcher was told %v, want %v", got, want)
	}
	read := f.c.Lookup(nil, k)
	r, ro := read.Res, read.Rollout
	if r != v2 || ro.Hold != breaker || ro.Accepted != v1 {
		t.Errorf("LookupRollout: %v %+v, want v2 held by the breaker, v1 accepted", r, ro)
	}
	l := f.c.LookupMembers(key(legacyStream, cds, Wildcard))
	if got := l.Rollouts[v2]; len(l.Rollouts) != 1 || got.Hold != breaker || got.Accepted != v1 {
		t.Errorf("LookupMembers' rollouts %+v, want c0's alone", l.Rollouts)
	}
	if n := f.c.Settle([]Revision{{Key: k, Res: v2}}); n != 1 {
		t.Errorf("Settle: %d, want 1", n)
	}
	if got := byName.take(); !cmp.Equal(got, []string{"c0"}) {
		t.Errorf("settling a held version told %v, want c0", got)
	}
	if ro := f.c.Lookup(nil, k).Rollout; ro.Hold != nil || ro.Accepted != nil {
		t.Errorf("settled: %+v, want no hold, nothing beside it", ro)
	}
}
