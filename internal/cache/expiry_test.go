package cache

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/xds-relay/xds-relay/internal/xdstest"
	"github.com/xds-relay/xds-relay/internal/xdstype"
)

// fakeTimers stands in for time.AfterFunc: nothing fires by itself; the
// test fires the armed timer when it has moved the fixture's clock.
type fakeTimers struct {
	mu     sync.Mutex
	timers []*fakeTimer // every timer ever armed; guarded by mu
}

type fakeTimer struct {
	d       time.Duration
	f       func()
	stopped bool // guarded by fakeTimers.mu
	fired   bool // guarded by fakeTimers.mu
}

func (ft *fakeTimers) afterFunc(d time.Duration, f func()) func() bool {
	t := &fakeTimer{d: d, f: f}
	ft.mu.Lock()
	ft.timers = append(ft.timers, t)
	ft.mu.Unlock()
	return func() bool {
		ft.mu.Lock()
		defer ft.mu.Unlock()
		if t.fired || t.stopped {
			return false
		}
		t.stopped = true
		return true
	}
}

// live returns the timers neither stopped nor fired.
func (ft *fakeTimers) live() []*fakeTimer {
	ft.mu.Lock()
	defer ft.mu.Unlock()
	var out []*fakeTimer
	for _, t := range ft.timers {
		if !t.stopped && !t.fired {
			out = append(out, t)
		}
	}
	return out
}

// armed returns the delay of the one live timer, 0 when none is live; more
// than one live timer fails the test (the cache keeps one).
func (ft *fakeTimers) armed(t testing.TB) time.Duration {
	t.Helper()
	live := ft.live()
	switch len(live) {
	case 0:
		return 0
	case 1:
		return live[0].d
	}
	t.Fatalf("%d timers armed at once, want at most 1", len(live))
	return 0
}

// fire runs the live timer's function, as time.AfterFunc would when its
// time comes (here on the test goroutine, so its notifications are done
// when fire returns).
func (ft *fakeTimers) fire(t testing.TB) {
	t.Helper()
	live := ft.live()
	if len(live) != 1 {
		t.Fatalf("%d timers armed, want 1 to fire", len(live))
	}
	ft.mu.Lock()
	live[0].fired = true
	ft.mu.Unlock()
	live[0].f()
}

// withTTL is r with a TTL, arrived at.
func withTTL(r *Resource, ttl time.Duration, at time.Time) *Resource {
	r.TTL = durationpb.New(ttl)
	r.Arrived = at
	return r
}

// ttlStep happens at a time after the start: an Update is applied, or else
// the armed timer fires.
type ttlStep struct {
	at           time.Duration
	apply        func(now time.Time) Update // nil: fire the timer
	wantNotified []string
	wantArmed    time.Duration // delay of the timer armed after the step; 0: none
}

