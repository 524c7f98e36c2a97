package cache_test

import (
	"fmt"
	"runtime"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/xds-relay/xds-relay/internal/cache"
)

// BenchmarkFanoutResourceSize applies one changed resource that 10000
// watchers watch, at two resource sizes, and reports allocations per
// watcher per update (issue #6 target: a small constant, independent of
// the resource's size). Owned by the benchmark work (bench/), written
// against the cache's public API only.
func BenchmarkFanoutResourceSize(b *testing.B) {
	const watchers = 10000
	for _, size := range []int{1 << 10, 64 << 10} {
		b.Run(fmt.Sprintf("watchers=%d/size=%dKiB", watchers, size>>10), func(b *testing.B) {
			c := cache.New(cache.Options{
				MaxResources: 100, MaxBytes: 1 << 30,
				Upstream: nopSubscriber{}, Logger: zap.NewNop(), Registry: prometheus.NewRegistry(),
			})
			stream := cache.LinkID{Authority: "bench.local"}
			k := cache.Key{Link: stream, TypeURL: resourcev3.EndpointType, Name: "cla"}
			for range watchers {
				c.Watch(&countingWatcher{}, nil, k)
			}
			// Different bytes: every Apply is a change (the cache compares
			// bytes, not versions).
			bodies := []*anypb.Any{
				{TypeUrl: resourcev3.EndpointType, Value: make([]byte, size)},
				{TypeUrl: resourcev3.EndpointType, Value: make([]byte, size)},
			}
			bodies[1].Value[0] = 1
			var before, after runtime.MemStats
			b.ReportAllocs()
			runtime.ReadMemStats(&before)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				c.Apply(cache.Update{Link: stream, TypeURL: resourcev3.EndpointType, Resources: []*cache.Resource{
					{Name: "cla", Body: bodies[i%2]},
				}})
			}
			b.StopTimer()
			runtime.ReadMemStats(&after)
			b.ReportMetric(float64(after.Mallocs-before.Mallocs)/float64(b.N)/watchers, "allocs/watcher")
			b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/float64(b.N)/watchers, "B/watcher")
		})
	}
}

type nopSubscriber struct{}

func (nopSubscriber) Subscribe(cache.LinkID, *corev3.Node, string, []string) {}
func (nopSubscriber) Unsubscribe(cache.LinkID, string, []string)             {}

// countingWatcher stands for a session: it only counts notifications, as a
// session marks itself dirty and pokes its writer.
type countingWatcher struct{ n int }

func (w *countingWatcher) Notify(cache.Key) { w.n++ }

// Flush takes the change and is done with it at once, as a session that
// sent its response would be.
func (w *countingWatcher) Flush(cs *cache.ChangeSet) {
	cs.Take()
	cs.Done()
}
