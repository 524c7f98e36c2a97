package cache

import (
	"fmt"
	"runtime"
	"strings"
	"testing"

	statuspb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/xds-relay/xds-relay/internal/xdstest"
)

// TestSizeCountsWhatIsHeld: cache.max_bytes counts every byte a key holds
// (size.go), not only a revision's body: its metadata, aliases, cache
// control, TTL, names, the key's resource error, and a fixed overhead.
func TestSizeCountsWhatIsHeld(t *testing.T) {
	body := res("r", "1", 144)
	bare := int64(withVersion(res("r", "1", 144)).Size())
	if bare < 144+revisionOverhead {
		t.Errorf("a 144-byte revision counts %d bytes, want at least body and overhead (%d)", bare, 144+revisionOverhead)
	}
	for _, tc := range []struct {
		name  string
		r     *Resource
		least int64 // more than the bare revision by at least
	}{
		{"metadata", withFields(body, nil, xdstest.Annotations(256<<10), false), 256 << 10},
		{"aliases", withFields(body, []string{strings.Repeat("a", 1000), strings.Repeat("b", 1000)}, nil, false), 2000},
		{"cache control", withFields(body, nil, nil, true), 48},
		{"ttl", &Resource{Name: "r", OriginVersion: "1", Body: body.Body, TTL: durationpb.New(1)}, 48},
		{"long name", res(strings.Repeat("n", 4096), "1", 144), 4095},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := int64(sized(withVersion(tc.r)).Size())
			if got-bare < tc.least {
				t.Errorf("counts %d bytes, %d more than the bare revision, want at least %d more", got, got-bare, tc.least)
			}
		})
	}

	// A key's resource error counts (its message), and no longer once cleared.
	f := newFixture(t, unbounded)
	k := key(legacyStream, lds, "pending")
	f.c.Watch(&fakeWatcher{}, nil, k)
	msg := strings.Repeat("e", 10000)
	f.c.Apply(Update{Link: legacyStream, TypeURL: lds, Errors: []ResourceError{{Name: "pending", Detail: &statuspb.Status{Code: int32(codes.Unavailable), Message: msg}}}})
	if got := f.c.Stats().Bytes; got < int64(len(msg)) {
		t.Errorf("with a %d-byte error kept: %d bytes counted", len(msg), got)
	}
	f.c.Apply(Update{Link: legacyStream, TypeURL: lds, Resources: []*Resource{res("pending", "1", 1)}})
	if got, want := f.c.Stats().Bytes, heldBytes("pending", "1", 1); got != want {
		t.Errorf("error cleared by a revision: %d bytes counted, want the revision's %d", got, want)
	}
}

// TestMaxBytesBoundsLiveHeap: the scenario of issue 26. 150 resources of
// 144-byte bodies and 256 KiB of metadata each, nobody watching, under
// max_bytes 4 MiB: the cache keeps what fits (by the bytes they hold),
// xds_relay_cache_bytes says so, and the live heap grows by about that,
// not by the 38 MiB the resources hold (before, the bound counted 21,600
// bytes and kept all 150). And 10,000 small revisions: what the bound
// counts is within a factor of 2 of the live heap they take.
func TestMaxBytesBoundsLiveHeap(t *testing.T) {
	const maxBytes = 4 << 20
	base := liveHeap()
	f := newFixture(t, Options{MaxResources: -1, MaxBytes: maxBytes})
	for i := range 150 {
		k := key(legacyStream, lds, fmt.Sprintf("heavy-%03d", i))
		w := &fakeWatcher{}
		f.c.Watch(w, nil, k)
		f.c.Apply(Update{Link: legacyStream, TypeURL: lds, Resources: []*Resource{withFields(res(k.Name, "1", 144), nil, xdstest.Annotations(256<<10), false)}})
		f.c.Unwatch(w, k)
	}
	st := f.c.Stats()
	grew := liveHeap() - base
	t.Logf("150 × 256 KiB metadata, max_bytes %d: kept %d resources, %d bytes counted; live heap +%d bytes", maxBytes, st.Resources, st.Bytes, grew)
	if st.Bytes > maxBytes || st.Resources > 15 || st.Resources == 0 {
		t.Errorf("kept %d resources counting %d bytes, want what fits in %d (about 14)", st.Resources, st.Bytes, maxBytes)
	}
	if grew > 2*maxBytes {
		t.Errorf("live heap grew by %d bytes, more than twice max_bytes (%d)", grew, maxBytes)
	}
	runtime.KeepAlive(f)

	// The fixed overhead: small revisions, everything else negligible.
	g := newFixture(t, unbounded)
	base = liveHeap()
	const n = 10000
	w := &fakeWatcher{}
	for i := range n {
		k := key(legacyStream, lds, fmt.Sprintf("small-%05d", i))
		g.c.Watch(w, nil, k)
		g.c.Apply(Update{Link: legacyStream, TypeURL: lds, Resources: []*Resource{res(k.Name, "1", 16)}})
		g.c.Unwatch(w, k)
	}
	w.take()
	g.sub.take()
	counted, heap := g.c.Stats().Bytes/n, (liveHeap()-base)/n
	t.Logf("a 16-byte revision: %d bytes counted, %d bytes of live heap (unwatched, in the LRU)", counted, heap)
	if counted < heap/2 || counted > 2*heap {
		t.Errorf("a small revision counts %d bytes, live heap %d per revision: not within a factor of 2", counted, heap)
	}
	runtime.KeepAlive(g)
}

// liveHeap is xdstest.LiveHeap, signed for differences.
func liveHeap() int64 { return int64(xdstest.LiveHeap()) }

// BenchmarkFieldsBytes measures what counting a revision's metadata costs,
// once per revision before Apply locks (sized): 256 KiB in 256 strings.
func BenchmarkFieldsBytes(b *testing.B) {
	r := withFields(res("r", "1", 144), nil, xdstest.Annotations(256<<10), false)
	b.ReportAllocs()
	for b.Loop() {
		computeFieldsBytes(r)
	}
}
