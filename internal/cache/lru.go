package cache

import "go.uber.org/zap"

// The LRU keeps every key nobody watches (see watchedLocked): resources kept
// warm for clients that come back, and the collections and pending or absent
// keys still subscribed upstream. simplelru only keeps the order; the cache
// enforces Options.MaxResources (keys in the LRU) and Options.MaxBytes
// (their resources' bytes) itself and evicts with RemoveOldest, so no evict
// callback fires on Remove.

// reconcileLocked puts e into the LRU when nobody watches it and takes it out
// when somebody does (a do_not_cache revision nobody watches is dropped); for an entry already in the LRU it only updates the
// byte count (an origin update does not make a key recently used).
func (c *Cache) reconcileLocked(e *entry) {
	if c.entries[e.key] != e {
		return
	}
	watched := c.watchedLocked(e)
	if !watched && e.state == StatePresent && e.res.DoNotCache() {
		// The origin said not to cache it: kept only while watched
		// (refetch.go). Dropped like an eviction, and unsubscribed; when
		// it was fetched is remembered.
		c.recent.add(e.key, e.lastFetch, c.now(), c.refetchInterval)
		c.evictLocked(e)
		return
	}
	switch {
	case watched && e.inLRU:
		c.lru.Remove(e.key)
		c.lruBytes -= e.lruBytes
		e.inLRU, e.lruBytes = false, 0
	case !watched && !e.inLRU:
		e.res.dropEncodings()
		c.lru.Add(e.key, e)
		e.inLRU, e.lruBytes = true, e.size()
		c.lruBytes += e.lruBytes
	case !watched && e.inLRU:
		s := e.size()
		c.lruBytes += s - e.lruBytes
		e.lruBytes = s
	}
}

// overBoundsLocked: the LRU holds more keys or bytes than allowed.
func (c *Cache) overBoundsLocked() bool {
	return (c.maxResources >= 0 && c.lru.Len() > c.maxResources) ||
		(c.maxBytes >= 0 && c.lruBytes > c.maxBytes)
}

// enforceBoundsLocked evicts the least recently used unwatched keys until
// the LRU is within bounds. Watched keys are not in the LRU, so they are
// never evicted, and eviction never disconnects anyone.
func (c *Cache) enforceBoundsLocked() {
	for c.overBoundsLocked() {
		_, e, ok := c.lru.RemoveOldest()
		if !ok {
			return
		}
		c.lruBytes -= e.lruBytes
		e.inLRU, e.lruBytes = false, 0
		c.evictLocked(e)
	}
}

// evictLocked drops e and unsubscribes it upstream if the cache had
// subscribed it. Evicting a member of a subscribed collection also evicts
// that collection (a collection missing a member would answer clients
// wrongly); evicting a collection drops the members nothing else keeps
// subscribed (they would go stale).
func (c *Cache) evictLocked(e *entry) {
	if c.entries[e.key] != e {
		return // already dropped by a cascade
	}
	c.m.evictions.Inc()
	c.lg.Debug("evicted", zap.String("type_url", e.key.TypeURL), zap.String("name", e.key.Name))
	wasPresent := e.state == StatePresent
	c.dropLocked(e)

	if !e.collection {
		if !wasPresent {
			return
		}
		if w := c.entries[e.key.linkType().wildcard()]; w != nil {
			c.evictLocked(w)
		}
		if e.glob != "" {
			if g := c.entries[c.globKey(e.key, e.glob)]; g != nil {
				c.evictLocked(g)
			}
		}
		return
	}
	var orphans []*entry
	for _, m := range c.membersLocked(e.key) {
		if !m.subscribed && !c.coveredLocked(m) {
			orphans = append(orphans, m)
		}
	}
	for _, m := range orphans {
		c.m.evictions.Inc()
		c.dropLocked(m)
	}
}

// coveredLocked: a subscribed collection still in the cache holds m.
func (c *Cache) coveredLocked(m *entry) bool {
	if w := c.entries[m.key.linkType().wildcard()]; w != nil && w.subscribed {
		return true
	}
	if m.glob == "" {
		return false
	}
	g := c.entries[c.globKey(m.key, m.glob)]
	return g != nil && g.subscribed
}

// dropLocked removes e from every index and queues its Unsubscribe.
func (c *Cache) dropLocked(e *entry) {
	c.gen++
	c.endDeferralLocked(nil, e)
	if e.inLRU {
		c.lru.Remove(e.key)
		c.lruBytes -= e.lruBytes
		e.inLRU, e.lruBytes = false, 0
	}
	if !e.collection {
		c.setAbsentLocked(e)
		st := e.key.linkType()
		if m := c.byType[st]; m != nil {
			delete(m, e.key.Name)
			if len(m) == 0 {
				delete(c.byType, st)
			}
		}
	} else {
		c.removeCollectionLocked(e)
	}
	delete(c.entries, e.key)
	c.resizeLocked(e) // it holds nothing now
	c.dropFetchLocked(e)
	if e.subscribed {
		e.subscribed = false
		c.queueLocked(false, e.key, nil)
	}
}

// SetBounds replaces Options.MaxResources and Options.MaxBytes (a config
// reload). Lowered bounds evict the least recently used unwatched keys at
// once (unsubscribing them upstream); watched keys are never evicted.
func (c *Cache) SetBounds(maxResources int, maxBytes int64) {
	c.mu.Lock()
	c.maxResources, c.maxBytes = maxResources, maxBytes
	c.enforceBoundsLocked()
	c.mu.Unlock()
	c.flush()
}
