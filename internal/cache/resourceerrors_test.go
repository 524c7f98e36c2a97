package cache

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	statuspb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/testing/protocmp"
)

func rpcStatus(c codes.Code, msg string) *statuspb.Status {
	return &statuspb.Status{Code: int32(c), Message: msg}
}

// lookedUp is what Lookup returns, for comparing.
type lookedUp struct {
	State   State
	Version string // origin version of the revision; "" when none
	Err     *statuspb.Status
}

func lookup(c *Cache, k Key) lookedUp {
	read := c.Lookup(nil, k)
	r, st, err := read.Res, read.State, read.Err
	l := lookedUp{State: st, Err: err}
	if r != nil {
		l.Version = r.OriginVersion
	}
	return l
}

// An origin's resource errors are kept per key: NOT_FOUND is an absence
// with the origin's status, other codes keep the cached revision beside
// the error, and a later revision (even the same bytes) clears it.
func TestResourceErrorsKeptPerKey(t *testing.T) {
	unavailable := rpcStatus(codes.Unavailable, "backend down")
	notFound := rpcStatus(codes.NotFound, "no such listener")
	denied := rpcStatus(codes.PermissionDenied, "not yours")
	for _, tc := range []struct {
		name  string
		then  []Update // after "a" and "b" are present at version 1, "p" pending
		want  map[string]lookedUp
		wantN []string // notified by the last update
	}{
		{
			name: "transient error keeps the revision",
			then: []Update{{Errors: []ResourceError{{Name: "a", Detail: unavailable}}}},
			want: map[string]lookedUp{
				"a": {State: StatePresent, Version: "1", Err: unavailable},
				"b": {State: StatePresent, Version: "1"},
				"p": {State: StatePending},
			},
			wantN: []string{"a"},
		},
		{
			name: "error on a pending name keeps it pending",
			then: []Update{{Errors: []ResourceError{{Name: "p", Detail: denied}}}},
			want: map[string]lookedUp{
				"a": {State: StatePresent, Version: "1"},
				"b": {State: StatePresent, Version: "1"},
				"p": {State: StatePending, Err: denied},
			},
			wantN: []string{"p"},
		},
		{
			name: "not found is absent, with the origin's status",
			then: []Update{{Errors: []ResourceError{{Name: "a", Detail: notFound}, {Name: "p", Detail: notFound}}}},
			want: map[string]lookedUp{
				"a": {State: StateAbsent, Err: notFound},
				"b": {State: StatePresent, Version: "1"},
				"p": {State: StateAbsent, Err: notFound},
			},
			wantN: []string{"a", "p"},
		},
		{
			name: "a new revision clears the error",
			then: []Update{
				{Errors: []ResourceError{{Name: "a", Detail: unavailable}}},
				{Resources: []*Resource{res("a", "2", 4)}},
			},
			want: map[string]lookedUp{
				"a": {State: StatePresent, Version: "2"},
				"b": {State: StatePresent, Version: "1"},
				"p": {State: StatePending},
			},
			wantN: []string{"a"},
		},
		{
			name: "the same bytes again clear the error and notify",
			then: []Update{
				{Errors: []ResourceError{{Name: "a", Detail: unavailable}}},
				{Resources: []*Resource{res("a", "1", 4)}},
			},
			want: map[string]lookedUp{
				"a": {State: StatePresent, Version: "1"},
				"b": {State: StatePresent, Version: "1"},
				"p": {State: StatePending},
			},
			wantN: []string{"a"},
		},
		{
			name: "a removal clears a transient error",
			then: []Update{
				{Errors: []ResourceError{{Name: "a", Detail: unavailable}}},
				{Removed: []string{"a"}},
			},
			want: map[string]lookedUp{
				"a": {State: StateAbsent},
				"b": {State: StatePresent, Version: "1"},
				"p": {State: StatePending},
			},
			wantN: []string{"a"},
		},
		{
			name: "full state keeps a name with a transient error, drops the others",
			then: []Update{{FullState: true, Resources: []*Resource{res("b", "1", 4)},
				Errors: []ResourceError{{Name: "a", Detail: unavailable}}}},
			want: map[string]lookedUp{
				"a": {State: StatePresent, Version: "1", Err: unavailable},
				"b": {State: StatePresent, Version: "1"},
				"p": {State: StateAbsent},
			},
			wantN: []string{"a", "p"},
		},
		{
			name: "an error for a name nobody subscribed is not kept",
			then: []Update{{Errors: []ResourceError{{Name: "zz", Detail: unavailable}}}},
			want: map[string]lookedUp{
				"a":  {State: StatePresent, Version: "1"},
				"zz": {State: StatePending},
			},
			wantN: nil,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, unbounded)
			w := &fakeWatcher{}
			f.c.Watch(w, nil, key(legacyStream, lds, "a"), key(legacyStream, lds, "b"), key(legacyStream, lds, "p"))
			f.c.Apply(Update{Link: legacyStream, TypeURL: lds, Resources: []*Resource{res("a", "1", 4), res("b", "1", 4)}})
			for _, u := range tc.then {
				w.take()
				u.Link, u.TypeURL = legacyStream, lds
				f.c.Apply(u)
			}
			got := map[string]lookedUp{}
			for n := range tc.want {
				got[n] = lookup(f.c, key(legacyStream, lds, n))
			}
			if diff := cmp.Diff(tc.want, got, protocmp.Transform()); diff != "" {
				t.Errorf("lookups (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantN, w.take()); diff != "" {
				t.Errorf("notified (-want +got):\n%s", diff)
			}
		})
	}
}

