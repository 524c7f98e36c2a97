package cache

import (
	"fmt"
	"testing"
	"time"
)

// BenchmarkSnapshot: one snapshot of a cache of n 1 KiB resources: taking
// the entries under the lock, encoding, and decoding plus restoring.
func BenchmarkSnapshot(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		c := New(Options{MaxResources: -1, MaxBytes: -1})
		rs := make([]*Resource, n)
		for i := range rs {
			rs[i] = res(fmt.Sprintf("r%d", i), fmt.Sprint(i), 1024)
		}
		c.Apply(Update{Stream: legacyStream, TypeURL: lds, Resources: rs})
		es, _ := c.SnapshotEntries()
		data, _, _ := EncodeSnapshot(testFP, time.Now(), es, 0)
		b.Run(fmt.Sprintf("collect/resources=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				c.SnapshotEntries()
			}
		})
		b.Run(fmt.Sprintf("encode/resources=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				EncodeSnapshot(testFP, time.Now(), es, 0)
			}
		})
		b.Run(fmt.Sprintf("decode+restore/resources=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				s, err := DecodeSnapshot(data, testFP)
				if err != nil {
					b.Fatal(err)
				}
				g := New(Options{MaxResources: -1, MaxBytes: -1})
				g.Restore(s.Entries)
				g.Close()
			}
		})
		c.Close()
	}
}
