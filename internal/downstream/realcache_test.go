package downstream

import (
	"slices"
	"strings"
	"sync"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"go.uber.org/zap"
	statuspb "google.golang.org/genproto/googleapis/rpc/status"

	"github.com/xds-relay/xds-relay/config"
	"github.com/xds-relay/xds-relay/internal/cache"
	"github.com/xds-relay/xds-relay/internal/delivery"
	"github.com/xds-relay/xds-relay/internal/propagation"
)

// answeringSubscriber stands for the upstream below the gRPC layer: tests
// Apply resources as the origin would send them, and every subscription is
// answered in full (Complete) right after it is made, so what the test did
// not put reads as absent.
type answeringSubscriber struct {
	c  *cache.Cache
	wg sync.WaitGroup
}

// heldPending in a name keeps it pending: the subscriber does not answer
// it (an origin that has not answered yet).
const heldPending = "/pending-"

func (s *answeringSubscriber) Subscribe(st cache.LinkID, _ *corev3.Node, typeURL string, names []string) {
	names = slices.DeleteFunc(slices.Clone(names), func(n string) bool { return strings.Contains(n, heldPending) })
	s.wg.Add(1)
	go func() { // Subscribe must not block or call back into the cache
		defer s.wg.Done()
		s.c.Apply(cache.Update{Link: st, TypeURL: typeURL, Complete: names})
	}()
}

func (s *answeringSubscriber) Unsubscribe(cache.LinkID, string, []string) {}

// testCache is the real cache, with helpers that Apply canned updates and
// optional hooks around what the server asks of it.
type testCache struct {
	*cache.Cache
	ledger   *propagation.Ledger // nil: off
	delivery *delivery.Delivery  // nil: off (the Server's Breaker when set)
	mu       sync.Mutex
	hooks    cacheHooks // guarded by mu
}

// cacheHooks run in the server's goroutines, without locks held.
type cacheHooks struct {
	// beforeWatch, when set, makes Watch watch one key at a time and runs
	// before each.
	beforeWatch func(i int, k cache.Key)
	// afterGet runs after every Lookup.
	afterGet func(k cache.Key)
}

func newTestCache(t testing.TB) *testCache { return newTestCacheLedger(t, true) }

// newTestCacheLedger is a cache with the propagation ledger recording its
// changes (ledger true, as the relay runs), or without.
func newTestCacheLedger(t testing.TB, ledger bool) *testCache {
	return newTestCacheWith(t, features{ledger: ledger})
}

// features are what a test cache runs with: the propagation ledger, and
// safe delivery at its defaults (internal/delivery: validation, the NACK
// breaker, the deletion guard; its release loop not running), both as the
// relay runs.
type features struct{ ledger, delivery bool }

// String names f as a benchmark's sub-benchmark does.
func (f features) String() string {
	return "ledger=" + onOff(f.ledger) + "/delivery=" + onOff(f.delivery)
}

// newTestCacheWith is a cache with features f.
func newTestCacheWith(t testing.TB, f features) *testCache {
	sub := &answeringSubscriber{}
	opts := cache.Options{Logger: zap.NewNop(), MaxResources: 1000, MaxBytes: 1 << 30}
	if f.ledger {
		opts.Ledger = propagation.New(propagation.Options{})
	}
	var dl *delivery.Delivery
	if f.delivery {
		cfg := config.Default()
		cfg.Authorities = []config.Authority{{Name: authority, Origins: []string{"127.0.0.1:1"}}}
		dl = delivery.New(delivery.Options{Config: cfg})
		opts.Validator, opts.Guard, opts.Gate = dl, dl, dl
	}
	c := cache.New(opts)
	if dl != nil {
		dl.SetCache(c)
	}
	sub.c = c
	c.SetUpstream(sub)
	t.Cleanup(sub.wg.Wait)
	return &testCache{Cache: c, ledger: opts.Ledger, delivery: dl}
}

// breaker is the Server's NackReporter: the cache's delivery, nil when
// off.
func (c *testCache) breaker() NackReporter {
	if c.delivery == nil {
		return nil
	}
	return c.delivery
}

func (c *testCache) setHooks(h cacheHooks) {
	c.mu.Lock()
	c.hooks = h
	c.mu.Unlock()
}

func (c *testCache) getHooks() cacheHooks {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.hooks
}

func (c *testCache) Watch(w cache.Watcher, node *corev3.Node, keys ...cache.Key) {
	h := c.getHooks()
	if h.beforeWatch == nil {
		c.Cache.Watch(w, node, keys...)
		return
	}
	for i, k := range keys {
		h.beforeWatch(i, k)
		c.Cache.Watch(w, node, k)
	}
}

// Lookup (what the writer reads a key with): afterGet runs after it.
func (c *testCache) Lookup(w cache.Watcher, k cache.Key) cache.KeyLookup {
	l := c.Cache.Lookup(w, k)
	if h := c.getHooks(); h.afterGet != nil {
		h.afterGet(k)
	}
	return l
}

// setError records the origin's error for k.
func (c *testCache) setError(k cache.Key, detail *statuspb.Status) {
	c.Apply(cache.Update{Link: k.Link, TypeURL: k.TypeURL, Errors: []cache.ResourceError{{Name: k.Name, Detail: detail}}})
}

// set stores r under k (present).
func (c *testCache) set(k cache.Key, r *cache.Resource) {
	c.Apply(cache.Update{Link: k.Link, TypeURL: k.TypeURL, Resources: []*cache.Resource{r}})
}

// remove says k does not exist.
func (c *testCache) remove(k cache.Key) {
	c.Apply(cache.Update{Link: k.Link, TypeURL: k.TypeURL, Removed: []string{k.Name}})
}

type cacheResource = cache.Resource