// A late subscriber reads an error from the cache, and the Watch that
// finds it is a hit (no new origin request).
func TestResourceErrorForLateSubscriber(t *testing.T) {
	f := newFixture(t, unbounded)
	first := &fakeWatcher{}
	k := key(xdstpStream, lds, "xdstp://auth/envoy.config.listener.v3.Listener/l1")
	f.c.Watch(first, nil, k)
	f.sub.take()
	denied := rpcStatus(codes.PermissionDenied, "not yours")
	f.c.Apply(Update{Link: xdstpStream, TypeURL: lds, Errors: []ResourceError{{Name: k.Name, Detail: denied}}})
	f.c.Unwatch(first, k)

	late := &fakeWatcher{}
	hitsBefore := hits(f, lds)
	f.c.Watch(late, nil, k)
	if diff := cmp.Diff([]string{k.Name}, late.take()); diff != "" {
		t.Errorf("late watcher notified (-want +got):\n%s", diff)
	}
	if got := hits(f, lds) - hitsBefore; got != 1 {
		t.Errorf("cache hits moved by %v, want 1 (the error is an answer)", got)
	}
	if diff := cmp.Diff(lookedUp{State: StatePending, Err: denied}, lookup(f.c, k), protocmp.Transform()); diff != "" {
		t.Errorf("late lookup (-want +got):\n%s", diff)
	}
	if ops := f.sub.take(); len(ops) != 0 {
		t.Errorf("late subscriber caused upstream calls %v, want none (kept in the LRU, still subscribed)", ops)
	}
}

// A glob's own error is the collection's (LookupMembers); NOT_FOUND for a
// glob makes it known empty.
func TestResourceErrorsOnCollections(t *testing.T) {
	f := newFixture(t, unbounded)
	w := &fakeWatcher{}
	glob := key(xdstpStream, lds, "xdstp://auth/envoy.config.listener.v3.Listener/dir/*")
	f.c.Watch(w, nil, glob)
	unavailable := rpcStatus(codes.Unavailable, "shard down")
	f.c.Apply(Update{Link: xdstpStream, TypeURL: lds, Errors: []ResourceError{{Name: glob.Name, Detail: unavailable}}})
	if diff := cmp.Diff([]string{glob.Name}, w.take()); diff != "" {
		t.Errorf("notified (-want +got):\n%s", diff)
	}
	if l := f.c.LookupMembers(glob); l.State != StatePending || !cmp.Equal(l.Err, unavailable, protocmp.Transform()) {
		t.Errorf("LookupMembers = %v, %v; want pending with %v", l.State, l.Err, unavailable)
	}
	notFound := rpcStatus(codes.NotFound, "no such directory")
	f.c.Apply(Update{Link: xdstpStream, TypeURL: lds, Errors: []ResourceError{{Name: glob.Name, Detail: notFound}}})
	if l := f.c.LookupMembers(glob); l.State != StateAbsent || !cmp.Equal(l.Err, notFound, protocmp.Transform()) {
		t.Errorf("LookupMembers = %v, %v; want absent (known empty) with %v", l.State, l.Err, notFound)
	}
}