func TestExpiryNotifies(t *testing.T) {
	const g = ldsT + "dir/*"
	up := func(rs ...*Resource) func(time.Time) Update {
		return func(time.Time) Update { return Update{Link: legacyStream, TypeURL: lds, Resources: rs} }
	}
	for _, tc := range []struct {
		name  string
		watch []Key
		steps []ttlStep
		// wantAbsent and wantPresent are checked with Get after the steps.
		wantAbsent, wantPresent []Key
		// wantEmpty: collections known empty after the steps.
		wantEmpty       []Key
		wantExpirations float64
	}{
		{
			name:  "the watcher hears the resource expire",
			watch: []Key{key(legacyStream, lds, "a")},
			steps: []ttlStep{
				{at: 0, apply: func(now time.Time) Update { return up(withTTL(res("a", "1", 1), 10*time.Second, now))(now) }, wantNotified: []string{"a"}, wantArmed: 10 * time.Second},
				{at: 10 * time.Second, wantNotified: []string{"a"}},
			},
			wantAbsent:      []Key{key(legacyStream, lds, "a")},
			wantExpirations: 1,
		},
		{
			name:  "a heartbeat postpones expiry without re-arming",
			watch: []Key{key(legacyStream, lds, "a")},
			steps: []ttlStep{
				{at: 0, apply: func(now time.Time) Update { return up(withTTL(res("a", "1", 1), 10*time.Second, now))(now) }, wantNotified: []string{"a"}, wantArmed: 10 * time.Second},
				{at: 9 * time.Second, apply: func(now time.Time) Update {
					return up(&Resource{Name: "a", Version: "1", Heartbeat: true, TTL: durationpb.New(10 * time.Second), Arrived: now})(now)
				}, wantNotified: []string{"a"}, wantArmed: 10 * time.Second},
				{at: 10 * time.Second, wantArmed: 9 * time.Second},
				{at: 19 * time.Second, wantNotified: []string{"a"}},
			},
			wantAbsent:      []Key{key(legacyStream, lds, "a")},
			wantExpirations: 1,
		},
		{
			name:  "earliest first, one timer re-armed for the next",
			watch: []Key{key(legacyStream, lds, "a"), key(legacyStream, lds, "b")},
			steps: []ttlStep{
				{at: 0, apply: func(now time.Time) Update {
					return up(withTTL(res("a", "1", 1), 20*time.Second, now), withTTL(res("b", "1", 1), 5*time.Second, now))(now)
				}, wantNotified: []string{"a", "b"}, wantArmed: 5 * time.Second},
				{at: 5 * time.Second, wantNotified: []string{"b"}, wantArmed: 15 * time.Second},
				{at: 20 * time.Second, wantNotified: []string{"a"}},
			},
			wantAbsent:      []Key{key(legacyStream, lds, "a"), key(legacyStream, lds, "b")},
			wantExpirations: 2,
		},
		{
			name:  "an earlier expiry re-arms the timer",
			watch: []Key{key(legacyStream, lds, "a"), key(legacyStream, lds, "b")},
			steps: []ttlStep{
				{at: 0, apply: func(now time.Time) Update { return up(withTTL(res("a", "1", 1), 20*time.Second, now))(now) }, wantNotified: []string{"a"}, wantArmed: 20 * time.Second},
				{at: time.Second, apply: func(now time.Time) Update { return up(withTTL(res("b", "1", 1), 5*time.Second, now))(now) }, wantNotified: []string{"b"}, wantArmed: 5 * time.Second},
				{at: 6 * time.Second, wantNotified: []string{"b"}, wantArmed: 14 * time.Second},
			},
			wantAbsent:      []Key{key(legacyStream, lds, "b")},
			wantPresent:     []Key{key(legacyStream, lds, "a")},
			wantExpirations: 1,
		},
		{
			name:  "an update without TTL cancels expiry",
			watch: []Key{key(legacyStream, lds, "a")},
			steps: []ttlStep{
				{at: 0, apply: func(now time.Time) Update { return up(withTTL(res("a", "1", 1), 10*time.Second, now))(now) }, wantNotified: []string{"a"}, wantArmed: 10 * time.Second},
				{at: 3 * time.Second, apply: up(res("a", "2", 1)), wantNotified: []string{"a"}, wantArmed: 10 * time.Second},
				{at: 10 * time.Second},
			},
			wantPresent: []Key{key(legacyStream, lds, "a")},
		},
		{
			name:  "a late heartbeat of the lapsed version brings it back",
			watch: []Key{key(legacyStream, lds, "a")},
			steps: []ttlStep{
				{at: 0, apply: func(now time.Time) Update { return up(withTTL(res("a", "1", 1), 10*time.Second, now))(now) }, wantNotified: []string{"a"}, wantArmed: 10 * time.Second},
				{at: 10 * time.Second, wantNotified: []string{"a"}},
				{at: 11 * time.Second, apply: func(now time.Time) Update {
					return up(&Resource{Name: "a", OriginVersion: "1", Heartbeat: true, TTL: durationpb.New(10 * time.Second), Arrived: now})(now)
				}, wantNotified: []string{"a"}, wantArmed: 10 * time.Second},
			},
			wantPresent:     []Key{key(legacyStream, lds, "a")},
			wantExpirations: 1,
		},
		{
			name:  "a heartbeat of another version after expiry does not bring it back",
			watch: []Key{key(legacyStream, lds, "a")},
			steps: []ttlStep{
				{at: 0, apply: func(now time.Time) Update { return up(withTTL(res("a", "1", 1), 10*time.Second, now))(now) }, wantNotified: []string{"a"}, wantArmed: 10 * time.Second},
				// Before the timer fires: Apply expires it first.
				{at: 11 * time.Second, apply: func(now time.Time) Update {
					return up(&Resource{Name: "a", OriginVersion: "2", Heartbeat: true, TTL: durationpb.New(10 * time.Second), Arrived: now})(now)
				}, wantNotified: []string{"a"}, wantArmed: 10 * time.Second},
				{at: 11 * time.Second},
			},
			wantAbsent:      []Key{key(legacyStream, lds, "a")},
			wantExpirations: 1,
		},
		{
			name:  "a glob watcher hears the member go and the glob become empty",
			watch: []Key{key(xdstpStream, lds, g)},
			steps: []ttlStep{
				{at: 0, apply: func(now time.Time) Update {
					return Update{Link: xdstpStream, TypeURL: lds, Complete: []string{g},
						Resources: []*Resource{withTTL(res(ldsT+"dir/l1", "1", 1), 10*time.Second, now)}}
				}, wantNotified: []string{ldsT + "dir/l1"}, wantArmed: 10 * time.Second},
				{at: 10 * time.Second, wantNotified: []string{ldsT + "dir/*", ldsT + "dir/l1"}},
			},
			wantAbsent:      []Key{key(xdstpStream, lds, ldsT+"dir/l1")},
			wantEmpty:       []Key{key(xdstpStream, lds, g)},
			wantExpirations: 1,
		},
		{
			name:  "a wildcard watcher hears the member go and the type become empty",
			watch: []Key{key(legacyStream, lds, Wildcard)},
			steps: []ttlStep{
				{at: 0, apply: func(now time.Time) Update {
					return Update{Link: legacyStream, TypeURL: lds, Complete: []string{Wildcard}, FullState: true,
						Resources: []*Resource{withTTL(res("a", "1", 1), 10*time.Second, now)}}
				}, wantNotified: []string{"a"}, wantArmed: 10 * time.Second},
				{at: 10 * time.Second, wantNotified: []string{"*", "a"}},
			},
			// a came only through the Wildcard: it leaves the type, and
			// the cache says nothing of it by name (Get: pending).
			wantEmpty:       []Key{key(legacyStream, lds, Wildcard)},
			wantExpirations: 1,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, unbounded)
			start := f.now
			w := &fakeWatcher{}
			f.c.Watch(w, nil, tc.watch...)
			w.take()
			for i, s := range tc.steps {
				f.now = start.Add(s.at)
				if s.apply != nil {
					f.c.Apply(s.apply(f.now))
				} else {
					f.timers.fire(t)
				}
				if diff := cmp.Diff(s.wantNotified, w.take()); diff != "" {
					t.Errorf("step %d at %v: notified (-want +got):\n%s", i, s.at, diff)
				}
				if got := f.timers.armed(t); got != s.wantArmed {
					t.Errorf("step %d at %v: timer armed for %v, want %v", i, s.at, got, s.wantArmed)
				}
			}
			for _, k := range tc.wantAbsent {
				if st := f.c.Lookup(nil, k).State; st != StateAbsent {
					t.Errorf("%s: %v, want absent", k.Name, st)
				}
			}
			for _, k := range tc.wantPresent {
				if st := f.c.Lookup(nil, k).State; st != StatePresent {
					t.Errorf("%s: %v, want present", k.Name, st)
				}
			}
			for _, k := range tc.wantEmpty {
				if read := f.c.LookupMembers(k); read.State != StateAbsent || len(read.Members) != 0 {
					t.Errorf("%s: %d members %v, want known empty", k.Name, len(read.Members), read.State)
				}
			}
			if got := testutil.ToFloat64(f.c.m.expirations.WithLabelValues(xdstype.Label(lds))); got != tc.wantExpirations {
				t.Errorf("expirations_total = %v, want %v", got, tc.wantExpirations)
			}
		})
	}
}

