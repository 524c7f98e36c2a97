package cache

import (
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestStats: the totals follow Apply, removals and watches (hits, misses).
func TestStats(t *testing.T) {
	f := newFixture(t, unbounded)
	w := &fakeWatcher{}
	f.c.Watch(w, nil, key(legacyStream, lds, "a"), key(legacyStream, lds, "b"))
	f.c.Apply(Update{Link: legacyStream, TypeURL: lds, Resources: []*Resource{res("a", "1", 10), res("b", "1", 5)}})
	f.c.Watch(&fakeWatcher{}, nil, key(legacyStream, lds, "a"))
	f.c.Apply(Update{Link: legacyStream, TypeURL: lds, Resources: []*Resource{res("a", "2", 7)}, Removed: []string{"b"}})
	f.c.Unwatch(w, key(legacyStream, lds, "b"))

	got := f.c.Stats()
	want := Stats{Resources: 1, Bytes: heldBytes("a", "2", 7), Hits: 1, Misses: 2, Keys: 2, WatchedKeys: 1, Unwatched: 1}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("Stats (-want +got):\n%s", d)
	}
	if r := got.HitRatio(); r < 0.33 || r > 0.34 {
		t.Errorf("HitRatio = %v, want 1/3", r)
	}
}

// TestInspect: a listing is filtered by prefix, authority and type,
// sorted, cut at its limit with truncated set, and shows state, versions,
// bytes and watchers.
func TestInspect(t *testing.T) {
	f := newFixture(t, unbounded)
	w1, w2 := &fakeWatcher{}, &fakeWatcher{}
	other := LinkID{Authority: "other"}
	var names []string
	for i := range 5 {
		names = append(names, fmt.Sprintf("svc-%d", i))
	}
	for _, n := range names {
		f.c.Watch(w1, nil, key(legacyStream, lds, n))
	}
	f.c.Watch(w2, nil, key(legacyStream, lds, "svc-0"), key(legacyStream, cds, "svc-x"), key(other, lds, "svc-9"), key(legacyStream, lds, "zz"))
	f.c.Apply(Update{Link: legacyStream, TypeURL: lds, Resources: []*Resource{res("svc-0", "v7", 12), res("svc-1", "v1", 3)}})

	list := f.c.Inspect(Filter{Prefix: "svc-", Authority: "auth", TypeURL: lds, Limit: 3})
	if list.Matched != 5 || !list.Truncated || list.Limit != 3 || len(list.Entries) != 3 {
		t.Fatalf("listing: matched %d truncated %v limit %d entries %d, want 5 true 3 3", list.Matched, list.Truncated, list.Limit, len(list.Entries))
	}
	r0 := withVersion(res("svc-0", "v7", 12))
	want := []EntryInfo{
		{Authority: "auth", Group: "g1", TypeURL: lds, Name: "svc-0", State: "present", Version: r0.Version, OriginVersion: "v7", Bytes: int(heldBytes("svc-0", "v7", 12)), Watchers: 2, Held: true},
		{Authority: "auth", Group: "g1", TypeURL: lds, Name: "svc-1", State: "present", Version: withVersion(res("svc-1", "v1", 3)).Version, OriginVersion: "v1", Bytes: int(heldBytes("svc-1", "v1", 3)), Watchers: 1, Held: true},
		{Authority: "auth", Group: "g1", TypeURL: lds, Name: "svc-2", State: "pending", Watchers: 1, Held: true},
	}
	if d := cmp.Diff(want, list.Entries); d != "" {
		t.Errorf("entries (-want +got):\n%s", d)
	}

	all := f.c.Inspect(Filter{})
	if all.Matched != 8 || all.Truncated || len(all.Entries) != 8 || all.Limit != DefaultInspectLimit {
		t.Errorf("unfiltered: matched %d truncated %v entries %d limit %d, want 8 false 8 %d", all.Matched, all.Truncated, len(all.Entries), all.Limit, DefaultInspectLimit)
	}
	if got := all.Entries[len(all.Entries)-1]; got.Authority != "other" {
		t.Errorf("last entry %+v, want authority other (sorted by authority first)", got)
	}
	if got := f.c.Inspect(Filter{TypeURL: cds}); got.Matched != 1 || got.Entries[0].Name != "svc-x" {
		t.Errorf("type filter: %+v", got)
	}
}

// TestParseFilter: query parameters reach the filter; a bad one is an
// error that names the parameter (the relay answers it 400, with the
// listing as JSON otherwise: internal/relay TestStatusPages).
func TestParseFilter(t *testing.T) {
	f := newFixture(t, unbounded)
	w := &fakeWatcher{}
	for i := range 20 {
		f.c.Watch(w, nil, key(xdstpStream, lds, fmt.Sprintf("n%02d", i)))
	}
	get := func(q url.Values) (Listing, error) {
		flt, err := ParseFilter(q)
		if err != nil {
			return Listing{}, err
		}
		return f.c.Inspect(flt), nil
	}
	list, err := get(url.Values{"prefix": {"n1"}, "limit": {"4"}})
	if err != nil {
		t.Fatal(err)
	}
	if list.Matched != 10 || !list.Truncated || len(list.Entries) != 4 || list.Entries[0].Name != "n10" {
		t.Errorf("listing %+v, want 10 matched, 4 entries from n10, truncated", list)
	}

	for _, tc := range []struct {
		name string
		q    url.Values
		want string
	}{
		{"limit not a number", url.Values{"limit": {"many"}}, `limit: "many" is not an integer from 1 to 10000`},
		{"limit zero", url.Values{"limit": {"0"}}, `limit: "0" is not an integer`},
		{"limit over the maximum", url.Values{"limit": {"10001"}}, `limit: "10001" is not an integer from 1 to 10000`},
		{"prefix too long", url.Values{"prefix": {strings.Repeat("x", MaxInspectFilter+1)}}, "prefix: 2049 bytes, at most 2048"},
		{"type too long", url.Values{"type": {strings.Repeat("x", MaxInspectFilter+1)}}, "type: 2049 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := get(tc.q); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
	if _, err := get(url.Values{"limit": {fmt.Sprint(MaxInspectLimit)}}); err != nil {
		t.Errorf("limit at the maximum: %v", err)
	}
}
