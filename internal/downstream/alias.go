package downstream

import (
	"github.com/xds-relay/xds-relay/internal/cache"
	"github.com/xds-relay/xds-relay/internal/xdstype"
)

// Names asked by alias, on delta streams (VHDS on demand: a client subscribes
// "routeconfig/domain"; the origin answers with the virtual host under its
// own name, the domain among its aliases). The cache reads an alias key
// as the resource it is an alias of (cache/aliases.go); the client is sent
// that resource under its own name, with its aliases, which is how it
// matches the answer to what it asked (spec: "Resource names"). The
// session remembers which own name answers which alias subscription
// (sub.via, typeState.via): that name counts as subscribed, leaves when
// the alias stops resolving to it (removed, if the client had it), and an
// unsubscription may name it instead of the alias. SotW streams, unary
// Fetch and REST polls are not answered by alias (VHDS is delta only).

// directOrAliasLocked diffs a name subscribed directly: as directLocked,
// or, when the resource found has another name (the name asked is an
// alias of it), under the resource's own name. Aliases are a delta
// matter (VHDS is delta only): a SotW name that only an alias leads to is
// left pending, as before.
func (d *diff) directOrAliasLocked(p *probe, variant xdstype.Variant) {
	if variant != xdstype.Delta && aliasedName(p) != "" {
		return
	}
	name := d.viaLocked(p)
	if name == p.name {
		d.directLocked(p)
		return
	}
	_, force := d.ts.force[p.name]
	d.updateLocked(name, p.res, force)
	delete(d.ts.force, p.name)
}

// viaLocked returns the name to answer probe p's subscription under: the
// resource's own name when p found it by alias, else the name asked. It
// keeps the subscription's via current, telling the client a resource it
// was sent by alias is gone when the alias no longer leads to it.
func (d *diff) viaLocked(p *probe) string {
	s := d.ts.subs.ptr(p.name)
	if s == nil {
		return p.name
	}
	via := aliasedName(p)
	if old := d.ts.viaOf(p.name, *s); via != old {
		d.ts.setViaLocked(p.name, s, via)
		if old != "" {
			d.leaveLocked(old)
		}
	}
	if via != "" {
		return via
	}
	return p.name
}

// aliasedName is the resource's own name when p found a resource under
// another name (an alias of it), else "".
func aliasedName(p *probe) string {
	if p.state != cache.StatePresent {
		return ""
	}
	return aliasOf(p.key, p.res)
}

// aliasOf returns r's own name when r, read for key k, is another
// resource that k is an alias of; "" when r is k's own (or nil).
func aliasOf(k cache.Key, r *cache.Resource) string {
	if r == nil || r.Name == k.Name {
		return ""
	}
	if c, err := cache.CanonicalName(r.Name); err == nil && c == k.Name {
		return "" // its own name, spelled otherwise
	}
	return r.Name
}

// setViaLocked records that name's subscription s is answered by the
// resource named via ("" when by none).
func (ts *typeState) setViaLocked(name string, s *sub, via string) {
	old := ts.viaOf(name, *s)
	if old == via {
		return
	}
	if old != "" {
		if ts.via[old]--; ts.via[old] <= 0 {
			delete(ts.via, old)
		}
	}
	if !s.ext {
		ts.setExtLocked(name, s, &subExt{key: ts.keyOf(name, *s)})
	}
	ts.ext[name].via = via
	if via != "" {
		if ts.via == nil {
			ts.via = make(map[string]int)
		}
		ts.via[via]++
	}
}

// unsubscribeViaLocked unsubscribes the alias subscriptions answered by
// the resource named name, when the client unsubscribes that name without
// being subscribed to it as such (spec: an unsubscription may name the
// resource or its alias). Reports whether it did.
func (ts *typeState) unsubscribeViaLocked(name string, ed *watchEdit) bool {
	if ts.subs.has(name) || ts.via[name] == 0 {
		return false
	}
	for n, s := range ts.subs.all() {
		if ts.viaOf(n, s) == name {
			ts.unsubscribeLocked(n, ed)
		}
	}
	return true
}
