package cache

import (
	"slices"
	"sync"
	"time"
)

// note is one Watcher.Notify call to make once the lock is released.
type note struct {
	w Watcher
	k Key
}

// noteGroup is the watchers to notify of one key (the common case of a
// fan-out: one key, many watchers, stored without repeating the key).
type noteGroup struct {
	k  Key
	ws []Watcher
}

// noteBuilder collects the notifications of one change under the lock;
// send makes them after.
type noteBuilder struct {
	notes  []note
	groups []noteGroup
	// cs is the origin change announced (nil: a Watch's initial state, an
	// expiry).
	cs *ChangeSet
	// hint: how many notes to make room for at the first (a Watch's
	// keys), so that they are not grown one by one; such notes come from
	// notesPool (pooled: the slice they came in).
	hint   int
	pooled *[]note
}

func (nb *noteBuilder) add(w Watcher, k Key) {
	if nb.notes == nil && nb.hint > 0 {
		nb.pooled = notesPool.Get().(*[]note)
		nb.notes = slices.Grow(*nb.pooled, nb.hint)
	}
	nb.notes = append(nb.notes, note{w: w, k: k})
}

// notesPool holds the note slices of Watch calls (a new client's names),
// so that a burst of them does not allocate one each; send returns them.
var notesPool = sync.Pool{New: func() any { return new([]note) }}

// maxPooledNotes: a slice grown past this many notes is not pooled.
const maxPooledNotes = 1024

// releaseNotes returns nb's notes to the pool, emptied.
func (nb *noteBuilder) releaseNotes() {
	if nb.pooled == nil || cap(nb.notes) > maxPooledNotes {
		return
	}
	clear(nb.notes)
	*nb.pooled = nb.notes[:0]
	notesPool.Put(nb.pooled)
	nb.notes, nb.pooled = nil, nil
}

// addWatchers notifies every watcher in sets of k, once each even when a
// watcher is in several sets (e.g. it watches k and k's glob).
func (nb *noteBuilder) addWatchers(k Key, sets ...*watcherSet) {
	nonEmpty, total := 0, 0
	var only *watcherSet
	for _, s := range sets {
		if n := s.size(); n > 0 {
			nonEmpty++
			total += n
			only = s
		}
	}
	if total == 0 {
		return
	}
	if nonEmpty == 1 {
		// The common fan-out: the list itself, shared copy-on-write.
		nb.groups = append(nb.groups, noteGroup{k: k, ws: only.share()})
		return
	}
	g := noteGroup{k: k, ws: make([]Watcher, 0, total)}
	seen := make(map[Watcher]struct{}, total)
	for _, s := range sets {
		if s == nil {
			continue
		}
		for _, w := range s.list {
			if _, dup := seen[w]; dup {
				continue
			}
			seen[w] = struct{}{}
			g.ws = append(g.ws, w)
		}
	}
	nb.groups = append(nb.groups, g)
}

// send announces the change: Notify of every key to every watcher first,
// then Flush, so no watcher builds a response from part of the change. The
// cache lock must not be held.
func (nb *noteBuilder) send() {
	for _, g := range nb.groups {
		for _, w := range g.ws {
			w.Notify(g.k)
		}
	}
	for _, n := range nb.notes {
		n.w.Notify(n.k)
	}
	var last []Watcher
	for _, g := range nb.groups {
		if len(g.ws) == len(last) && len(last) > 0 && &g.ws[0] == &last[0] {
			continue // the same shared list again: already flushed
		}
		last = g.ws
		for _, w := range g.ws {
			w.Flush(nb.cs)
		}
	}
	for _, n := range nb.notes {
		n.w.Flush(nb.cs)
	}
	nb.cs.Done() // the cache's own hold
	nb.releaseNotes()
}

// notesLocked turns an Apply's changes into notifications: the watchers of
// each changed key and, for a member, of its glob and its type's Wildcard;
// then, for each collection whose state changed, its watchers: of each
// member when it became known with members, of the collection key
// otherwise.
func (c *Cache) notesLocked(a *applyRun, now time.Time) noteBuilder {
	nb := noteBuilder{cs: a.cs}
	for _, k := range a.order {
		if !a.member[k] {
			nb.addWatchers(k, c.watchers[k])
			continue
		}
		var globWatchers *watcherSet
		glob := ""
		if e := c.entries[k]; e != nil {
			glob = e.glob
		} else {
			glob = globOf(k.Name) // dropped in this update
		}
		if glob != "" {
			globWatchers = c.watchers[c.globKey(k, glob)]
		}
		nb.addWatchers(k, c.watchers[k], globWatchers, c.watchers[k.streamType().wildcard()])
	}
	nb.notes = append(nb.notes, a.owed...)
	var seen map[note]struct{}
	for ck, before := range a.before {
		e := c.entries[ck]
		if e == nil {
			continue
		}
		after := c.collectionStateLocked(e)
		ws := c.watchers[ck]
		if after == before || ws.size() == 0 {
			continue
		}
		if before != StatePending || after != StatePresent {
			nb.addWatchers(ck, ws)
			continue
		}
		if seen == nil {
			seen = make(map[note]struct{})
		}
		for _, m := range c.membersLocked(ck) {
			if _, ok := a.member[m.key]; ok || m.visibleState(now) != StatePresent {
				continue // already notified as a change
			}
			for _, w := range ws.list {
				n := note{w: w, k: m.key}
				if _, dup := seen[n]; !dup {
					seen[n] = struct{}{}
					nb.notes = append(nb.notes, n)
				}
			}
		}
	}
	return nb
}
