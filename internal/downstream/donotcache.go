package downstream

import "github.com/xds-relay/xds-relay/internal/cache"

// Resources the origin marked cache_control.do_not_cache are never sent
// from cache to a client that subscribes after they were cached: the cache
// asks the origin again and owes that session the fresh copy
// (internal/cache, "Resource fields"). The writer reads with Get as for
// anything else, then withholds what the cache says this session may not
// be sent yet; it is notified of the key when it may. Collection members
// are not withheld (a new glob or wildcard subscriber is sent the cached
// member, docs/protocol.md). A unary Fetch or REST poll is a watcher too:
// fetchResponse withholds from it the same way.

// withholdOwed turns the probes of w (names subscribed directly) that
// found a do_not_cache revision this session may not be sent yet into
// pending ones (still owed an answer). A revision withheld only because a
// newer state came since the lookup is read again, once. Called without
// the session lock, after the lookups.
func (ss *session) withholdOwed(w *work) {
	for i := range w.probes {
		p := &w.probes[i]
		if p.collection || p.res == nil || !p.res.DoNotCache() || !ss.srv.cache.Withheld(ss, p.key, p.res) {
			continue
		}
		p.res, p.state = ss.srv.cache.Get(p.key)
		if p.res != nil && ss.srv.cache.Withheld(ss, p.key, p.res) {
			p.res, p.state = nil, cache.StatePending
		}
	}
}