// A link no origin answers gives its pending keys the relay's
// UNAVAILABLE, as one change; present keys and keys of other links are
// untouched, and clearing it takes it off.
func TestLinkError(t *testing.T) {
	f := newFixture(t, unbounded)
	w := &fakeWatcher{}
	other := LinkID{Authority: "other"}
	glob := key(xdstpStream, lds, "xdstp://auth/envoy.config.listener.v3.Listener/dir/*")
	f.c.Watch(w, nil, key(legacyStream, lds, "a"), key(legacyStream, lds, "p"), key(other, lds, "o"))
	f.c.Watch(w, nil, glob)
	f.c.Apply(Update{Link: legacyStream, TypeURL: lds, Resources: []*Resource{res("a", "1", 4)}})
	w.take()
	w.takeFlushes()

	down := rpcStatus(codes.Unavailable, "no origin answers")
	f.c.SetLinkError(legacyStream, down)
	f.c.SetLinkError(xdstpStream, down)
	if diff := cmp.Diff([]string{"p", glob.Name}, w.take()); diff != "" {
		t.Errorf("notified (-want +got):\n%s", diff)
	}
	if n := len(w.takeFlushes()); n == 0 {
		t.Errorf("no Flush after the stream error")
	}
	want := map[Key]lookedUp{
		key(legacyStream, lds, "a"):       {State: StatePresent, Version: "1"},
		key(legacyStream, lds, "p"):       {State: StatePending, Err: down},
		key(legacyStream, lds, "unknown"): {State: StatePending, Err: down},
		key(other, lds, "o"):              {State: StatePending},
	}
	for k, wl := range want {
		if diff := cmp.Diff(wl, lookup(f.c, k), protocmp.Transform()); diff != "" {
			t.Errorf("%s (-want +got):\n%s", k.Name, diff)
		}
	}
	if l := f.c.LookupMembers(glob); !cmp.Equal(l.Err, down, protocmp.Transform()) {
		t.Errorf("glob error = %v, want %v", l.Err, down)
	}
	// The same outage again notifies nobody.
	f.c.SetLinkError(legacyStream, rpcStatus(codes.Unavailable, "still down"))
	if got := w.take(); len(got) != 0 {
		t.Errorf("notified again: %v", got)
	}
	// An origin's own error wins over the stream's.
	denied := rpcStatus(codes.PermissionDenied, "not yours")
	f.c.Apply(Update{Link: legacyStream, TypeURL: lds, Errors: []ResourceError{{Name: "p", Detail: denied}}})
	if diff := cmp.Diff(lookedUp{State: StatePending, Err: denied}, lookup(f.c, key(legacyStream, lds, "p")), protocmp.Transform()); diff != "" {
		t.Errorf("p (-want +got):\n%s", diff)
	}
	w.take()
	f.c.SetLinkError(legacyStream, nil)
	if got := w.take(); len(got) != 0 {
		t.Errorf("clearing notified %v, want nobody", got)
	}
	if diff := cmp.Diff(lookedUp{State: StatePending}, lookup(f.c, key(legacyStream, lds, "unknown")), protocmp.Transform()); diff != "" {
		t.Errorf("after clearing (-want +got):\n%s", diff)
	}
}

// A member's transient error is listed with the collection's members.
func TestResourceErrorsOfMembers(t *testing.T) {
	f := newFixture(t, unbounded)
	w := &fakeWatcher{}
	glob := key(xdstpStream, lds, "xdstp://auth/envoy.config.listener.v3.Listener/dir/*")
	m1, m2 := "xdstp://auth/envoy.config.listener.v3.Listener/dir/m1", "xdstp://auth/envoy.config.listener.v3.Listener/dir/m2"
	f.c.Watch(w, nil, glob)
	f.c.Apply(Update{Link: xdstpStream, TypeURL: lds, Resources: []*Resource{res(m1, "1", 4), res(m2, "1", 4)}, Complete: []string{glob.Name}})
	w.take()
	unavailable := rpcStatus(codes.Unavailable, "m1's backend down")
	f.c.Apply(Update{Link: xdstpStream, TypeURL: lds, Errors: []ResourceError{{Name: m1, Detail: unavailable}}})
	if diff := cmp.Diff([]string{m1}, w.take()); diff != "" {
		t.Errorf("glob watcher notified (-want +got):\n%s", diff)
	}
	l := f.c.LookupMembers(glob)
	if l.State != StatePresent || len(l.Members) != 2 || l.Err != nil {
		t.Fatalf("LookupMembers = %+v, want both members, no error of its own", l)
	}
	got := map[string]*statuspb.Status{}
	for r, err := range l.MemberErrs {
		got[r.Name] = err
	}
	if diff := cmp.Diff(map[string]*statuspb.Status{m1: unavailable}, got, protocmp.Transform()); diff != "" {
		t.Errorf("member errors (-want +got):\n%s", diff)
	}
}

// /debug/cache shows each key's error: the origin's, or its stream's while
// pending; a present key of a stream without an origin shows none.
func TestInspectShowsErrors(t *testing.T) {
	f := newFixture(t, unbounded)
	w := &fakeWatcher{}
	f.c.Watch(w, nil, key(legacyStream, lds, "a"), key(legacyStream, lds, "b"), key(legacyStream, lds, "p"))
	f.c.Apply(Update{Link: legacyStream, TypeURL: lds, Resources: []*Resource{res("a", "1", 4), res("b", "1", 4)},
		Errors: []ResourceError{{Name: "a", Detail: rpcStatus(codes.PermissionDenied, strings.Repeat("x", 300))}}})
	f.c.SetLinkError(legacyStream, rpcStatus(codes.Unavailable, "no origin answers"))
	got := map[string]string{}
	for _, e := range f.c.Inspect(Filter{}).Entries {
		got[e.Name] = e.Error
	}
	want := map[string]string{
		"a": "PermissionDenied: " + strings.Repeat("x", 256) + "…",
		"b": "",
		"p": "Unavailable: no origin answers",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("errors shown (-want +got):\n%s", diff)
	}
}
