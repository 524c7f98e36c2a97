package downstream

import (
	"testing"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/types/known/durationpb"
)

// Resources are wrapped, never copied: a plain resource is its shared Any;
// a TTL wrapper is marshalled once and shared by every client.
func TestSotWEnvelopeShared(t *testing.T) {
	plain := res(edsType, "p", "1")
	withTTL := res(edsType, "t", "1")
	withTTL.TTL = durationpb.New(30e9)
	wrappers := newWrapperCache()
	tests := []struct {
		name      string
		r         any
		heartbeat bool
		sameAsRes bool
	}{
		{"plain resource is its body", plain, false, true},
		{"TTL wrapper", withTTL, false, false},
		{"heartbeat wrapper", withTTL, true, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.r.(*cacheResource)
			a := sotwEnvelopeFor(wrappers, r.Name, r, tc.heartbeat, wrapTTL)
			b := sotwEnvelopeFor(wrappers, r.Name, r, tc.heartbeat, wrapTTL)
			if a != b {
				t.Fatalf("two clients got different envelopes %p %p", a, b)
			}
			if (a == r.Body) != tc.sameAsRes {
				t.Fatalf("envelope is the body: %v, want %v", a == r.Body, tc.sameAsRes)
			}
		})
	}
}

// A revision's response entry, once made, is handed to each further
// client without an allocation: the fan-out's per-client share is the
// client's own fields, not a lookup of the shared ones.
func TestEntryLookupNoAllocation(t *testing.T) {
	r := res(edsType, "r", "1")
	for _, tc := range []struct {
		name  string
		entry func() mem.Buffer
	}{
		{"delta", func() mem.Buffer { return deltaEntry(r.Name, r, false) }},
		{"sotw", func() mem.Buffer { return sotwEntry(r.Name, r, false, wrapNone) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			first := tc.entry()
			if allocs := testing.AllocsPerRun(100, func() {
				if &tc.entry().ReadOnlyData()[0] != &first.ReadOnlyData()[0] {
					t.Fatal("a second client got another entry")
				}
			}); allocs != 0 {
				t.Errorf("%v allocations per lookup of a kept entry, want 0", allocs)
			}
		})
	}
}