// TestExpiryCloseStopsTimer: Close stops the armed timer and later updates
// arm none; a lapsed TTL still reads as absent.
func TestExpiryCloseStopsTimer(t *testing.T) {
	f := newFixture(t, unbounded)
	a := key(legacyStream, lds, "a")
	f.c.Watch(&fakeWatcher{}, nil, a)
	f.c.Apply(Update{Link: legacyStream, TypeURL: lds, Resources: []*Resource{withTTL(res("a", "1", 1), 10*time.Second, f.now)}})
	if got := f.timers.armed(t); got != 10*time.Second {
		t.Fatalf("timer armed for %v, want 10s", got)
	}
	f.c.Close()
	if got := len(f.timers.live()); got != 0 {
		t.Errorf("%d timers live after Close, want 0", got)
	}
	f.c.Apply(Update{Link: legacyStream, TypeURL: lds, Resources: []*Resource{withTTL(res("b", "1", 1), 5*time.Second, f.now)}})
	if got := len(f.timers.live()); got != 0 {
		t.Errorf("%d timers live after an Apply after Close, want 0", got)
	}
	f.now = f.now.Add(10 * time.Second)
	if st := f.c.Lookup(nil, a).State; st != StateAbsent {
		t.Errorf("after TTL, closed cache: %v, want absent", st)
	}
}

