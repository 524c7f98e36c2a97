package snapshot

import (
	"fmt"
	"testing"
	"time"

	"github.com/xds-relay/xds-relay/internal/cache"
)

// BenchmarkSnapshot: one snapshot of a cache of n 1 KiB resources: taking
// the entries under the lock, encoding, and decoding plus restoring.
func BenchmarkSnapshot(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		c := cache.New(unbounded)
		rs := make([]*cache.Resource, n)
		for i := range rs {
			rs[i] = res(fmt.Sprintf("r%d", i), fmt.Sprint(i), 1024)
		}
		c.Apply(cache.Update{Link: legacyStream, TypeURL: lds, Resources: rs})
		es, _ := c.SnapshotEntries()
		data, _, _ := Encode(testFP, time.Now(), es, 0)
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
				Encode(testFP, time.Now(), es, 0)
			}
		})
		b.Run(fmt.Sprintf("decode+restore/resources=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				s, err := Decode(data, testFP)
				if err != nil {
					b.Fatal(err)
				}
				g := cache.New(unbounded)
				g.Restore(s.Entries)
				g.Close()
			}
		})
		c.Close()
	}
}
