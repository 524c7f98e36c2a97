package cache

import (
	"slices"
	"strings"
	"time"

	"go.uber.org/zap"
)

// Deferred removals (delivery.deletion_guard, as the cache keeps it). When
// the RemovalGuard defers an origin change's removals (screen.go), each
// present resource the change would make absent stays present with its
// revision: watchers are told nothing, new watchers are served it (Lookup,
// LookupMembers), and it counts as present everywhere. Its removal is deferred
// until one of:
//
//   - ReleaseDeferred (by hand, or package delivery's release_after): it
//     is removed then, and watchers are told, as one change per type;
//   - the origin sends the resource again (the deferral ends, the revision
//     is applied as any other);
//   - its TTL lapses, or it is evicted or dropped (the deferral ends with
//     it);
//   - an Unguarded update removes it (an authority a reload removed).
//
// A later origin change cannot remove a deferred resource again: its
// removals of deferred resources change nothing, and the RemovalGuard is
// asked only about the others (Removals leaves deferred ones out).

// deferral is why and since when an entry's removal is deferred.
type deferral struct {
	reason string
	since  time.Time
}

// deferralGroup counts deferrals by link, type and reason.
type deferralGroup struct {
	st     linkType
	reason string
}

// DeferralKind says what a DeferralEvent is.
type DeferralKind uint8

const (
	// DeferralStarted: an origin change's removals were deferred.
	DeferralStarted DeferralKind = iota
	// DeferralReturned: the origin sent deferred resources again; their
	// deferral ended.
	DeferralReturned
)

// DeferralEvent is one Apply's deferrals of one reason: started (with the
// Removals that started them) or ended by the origin's return.
type DeferralEvent struct {
	Kind    DeferralKind
	Link    LinkID
	TypeURL string
	Reason  string
	// Count is how many resources; Removals what the guard was asked
	// (DeferralStarted only).
	Count    int
	Removals Removals
}

// Deferral is one link's deferred removals of one type and reason, as
// Deferrals lists them.
type Deferral struct {
	Link    LinkID
	TypeURL string
	Reason  string
	// Count is how many resources; Since when the oldest was deferred,
	// Newest the latest.
	Count         int
	Since, Newest time.Time
	// Names are the first maxDeferralNames names, sorted.
	Names []string
}

// maxDeferralNames bounds Deferral.Names.
const maxDeferralNames = 10

// deferRemovalLocked reports whether e stays present instead of being
// removed by a: it is deferred already (unless a is unguarded, which ends
// the deferral), or a's guard reason defers it now.
func (c *Cache) deferRemovalLocked(a *applyRun, e *entry) bool {
	switch {
	case e.collection || e.state != StatePresent:
		return false
	case e.deferral != nil && a.unguarded:
		c.endDeferralLocked(nil, e)
		return false
	case e.deferral != nil:
		return true
	case a.deferReason == "":
		return false
	}
	e.deferral = &deferral{reason: a.deferReason, since: c.now()}
	g := deferralGroup{st: e.key.linkType(), reason: a.deferReason}
	set := c.deferred[g]
	if set == nil {
		set = make(map[*entry]struct{})
		c.deferred[g] = set
	}
	set[e] = struct{}{}
	a.noteDeferral(DeferralStarted, e.key, a.deferReason)
	return true
}

// endDeferralLocked ends e's deferral, if any; a (nil: nobody to tell)
// records it as the origin's return.
func (c *Cache) endDeferralLocked(a *applyRun, e *entry) {
	d := e.deferral
	if d == nil {
		return
	}
	e.deferral = nil
	g := deferralGroup{st: e.key.linkType(), reason: d.reason}
	if set := c.deferred[g]; set != nil {
		delete(set, e)
		if len(set) == 0 {
			delete(c.deferred, g)
		}
	}
	if a != nil {
		a.noteDeferral(DeferralReturned, e.key, d.reason)
	}
}

// noteDeferral counts one deferral started or ended in the run's events
// (one event per kind and reason: an Apply is of one link and type).
func (a *applyRun) noteDeferral(kind DeferralKind, k Key, reason string) {
	for i := range a.deferrals {
		if ev := &a.deferrals[i]; ev.Kind == kind && ev.Reason == reason {
			ev.Count++
			return
		}
	}
	ev := DeferralEvent{Kind: kind, Link: k.Link, TypeURL: k.TypeURL, Reason: reason, Count: 1}
	if kind == DeferralStarted {
		ev.Removals = a.removals
	}
	a.deferrals = append(a.deferrals, ev)
}

// deferredOfLocked counts st's deferred resources, every reason.
func (c *Cache) deferredOfLocked(st linkType) int {
	n := 0
	for g, set := range c.deferred {
		if g.st == st {
			n += len(set)
		}
	}
	return n
}

