package downstream

import (
	"sort"
	"strings"
	"sync"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"

	"github.com/xds-relay/xds-relay/internal/cache"
)

// memCache is a fake of internal/cache below the gRPC layer: resources by
// key, watchers by key, collections by stream and type (wildcard) or
// prefix (glob).
type memCache struct {
	mu       sync.Mutex
	res      map[cache.Key]*cache.Resource
	absent   map[cache.Key]bool
	known    map[cache.Key]bool // collections known (even when empty)
	watchers map[cache.Key]map[cache.Watcher]struct{}
	watched  chan cache.Key // every Watch call's keys, if non-nil
}

func newMemCache() *memCache {
	return &memCache{
		res:      make(map[cache.Key]*cache.Resource),
		absent:   make(map[cache.Key]bool),
		known:    make(map[cache.Key]bool),
		watchers: make(map[cache.Key]map[cache.Watcher]struct{}),
	}
}

func isCollection(k cache.Key) bool {
	return k.Name == cache.Wildcard || strings.HasSuffix(strings.SplitN(k.Name, "?", 2)[0], "/*")
}

func member(coll, k cache.Key) bool {
	if coll.Stream != k.Stream || coll.TypeURL != k.TypeURL || isCollection(k) {
		return false
	}
	if coll.Name == cache.Wildcard {
		return true
	}
	prefix := strings.TrimSuffix(strings.SplitN(coll.Name, "?", 2)[0], "*")
	rest, ok := strings.CutPrefix(k.Name, prefix)
	return ok && !strings.Contains(strings.SplitN(rest, "?", 2)[0], "/")
}

func (c *memCache) Watch(w cache.Watcher, node *corev3.Node, keys ...cache.Key) {
	var notify []cache.Key
	c.mu.Lock()
	for _, k := range keys {
		if c.watchers[k] == nil {
			c.watchers[k] = make(map[cache.Watcher]struct{})
		}
		c.watchers[k][w] = struct{}{}
		if isCollection(k) {
			if c.known[k] {
				notify = append(notify, k)
			}
		} else if c.res[k] != nil || c.absent[k] {
			notify = append(notify, k)
		}
	}
	ch := c.watched
	c.mu.Unlock()
	for _, k := range notify {
		w.Notify(k)
	}
	if ch != nil {
		for _, k := range keys {
			ch <- k
		}
	}
}

func (c *memCache) Unwatch(w cache.Watcher, keys ...cache.Key) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, k := range keys {
		delete(c.watchers[k], w)
	}
}

func (c *memCache) Get(k cache.Key) (*cache.Resource, cache.State) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if r := c.res[k]; r != nil {
		return r, cache.StatePresent
	}
	if c.absent[k] {
		return nil, cache.StateAbsent
	}
	return nil, cache.StatePending
}

func (c *memCache) Members(k cache.Key) ([]*cache.Resource, cache.State) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*cache.Resource
	for mk, r := range c.res {
		if member(k, mk) {
			out = append(out, r)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	if len(out) > 0 {
		return out, cache.StatePresent
	}
	if c.known[k] {
		return nil, cache.StateAbsent
	}
	return nil, cache.StatePending
}

// set stores r under k (present) and notifies k's and its collections' watchers.
func (c *memCache) set(k cache.Key, r *cache.Resource) {
	c.mu.Lock()
	c.res[k] = r
	delete(c.absent, k)
	ws := c.watchersLocked(k)
	c.mu.Unlock()
	for _, w := range ws {
		w.Notify(k)
	}
}

// remove marks k absent.
func (c *memCache) remove(k cache.Key) {
	c.mu.Lock()
	delete(c.res, k)
	c.absent[k] = true
	ws := c.watchersLocked(k)
	c.mu.Unlock()
	for _, w := range ws {
		w.Notify(k)
	}
}

// know marks a collection known (its members are what is stored).
func (c *memCache) know(k cache.Key) {
	c.mu.Lock()
	c.known[k] = true
	var ws []cache.Watcher
	for w := range c.watchers[k] {
		ws = append(ws, w)
	}
	c.mu.Unlock()
	for _, w := range ws {
		w.Notify(k)
	}
}

func (c *memCache) watchersLocked(k cache.Key) []cache.Watcher {
	seen := make(map[cache.Watcher]struct{})
	var out []cache.Watcher
	for wk, set := range c.watchers {
		if wk == k || member(wk, k) {
			for w := range set {
				if _, ok := seen[w]; !ok {
					seen[w] = struct{}{}
					out = append(out, w)
				}
			}
		}
	}
	return out
}
