package cache

import (
	"google.golang.org/grpc/codes"
)

// Screening an origin change (package delivery's checks, as the cache sees
// them). Before an Apply changes anything, when a Validator or a
// RemovalGuard is set, screen looks at the update under the lock (which
// revisions are new, what it would remove) and asks them without it:
//
//   - the Validator, about each new revision: a revision whose content
//     differs from the cached one (an unchanged resend is not asked
//     again). A refused revision is left out of the update: not cached,
//     never sent; in a FullState update its key keeps the revision it has
//     (it is not taken as removed), and a key pending until then stays
//     pending. Apply returns the refusals, for the origin's NACK.
//   - the RemovalGuard, about the update's removals: the present
//     resources it would make absent, and the collections it would empty.
//     When it names a reason, those removals are deferred (deferred.go).

// Validator checks new revisions before they enter the cache
// (delivery.validate). Validate is called without the cache lock, once
// per new revision of k, possibly from several goroutines at once; it
// returns why the revision is refused, nil to accept it.
type Validator interface {
	Validate(k Key, r *Resource) error
}

// RemovalGuard decides whether an origin change's removals are deferred
// (delivery.deletion_guard). Both methods are called without the cache
// lock and must not call back into the cache.
type RemovalGuard interface {
	// DeferRemovals returns why the removals r describes are deferred, or
	// "" to apply them.
	DeferRemovals(r Removals) (reason string)
	// Deferred is told, after an Apply, of the deferrals it started and
	// ended (in order).
	Deferred(events []DeferralEvent)
}

// Removals is what one origin change would remove of one link's type, not
// counting what is deferred already.
type Removals struct {
	Link    LinkID
	TypeURL string
	// Present counts the resources of the type present on the link before
	// the change, deferred ones left out; Removed how many of them the
	// change would make absent.
	Present, Removed int
	// Emptied names the collections (Wildcard, globs) clients watch that
	// the change would leave without a member, having had one.
	Emptied []string
}

// Refusal is a new revision the Validator refused.
type Refusal struct {
	// Name is the resource's name as the origin sent it.
	Name string
	Err  error
}

// Applied is what Apply reports of an update.
type Applied struct {
	// Refused are the revisions the Validator refused, in update order.
	Refused []Refusal
}

// screen asks the Validator about u's new revisions and the RemovalGuard
// about u's removals (see above). It returns u without the refused
// revisions, the refusals, and the guard's reason ("": apply removals)
// with what it was asked.
func (c *Cache) screen(u Update) (Update, []Refusal, string, Removals) {
	c.mu.Lock()
	var fresh []Revision
	if c.validator != nil {
		fresh = c.freshLocked(u)
	}
	var plan Removals
	if c.guard != nil && !u.Unguarded {
		plan = c.removalsLocked(u)
	}
	c.mu.Unlock()
	var refused []Refusal
	var out map[*Resource]struct{}
	for _, rv := range fresh {
		if err := c.validator.Validate(rv.Key, rv.Res); err != nil {
			refused = append(refused, Refusal{Name: rv.Res.Name, Err: err})
			if out == nil {
				out = make(map[*Resource]struct{})
			}
			out[rv.Res] = struct{}{}
		}
	}
	reason := ""
	if plan.Removed > 0 {
		reason = c.guard.DeferRemovals(plan)
	}
	if out != nil {
		u = withoutRefused(u, out)
	}
	return u, refused, reason, plan
}

// freshLocked returns u's new revisions: those whose content (bytes,
// fields, TTL) differs from the cached revision of their key.
func (c *Cache) freshLocked(u Update) []Revision {
	var fresh []Revision
	for _, r := range u.Resources {
		if r == nil || r.Heartbeat || r.Body == nil {
			continue
		}
		name, err := CanonicalName(r.Name)
		if err != nil || isCollectionName(name) {
			continue // Apply skips it
		}
		k := Key{Link: u.Link, TypeURL: u.TypeURL, Name: name}
		if e := c.entries[k]; e != nil && e.state == StatePresent && identical(e.res, r) {
			continue
		}
		fresh = append(fresh, Revision{Key: k, Res: r})
	}
	return fresh
}

