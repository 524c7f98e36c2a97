package upstream

import "github.com/xds-relay/xds-relay/internal/cache"

// How many links an authority has. Each link is one origin stream (and a
// goroutine or two), and aggregation rules that key groups on what clients
// send (a resource name, a node field) would let clients open as many as
// they like: one stream subscribing 400 names under a rule that groups by
// name opened 400 (issue #26). So, before a client's request subscribes
// names on a link that is not open, the downstream side asks ReserveLink
// for a place for it among the authority's, under its limit
// (downstream.limits.max_groups_per_authority, passed in: the downstream
// Limits keep it, and a reload changes it there). A place is the link's
// from the reservation on: the Subscribe that follows opens the link in
// it; a place whose Subscribe never comes is given back at the second idle
// sweep, as a link is. A link closed as idle (idle.go), or whose authority
// a reload removed, gives its place back. Links opened without a
// reservation (none is asked for a snapshot's keys) take a place too.

// ReserveLink keeps id's link a place among its authority's. ok is true
// when id's link is open or has a place kept, or when fewer than max
// links of id.Authority are (then a place is kept for it: opened); false
// when the authority has max or more, and nothing changes.
func (m *Manager) ReserveLink(id cache.LinkID, max int) (opened, ok bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed || m.auths[id.Authority] == nil || m.links[id] != nil {
		return false, true // nothing to open (m.link opens nothing either)
	}
	if _, kept := m.reserved[id]; kept {
		return false, true
	}
	if m.linksOfLocked(id.Authority) >= max {
		return false, false
	}
	m.reserved[id] = 0
	return true, true
}

// linksOfLocked counts the links of authority, open or with a place kept.
// Only ReserveLink calls it, for a link that is not open: at most once a
// request per link it would open.
func (m *Manager) linksOfLocked(authority string) int {
	n := 0
	for id := range m.links {
		if id.Authority == authority {
			n++
		}
	}
	for id := range m.reserved {
		if id.Authority == authority {
			n++
		}
	}
	return n
}

// sweepReservedLocked gives back, at the idle sweep, the places kept since
// the sweep before that no Subscribe took.
func (m *Manager) sweepReservedLocked() {
	for id, sweeps := range m.reserved {
		if sweeps >= 1 {
			delete(m.reserved, id)
			continue
		}
		m.reserved[id] = sweeps + 1
	}
}

// UnreserveLink gives back the place ReserveLink kept for id, if no
// Subscribe opened its link yet: the request it was kept for was refused.
func (m *Manager) UnreserveLink(id cache.LinkID) {
	m.mu.Lock()
	delete(m.reserved, id)
	m.mu.Unlock()
}
