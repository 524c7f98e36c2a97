package cache

import (
	"fmt"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestEncodingMadeOnce: an encoding is built once per key and shared;
// concurrent callers all get the kept bytes.
func TestEncodingMadeOnce(t *testing.T) {
	r := &Resource{Name: "r"}
	builds := 0
	first := r.Encoding("delta", func() any { builds++; return []byte("delta bytes") }).([]byte)
	again := r.Encoding("delta", func() any { builds++; return []byte("other") }).([]byte)
	if builds != 1 || &first[0] != &again[0] {
		t.Fatalf("second lookup built again (builds = %d) or returned other bytes %q", builds, again)
	}
	if got := r.Encoding("sotw", func() any { return "sotw bytes" }); got != "sotw bytes" {
		t.Fatalf("second key = %q", got)
	}

	var wg sync.WaitGroup
	got := make([][]byte, 8)
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i] = r.Encoding("raced", func() any { return []byte(fmt.Sprint(i)) }).([]byte)
		}()
	}
	wg.Wait()
	for i := range got {
		if &got[i][0] != &got[0][0] {
			t.Fatalf("racing callers got different bytes: %q and %q", got[0], got[i])
		}
	}
}

// TestEncodingBounded: past maxEncodings keys a revision keeps nothing
// more (a client spelling names its own way cannot grow it), and still
// gets its encoding.
func TestEncodingBounded(t *testing.T) {
	r := &Resource{Name: "r"}
	for i := range maxEncodings + 5 {
		want := fmt.Sprint("name-", i)
		if got := r.Encoding(want, func() any { return want }); got != want {
			t.Fatalf("Encoding(%q) = %q", want, got)
		}
	}
	if n := r.Encoded.v.Load().(*encodings).len(); n != maxEncodings {
		t.Fatalf("kept %d encodings, want the bound %d", n, maxEncodings)
	}
}

// TestEncodingsNotContent: two revisions differing only in what was
// encoded of them compare equal.
func TestEncodingsNotContent(t *testing.T) {
	a, b := &Resource{Name: "r", Version: "1"}, &Resource{Name: "r", Version: "1"}
	a.Encoding("k", func() any { return []byte("x") })
	if diff := cmp.Diff(a, b); diff != "" {
		t.Fatalf("encodings compared as content:\n%s", diff)
	}
}

// TestEncodingsDroppedWhenUnwatched: a revision nobody watches keeps no
// encodings (the LRU bounds its serialized bytes, not copies of them);
// they are made again when it is sent again.
func TestEncodingsDroppedWhenUnwatched(t *testing.T) {
	f := newFixture(t, unbounded)
	a := key(legacyStream, lds, "a")
	w := &fakeWatcher{}
	f.c.Watch(w, nil, a)
	f.c.Apply(Update{Link: legacyStream, TypeURL: lds, Resources: []*Resource{res("a", "1", 3)}})
	read := f.c.Lookup(nil, a)
	r, st := read.Res, read.State
	if st != StatePresent {
		t.Fatalf("Get state = %v, want present", st)
	}
	r.Encoding("delta", func() any { return "entry" })
	kept := func() int { e, _ := r.Encoded.v.Load().(*encodings); return e.len() }
	if kept() != 1 {
		t.Fatalf("watched revision keeps %d encodings, want 1", kept())
	}
	f.c.Unwatch(w, a)
	if n := kept(); n != 0 {
		t.Fatalf("unwatched revision keeps %d encodings, want none", n)
	}
	if got := r.Encoding("delta", func() any { return "again" }); got != "again" || kept() != 1 {
		t.Fatalf("Encoding after the drop = %v (kept %d), want it made and kept again", got, kept())
	}
}
