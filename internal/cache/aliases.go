package cache

// The alias index. Aliases are other names a resource goes by (VHDS: a
// client subscribes "routeconfig/domain"; the origin answers with the
// virtual host under its own name, the domain among its aliases). A
// watched key that is an alias of a present resource reads as that
// resource (Lookup, servingLocked: lookup.go) and is notified when it
// changes, takes or drops the alias, or goes; a resource watched through
// an alias is held (never evicted). The index (Cache.aliases: alias key
// to the entry whose current revision lists it) holds at most
// maxIndexedAliases aliases per resource; the latest revision to claim an
// alias wins it. An alias never names another authority's key
// (authority.go).

// maxIndexedAliases bounds the aliases of one revision the cache serves
// watchers of alias keys by (all of them are passed on to clients).
const maxIndexedAliases = 64

// aliasKeys returns the keys of r's aliases on e's link and type, at
// most maxIndexedAliases: canonical, neither e's own key nor a collection,
// and owned by e's link (authority.go): an alias never names another
// authority's key.
func aliasKeys(e *entry, r *Resource) []Key {
	if r == nil || len(r.Aliases) == 0 || e.collection {
		return nil
	}
	var out []Key
	for _, a := range r.Aliases {
		if len(out) == maxIndexedAliases {
			break
		}
		c, err := CanonicalName(a)
		if err != nil || c == e.key.Name || isCollectionName(c) || !e.key.Link.Owns(c) {
			continue
		}
		out = append(out, Key{Link: e.key.Link, TypeURL: e.key.TypeURL, Name: c})
	}
	return out
}

// indexAliasesLocked moves e's aliases in the alias index from revision
// old to revision cur (nil: none).
func (c *Cache) indexAliasesLocked(e *entry, old, cur *Resource) {
	if old == cur || (len(old.aliasesOrNil()) == 0 && len(cur.aliasesOrNil()) == 0) {
		return
	}
	for _, k := range aliasKeys(e, old) {
		if c.aliases[k] == e {
			delete(c.aliases, k)
		}
	}
	for _, k := range aliasKeys(e, cur) {
		c.aliases[k] = e
	}
}

func (r *Resource) aliasesOrNil() []string {
	if r == nil {
		return nil
	}
	return r.Aliases
}

// noteAliasesLocked records, as changes of a, the watched alias keys of
// e's current revision (their watchers read e through them). Called before
// and after e changes, so both the old and the new aliases are told.
func (c *Cache) noteAliasesLocked(a *applyRun, e *entry) {
	if e.state != StatePresent {
		return
	}
	for _, k := range aliasKeys(e, e.res) {
		if c.aliases[k] == e && c.watchers[k].size() > 0 {
			a.change(k, false)
		}
	}
}

// aliasHeldLocked: some client watches an alias key served by e.
func (c *Cache) aliasHeldLocked(e *entry) bool {
	for _, k := range aliasKeys(e, e.res) {
		if c.aliases[k] == e && c.watchers[k].size() > 0 {
			return true
		}
	}
	return false
}
