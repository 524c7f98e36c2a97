package cache

import (
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
)

// Options configure a Cache.
type Options struct {
	// MaxResources bounds the resources no client watches that stay cached
	// (and subscribed upstream). Watched resources are never evicted.
	MaxResources int
	// MaxBytes bounds the bytes of those unwatched resources.
	MaxBytes int64
	// Upstream receives subscribe/unsubscribe calls; may be set later with
	// SetUpstream, before the first Watch.
	Upstream Subscriber
	Logger   *zap.Logger
	Registry prometheus.Registerer
}

// Cache holds resources by canonical Key, indexes watchers by key and by
// collection, and keeps unwatched resources in a bounded LRU.
//
// Contract (implemented in issue #3):
//   - Watch registers w for keys (resources or collections). A key nobody
//     had subscribed is subscribed upstream (Subscriber.Subscribe, with node).
//     Each key already known (present or absent) counts as a cache hit, each
//     pending one as a miss (xds_relay_cache_hits_total/misses_total, by type).
//     If a key is already known, w is notified of it (for a collection: of
//     each member, or of the collection key itself when it is empty).
//   - Unwatch removes w. A key no client watches moves to the LRU; it stays
//     cached and subscribed until evicted, and eviction calls Unsubscribe.
//   - Apply stores an origin update and notifies every watcher of each changed
//     key, and every watcher of a collection the key is a member of.
//   - Get and Members read current state; writers build responses from them.
//   - Nothing is dropped because the origin is unreachable.
type Cache struct {
}

// New returns an empty cache.
func New(opts Options) *Cache {
	panic("cache.New: not implemented yet (issue #3)")
}

// SetUpstream sets the subscriber; call before the first Watch.
func (c *Cache) SetUpstream(u Subscriber) { panic("not implemented") }

// Watch registers w for keys; node is presented upstream if a stream must be opened.
func (c *Cache) Watch(w Watcher, node *corev3.Node, keys ...Key) { panic("not implemented") }

// Unwatch removes w from keys.
func (c *Cache) Unwatch(w Watcher, keys ...Key) { panic("not implemented") }

// Get returns the current revision of a resource key and its state. The
// *Resource is nil unless the state is StatePresent.
func (c *Cache) Get(k Key) (*Resource, State) { panic("not implemented") }

// Members returns the current members of a collection key (glob or
// Wildcard), sorted by name, and the collection's state.
func (c *Cache) Members(k Key) ([]*Resource, State) { panic("not implemented") }

// Apply stores what the origin sent and notifies watchers.
func (c *Cache) Apply(u Update) { panic("not implemented") }
