package downstream

import "github.com/xds-relay/xds-relay/internal/cache"

// Resources the origin marked cache_control.do_not_cache are never sent
// from cache to a client that subscribes after they were cached: the cache
// asks the origin again and owes that session the fresh copy
// (internal/cache, "Resource fields"). The writer reads with Lookup as for
// anything else; the same read says what this session may not be sent
// yet (KeyLookup.Withheld, decided under the cache's lock with the read),
// which it withholds; it is notified of the key when it may. Collection
// members are not withheld (a new glob or wildcard subscriber is sent the
// cached member, docs/protocol.md). A unary Fetch or REST poll is a watcher
// too: fetchResponse withholds from it the same way.

// withholdOwed turns probe p (a name subscribed directly), which read l,
// into a pending one (still owed an answer) when l's revision is a
// do_not_cache one this session may not be sent yet.
func withholdOwed(p *probe, l cache.KeyLookup) {
	if !p.collection && l.Withheld(p.res) {
		p.res, p.state = nil, cache.StatePending
	}
}