// withoutRefused returns u without the revisions in out: in a FullState
// update their names are unanswered (the cached revision stays), and no
// name of theirs is completed (a pending key stays pending).
func withoutRefused(u Update, out map[*Resource]struct{}) Update {
	kept := make([]*Resource, 0, len(u.Resources)-len(out))
	names := make(map[string]struct{}, len(out))
	for _, r := range u.Resources {
		if _, refused := out[r]; !refused {
			kept = append(kept, r)
			continue
		}
		if name, err := CanonicalName(r.Name); err == nil {
			names[name] = struct{}{}
		}
	}
	u.Resources = kept
	var complete []string
	for _, n := range u.Complete {
		if _, refused := names[n]; !refused {
			complete = append(complete, n)
		}
	}
	u.Complete = complete
	if u.FullState {
		u.Unanswered = append(append([]string(nil), u.Unanswered...), keysOf(names)...)
	}
	return u
}

func keysOf(m map[string]struct{}) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// removalsLocked is what u would remove of its link's type: the present
// resources it names in Removed (a collection there: its present members)
// and, for a FullState update, every present resource it does not hold,
// leave unanswered or carry a transient error for; deferred ones are not
// counted again.
func (c *Cache) removalsLocked(u Update) Removals {
	st := linkType{link: u.Link, typeURL: u.TypeURL}
	p := Removals{Link: u.Link, TypeURL: u.TypeURL, Present: c.present[st] - c.deferredOfLocked(st)}
	var gone map[string]struct{} // made for the first removal: most updates have none
	add := func(e *entry) {
		if !e.collection && e.state == StatePresent && e.deferral == nil {
			if gone == nil {
				gone = make(map[string]struct{})
			}
			gone[e.key.Name] = struct{}{}
		}
	}
	for _, n := range u.Removed {
		e := c.entries[Key{Link: u.Link, TypeURL: u.TypeURL, Name: n}]
		switch {
		case e == nil:
		case e.collection:
			for _, m := range c.membersLocked(e.key) {
				add(m)
			}
		default:
			add(e)
		}
	}
	if u.FullState {
		keep := fullStateKeeps(u)
		for name, e := range c.byType[st] {
			if _, ok := keep[name]; !ok {
				add(e)
			}
		}
	}
	p.Removed = len(gone)
	if p.Removed > 0 {
		p.Emptied = c.emptiedLocked(st, p, gone)
	}
	return p
}

// fullStateKeeps is what a FullState update leaves as it is: the names of
// its resources, what it leaves unanswered, and the names it carries a
// transient error for (resourceerrors.go).
func fullStateKeeps(u Update) map[string]struct{} {
	keep := make(map[string]struct{}, len(u.Resources)+len(u.Unanswered))
	for _, r := range u.Resources {
		if r == nil {
			continue
		}
		if name, err := CanonicalName(r.Name); err == nil {
			keep[name] = struct{}{}
		}
	}
	for _, n := range u.Unanswered {
		keep[n] = struct{}{}
	}
	for _, re := range u.Errors {
		if codes.Code(re.Detail.GetCode()) != codes.NotFound {
			keep[re.Name] = struct{}{}
		}
	}
	return keep
}

// emptiedLocked names the known collections of st that have a present
// member (not deferred) and would have none once gone is removed.
func (c *Cache) emptiedLocked(st linkType, p Removals, gone map[string]struct{}) []string {
	var out []string
	for name, e := range c.colls[st] {
		if e.state != StatePresent {
			continue // not answered yet: clients were not told of members
		}
		if name == Wildcard {
			if p.Present > 0 && p.Removed == p.Present {
				out = append(out, name)
			}
			continue
		}
		had, left := 0, false
		for _, m := range c.globMembers[e.key] {
			if m.deferral != nil {
				continue
			}
			had++
			if _, ok := gone[m.key.Name]; !ok {
				left = true
				break
			}
		}
		if had > 0 && !left {
			out = append(out, name)
		}
	}
	return out
}