// DeferredCounts returns how many removals are deferred now, by link, type
// and reason (O(groups); Since, Newest and Names unset).
func (c *Cache) DeferredCounts() []Deferral {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]Deferral, 0, len(c.deferred))
	for g, set := range c.deferred {
		out = append(out, Deferral{Link: g.st.link, TypeURL: g.st.typeURL, Reason: g.reason, Count: len(set)})
	}
	return out
}

// Deferrals lists the deferred removals by link, type and reason, sorted
// by authority, group, type and reason. Its cost is that of walking the
// deferred entries (under the lock) and sorting their names (after it).
func (c *Cache) Deferrals() []Deferral {
	c.mu.Lock()
	out := make([]Deferral, 0, len(c.deferred))
	for g, set := range c.deferred {
		out = append(out, describeDeferred(g, set))
	}
	c.mu.Unlock()
	return sortedDeferrals(out)
}

// sortedDeferrals sorts ds and each one's names, keeping the first
// maxDeferralNames.
func sortedDeferrals(ds []Deferral) []Deferral {
	for i := range ds {
		slices.Sort(ds[i].Names)
		ds[i].Names = ds[i].Names[:min(len(ds[i].Names), maxDeferralNames)]
	}
	slices.SortFunc(ds, compareDeferrals)
	return ds
}

// describeDeferred sums up one group's deferred entries, with all their
// names, unsorted (sortedDeferrals cuts them).
func describeDeferred(g deferralGroup, set map[*entry]struct{}) Deferral {
	d := Deferral{Link: g.st.link, TypeURL: g.st.typeURL, Reason: g.reason, Count: len(set)}
	names := make([]string, 0, len(set))
	for e := range set {
		since := e.deferral.since
		if d.Since.IsZero() || since.Before(d.Since) {
			d.Since = since
		}
		if since.After(d.Newest) {
			d.Newest = since
		}
		names = append(names, e.key.Name)
	}
	d.Names = names
	return d
}

func compareDeferrals(x, y Deferral) int {
	if c := strings.Compare(x.Link.Authority, y.Link.Authority); c != 0 {
		return c
	}
	if c := strings.Compare(x.Link.Group, y.Link.Group); c != 0 {
		return c
	}
	if c := strings.Compare(x.TypeURL, y.TypeURL); c != 0 {
		return c
	}
	return strings.Compare(x.Reason, y.Reason)
}

// DeferralFilter selects deferred removals to release: of an authority
// ("": every one), a type URL ("": every type), deferred no later than
// DeferredBy (zero: whenever).
type DeferralFilter struct {
	Authority  string
	TypeURL    string
	DeferredBy time.Time
}

func (f DeferralFilter) matches(st linkType, d *deferral) bool {
	return (f.Authority == "" || f.Authority == st.link.Authority) &&
		(f.TypeURL == "" || f.TypeURL == st.typeURL) &&
		(f.DeferredBy.IsZero() || !d.since.After(f.DeferredBy))
}

// ReleaseDeferred applies the deferred removals f selects: each resource
// becomes absent and its watchers are told, one change per link and type.
// It returns what it released, by link, type and reason (Since and Newest
// of what was released; Names the first ones, sorted).
func (c *Cache) ReleaseDeferred(f DeferralFilter) []Deferral {
	var released []Deferral
	for {
		c.mu.Lock()
		st, gone := c.releasableLocked(f)
		if len(gone) == 0 {
			c.mu.Unlock()
			break
		}
		released = append(released, c.releaseLocked(st, gone)...) // unlocks
	}
	return sortedDeferrals(released)
}

// releasableLocked finds one link and type with deferred removals f
// selects, and those entries, by reason.
func (c *Cache) releasableLocked(f DeferralFilter) (linkType, map[deferralGroup]map[*entry]struct{}) {
	var st linkType
	var gone map[deferralGroup]map[*entry]struct{}
	for g, set := range c.deferred {
		if gone != nil && g.st != st {
			continue
		}
		for e := range set {
			if !f.matches(g.st, e.deferral) {
				continue
			}
			if gone == nil {
				st, gone = g.st, make(map[deferralGroup]map[*entry]struct{})
			}
			if gone[g] == nil {
				gone[g] = make(map[*entry]struct{})
			}
			gone[g][e] = struct{}{}
		}
	}
	return st, gone
}

// releaseLocked removes gone, deferred entries of st by group, as one
// change, and unlocks. It returns them by reason.
func (c *Cache) releaseLocked(st linkType, gone map[deferralGroup]map[*entry]struct{}) []Deferral {
	a := newApplyRun()
	now := c.now()
	out := make([]Deferral, 0, len(gone))
	n := 0
	for g, set := range gone {
		out = append(out, describeDeferred(g, set))
		for e := range set {
			c.endDeferralLocked(nil, e)
			c.removeResourceLocked(&a, e)
			n++
		}
	}
	c.lg.Debug("deferred removals released", zap.String("type_url", st.typeURL), zap.Int("resources", n))
	c.finishUnlock(&a, now)
	return out
}
