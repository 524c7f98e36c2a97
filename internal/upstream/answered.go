package upstream

import (
	"maps"

	"github.com/xds-relay/xds-relay/internal/cache"
)

// Which subscriptions a response answers. The relay tells clients that a
// resource or a collection does not exist only when the origin said so for
// that name (docs/reliability.md, "Absence only when the origin said so"):
// a delta removed_resources, a glob's own answer, or a SotW full-state
// response that answers a request which already carried the name. A response
// of a type is not, by itself, the answer to every subscription of that
// type.

// deltaAnswers returns, among the collections awaiting their first answer
// (name → the number of the request that subscribed it), those the delta
// response u answers. sent maps every name subscribed on the attempt to
// the number of the request that subscribed it, answeredAt the names of
// those already answered to the number of the last request sent then.
//
//   - A glob is answered by a resource (or a removal) of its own, unless
//     that name was subscribed by name before the glob and not answered
//     before the glob was subscribed (then it may be the answer to that
//     earlier request), or by its own URL in removed_resources (known
//     empty). A name answered before is taken as the glob's answer: it
//     could also be an update the origin sent before it saw the glob, and
//     the glob is then known with part of its members until the rest
//     arrive (never known empty: a glob is known empty only by its URL in
//     removed_resources).
//   - The Wildcard is answered likewise by a name no glob or earlier named
//     subscription accounts for, or by an empty response (what an origin
//     sends to a wildcard with nothing in it).
func deltaAnswers(u cache.Update, sent, answeredAt, awaiting map[string]int) []string {
	if len(awaiting) == 0 {
		return nil
	}
	var out []string
	done := make(map[string]bool, len(awaiting))
	answer := func(n string) {
		if _, ok := awaiting[n]; ok && !done[n] {
			done[n] = true
			out = append(out, n)
		}
	}
	if len(u.Resources) == 0 && len(u.Removed) == 0 && len(u.Errors) == 0 {
		answer(cache.Wildcard)
	}
	// counts: name, in this response, answers a collection subscribed by
	// request number c.
	counts := func(name string, c int) bool {
		seq, named := sent[name]
		if !named || seq >= c {
			return true
		}
		at, answered := answeredAt[name]
		return answered && at < c
	}
	note := func(name string) {
		glob := cache.GlobOf(name)
		if g, ok := awaiting[glob]; ok && glob != "" && counts(name, g) {
			answer(glob)
		}
		if _, globSent := sent[glob]; glob != "" && globSent {
			return // its glob accounts for it
		}
		if w, ok := awaiting[cache.Wildcard]; ok && counts(name, w) {
			answer(cache.Wildcard)
		}
	}
	for _, r := range u.Resources {
		if c, err := cache.CanonicalName(r.Name); err == nil {
			note(c)
		}
	}
	for _, n := range u.Removed {
		if _, ok := awaiting[n]; ok && n != cache.Wildcard {
			answer(n) // a glob in removed_resources: known empty
			continue
		}
		note(n)
	}
	return out
}

// sotwAnswerable tracks, for one SotW type, which names the next response
// can answer. A server answers the latest request whose response_nonce is
// not stale (spec: "The management server should not send a
// DiscoveryResponse for any DiscoveryRequest that has a stale nonce"):
// every request sent since the last response carries that response's
// nonce, and the next response answers one of them. Only a name held by
// all of them is surely in the request it answers. owned by the link's
// run goroutine
type sotwAnswerable struct {
	// names every request sent since the last response carried; valid while
	// sentSince.
	names     map[string]struct{}
	sentSince bool
}

// sent records a request carrying set.
func (a *sotwAnswerable) sent(set map[string]struct{}) {
	if !a.sentSince {
		a.names, a.sentSince = maps.Clone(set), true
		return
	}
	for n := range a.names {
		if _, ok := set[n]; !ok {
			delete(a.names, n)
		}
	}
}

// take returns what a response that just arrived answers (nil: no request
// was sent since the last one, so nothing) and starts over.
func (a *sotwAnswerable) take() map[string]struct{} {
	names := a.names
	if !a.sentSince {
		names = nil
	}
	a.names, a.sentSince = nil, false
	return names
}
