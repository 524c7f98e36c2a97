package downstream

import (
	"sync"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"go.uber.org/zap"

	"github.com/xds-relay/xds-relay/internal/cache"
)

// answeringSubscriber stands for the upstream below the gRPC layer: tests
// Apply resources as the origin would send them, and every subscription is
// answered in full (Complete) right after it is made, so what the test did
// not put reads as absent.
type answeringSubscriber struct {
	c  *cache.Cache
	wg sync.WaitGroup
}

func (s *answeringSubscriber) Subscribe(st cache.StreamID, _ *corev3.Node, typeURL string, names []string) {
	s.wg.Add(1)
	go func() { // Subscribe must not block or call back into the cache
		defer s.wg.Done()
		s.c.Apply(cache.Update{Stream: st, TypeURL: typeURL, Complete: names})
	}()
}

func (s *answeringSubscriber) Unsubscribe(cache.StreamID, string, []string) {}

// testCache is the real cache, with helpers that Apply canned updates.
type testCache struct{ *cache.Cache }

func newTestCache(t testing.TB) *testCache {
	sub := &answeringSubscriber{}
	c := cache.New(cache.Options{Logger: zap.NewNop(), MaxResources: 1000, MaxBytes: 1 << 30})
	sub.c = c
	c.SetUpstream(sub)
	t.Cleanup(sub.wg.Wait)
	return &testCache{c}
}

// set stores r under k (present).
func (c *testCache) set(k cache.Key, r *cache.Resource) {
	c.Apply(cache.Update{Stream: k.Stream, TypeURL: k.TypeURL, Resources: []*cache.Resource{r}})
}

// remove says k does not exist.
func (c *testCache) remove(k cache.Key) {
	c.Apply(cache.Update{Stream: k.Stream, TypeURL: k.TypeURL, Removed: []string{k.Name}})
}

type cacheResource = cache.Resource