// chanWatcher pokes a channel on every notification.
type chanWatcher struct{ c chan Key }

func (w chanWatcher) Notify(k Key) {
	select {
	case w.c <- k:
	default:
	}
}

func (chanWatcher) Flush(*ChangeSet) {}

// TestExpiryRealTimer: with the default time.AfterFunc and clock, a
// resource with a short TTL expires on its own and the watcher is told.
func TestExpiryRealTimer(t *testing.T) {
	c := New(Options{MaxResources: -1, MaxBytes: -1, Upstream: &fakeSubscriber{}})
	t.Cleanup(c.Close)
	a := key(legacyStream, lds, "a")
	w := chanWatcher{c: make(chan Key, 1)}
	c.Watch(w, nil, a)
	c.Apply(Update{Link: legacyStream, TypeURL: lds, Resources: []*Resource{withTTL(res("a", "1", 1), time.Millisecond, time.Now())}})
	xdstest.Await(t, "resource with a 1ms TTL expired", w.c, func() error {
		if st := c.Lookup(nil, a).State; st != StateAbsent {
			return fmt.Errorf("%v", st)
		}
		c.mu.Lock()
		n := len(c.expiries)
		c.mu.Unlock()
		if n != 0 {
			return fmt.Errorf("absent, but %d expiries pending: read as lapsed, not expired by the timer", n)
		}
		return nil
	})
}

// TestExpiryConcurrent: updates with short TTLs, heartbeats, reads and
// watches race the real timer; -race checks the locking, and Close waits
// for a firing in progress (goleak checks nothing is left).
func TestExpiryConcurrent(t *testing.T) {
	c := New(Options{MaxResources: 10, MaxBytes: -1, Upstream: &fakeSubscriber{}})
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w := &fakeWatcher{}
			for i := range 200 {
				k := key(legacyStream, lds, fmt.Sprintf("r-%d", (g*7+i)%20))
				c.Watch(w, nil, k, key(legacyStream, lds, Wildcard))
				r := withTTL(res(k.Name, fmt.Sprint(i), 1), time.Duration(i%3+1)*time.Millisecond, time.Now())
				if i%4 == 0 {
					r = &Resource{Name: k.Name, Version: r.Version, Heartbeat: true, TTL: r.TTL, Arrived: r.Arrived}
				}
				c.Apply(Update{Link: legacyStream, TypeURL: lds, Resources: []*Resource{r}})
				c.Lookup(nil, k)
				c.LookupMembers(key(legacyStream, lds, Wildcard))
				c.Unwatch(w, k)
			}
			c.Unwatch(w, key(legacyStream, lds, Wildcard))
		}()
	}
	wg.Wait()
	c.Close()
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, e := range c.expiries {
		if e.heapPos != i+1 || e.state != StatePresent || e.expires.IsZero() || c.entries[e.key] != e {
			t.Errorf("expiries[%d]: %s pos %d state %v expires %v", i, e.key.Name, e.heapPos, e.state, e.expires)
		}
	}
	ttlEntries := 0
	for _, e := range c.entries {
		if !e.expires.IsZero() {
			ttlEntries++
		}
	}
	if ttlEntries != len(c.expiries) {
		t.Errorf("%d entries have a TTL, %d are in the expiry heap", ttlEntries, len(c.expiries))
	}
}
