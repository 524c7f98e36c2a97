package downstream

import (
	"slices"
	"time"

	statuspb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/mem"

	"github.com/xds-relay/xds-relay/internal/cache"
	"github.com/xds-relay/xds-relay/internal/xdstype"
)

// The response diff: what the fresh lookups of one type (a work's probes)
// change for a client, compared with what it holds (typeState.sent). It is
// computed once, here, for both variants; each turns it into its response
// (sotwResponseLocked, deltaResponseLocked).

// update is one resource a client is sent.
type update struct {
	name      string // as the client knows it
	res       *cache.Resource
	heartbeat bool // a TTL refresh: name, version and TTL, no body
	// entry is what the response carries of it (entryFor), within the
	// send limit's room for one entry (sendlimit.go); nil: nothing.
	entry mem.Buffer
}

// diff is what changed for a client on one type. It lives in the type's
// work, so its buffers are reused from round to round. Its Locked methods
// write the typeState, under the session's mu, as diffLocked does.
type diff struct {
	ts      *typeState
	variant xdstype.Variant // xdstype.SotW or xdstype.Delta
	updates []update        // resources to send, in the order found
	removed []string        // names the client is told do not exist (delta's removed_resources)
	// errors: resource errors to send (resourceerrors.go).
	errors []resErr
	// changed: the client's view changed, if only because something it
	// held is gone (a SotW full-state response then lists what remains).
	changed bool
	// done: the names in updates (by index) and removed (-1): each goes
	// out once. Kept once there are more than manyProbes; fewer are
	// scanned. spareDone is an emptied one kept for that, from round to
	// round.
	done      map[string]int
	spareDone map[string]int
	// present: collection members found this time, by name, collected
	// only while a forced name is no longer subscribed (see forcedLocked);
	// fullLookup: a collection was listed in full.
	present    map[string]*cache.Resource
	fullLookup bool
	// seq: the response this diff becomes (held.seq), set by its builder.
	seq uint64
	// hold: the type is gathering (gather.go); its awaited names are left
	// for a later response, as are names that cannot be served.
	hold *gathering
	// srv is the Server the response is for; room the most one entry may
	// take (Server.entryRoom), set by diffLocked.
	srv  *Server
	room int
	// at: when the response is built (the ledger's send time), read once.
	at time.Time
}

// now is when the response is built: the first call reads the clock.
func (d *diff) now() time.Time {
	if d.at.IsZero() {
		d.at = time.Now()
	}
	return d.at
}

// reset empties d for reuse, dropping its references to resources;
// removed belongs to the response built from it.
func (d *diff) reset() {
	clear(d.updates)
	clear(d.errors)
	spare := d.spareDone
	if d.done != nil {
		clear(d.done)
		spare = d.done
	}
	*d = diff{updates: d.updates[:0], errors: d.errors[:0], spareDone: spare}
}

// diffLocked compares w's probes with what the client holds, records in
// w.ts what it will hold once the response is sent (sent, force, unknown,
// collection members), and returns what changed. Names subscribed directly
// come first, then collections and their members, then forced names no
// longer subscribed (the delta wildcard unsubscribe rule), then names that
// cannot be served. A collection answered for the first time (forced)
// resends every member (in delta, a glob's only, but those a reconnected
// client declared at their version). The variants differ in two rules: in delta an empty
// glob is answered with its own name, and members a reconnected client
// declared (initial_resource_versions) that are gone are removed.
func (w *work) diffLocked(srv *Server, variant xdstype.Variant) *diff {
	ts := w.ts
	d := &w.diff
	d.ts, d.variant, d.srv, d.room = ts, variant, srv, srv.entryRoom(ts.typeURL)
	for n := range ts.force {
		if !ts.subs.has(n) {
			d.present = make(map[string]*cache.Resource)
			break
		}
	}
	for i := range w.probes {
		if p := &w.probes[i]; !p.collection && stillSubscribedLocked(ts, p) && !d.holdsBack(p.name) {
			d.directOrAliasLocked(p, variant)
		}
	}
	for i := range w.probes {
		p := &w.probes[i]
		if !p.collection || !stillSubscribedLocked(ts, p) || d.holdsBack(p.name) {
			continue
		}
		c := ts.colls[p.name]
		if p.member {
			d.memberLocked(c, p)
			continue
		}
		if p.state != cache.StatePending {
			d.collectionLocked(c, p, variant)
		}
		if p.err != nil && (!isNotFound(p.err) || p.name == cache.Wildcard) {
			// The collection's own error (a glob's NOT_FOUND is its
			// answer as known empty: emptyGlobLocked).
			d.errorLocked(p.name, collectionWire(ts, p.name), p.err)
		}
	}
	d.forcedLocked()
	if d.hold == nil {
		d.unknownLocked()
	}
	return d
}

// directLocked diffs a name subscribed directly.
func (d *diff) directLocked(p *probe) {
	_, force := d.ts.force[p.name]
	switch p.state {
	case cache.StatePresent:
		d.updateLocked(p.name, p.res, force || d.heldError(p.name, p.err))
		if p.err != nil {
			d.errorLocked(p.name, p.name, p.err) // transient: beside the revision
		}
	case cache.StateAbsent:
		d.absentLocked(p.name, force, d.notFoundLocked(p.err, relayNotFound))
	default:
		if p.err != nil {
			d.errorLocked(p.name, p.name, p.err)
		}
		return // pending: still owed an answer
	}
	delete(d.ts.force, p.name)
}

// memberLocked diffs one member key of collection c, looked up alone.
func (d *diff) memberLocked(c *subExt, p *probe) {
	name, isMember, left := c.member(p.key, p.res, p.state)
	switch {
	case isMember:
		d.notePresent(name, p.res)
		_, force := d.ts.force[name]
		d.updateLocked(name, p.res, force || d.heldError(name, p.err))
		if p.err != nil {
			d.errorLocked(name, name, p.err)
		}
	case left:
		d.leaveLocked(name)
	}
}

// collectionLocked diffs collection c listed in full: members by the
// origin's spelling; members that left are removed.
func (d *diff) collectionLocked(c *subExt, p *probe, variant xdstype.Variant) {
	ts := d.ts
	_, force := ts.force[p.name]
	d.fullLookup = true
	old := c.setMembers(p.members)
	for _, r := range p.members {
		d.notePresent(r.Name, r)
		_, forceMember := ts.force[r.Name]
		merr := p.memberErrs[r]
		forceMember = forceMember || d.heldError(r.Name, merr)
		if force && (variant == xdstype.SotW || (p.name != cache.Wildcard && !declared(ts, r.Name))) {
			// A new subscription resends every member (the server sends
			// every name subscribed; a glob's are its members: a relay
			// below learns so that the glob is answered), but not, in
			// delta, what a reconnecting client declared it holds, nor
			// the legacy wildcard's.
			forceMember = true
		}
		d.updateLocked(r.Name, r, forceMember)
		if merr != nil {
			d.errorLocked(r.Name, r.Name, merr)
		}
	}
	for n := range old {
		if _, still := c.members[n]; !still {
			d.leaveLocked(n)
		}
	}
	if variant == xdstype.Delta {
		d.vanishedLocked(c)
	}
	d.emptyGlobLocked(c, p)
	if force && len(p.members) == 0 {
		d.changed = true // answer a new subscription even when empty
	}
	delete(ts.force, p.name)
}

// declared: the client told its version of name on reconnect
// (initial_resource_versions) and was not answered about it since.
func declared(ts *typeState, name string) bool {
	h, ok := ts.sent.get(name)
	return ok && h.res == nil && !h.absent && h.version() != ""
}

// vanishedLocked removes the members of c a reconnected client declared
// (initial_resource_versions) that are not there any more.
func (d *diff) vanishedLocked(c *subExt) {
	for n, h := range d.ts.sent.all() {
		if h.res == nil && !h.absent && h.version() != "" && !d.ts.subscribedLocked(n) && c.holds(n) {
			d.absentLocked(n, false, nil)
			d.ts.sent.del(n)
		}
	}
}

// emptyGlobLocked answers an empty glob with its own name, once until it
// has members again: in removed_resources (delta), with NOT_FOUND in
// resource_errors (SotW; delta when the origin sent one).
func (d *diff) emptyGlobLocked(c *subExt, p *probe) {
	if p.name == cache.Wildcard {
		return
	}
	if len(p.members) > 0 {
		c.emptyReported = false
		if h, ok := d.ts.sent.get(p.name); ok && (h.absent || h.err == nil) {
			d.ts.sent.del(p.name)
		}
		return
	}
	if !c.emptyReported {
		c.emptyReported = true
		d.absentLocked(p.name, true, d.notFoundLocked(p.err, relayNotFound))
	}
}

// forcedLocked answers names still forced but no longer subscribed (a
// wildcard client unsubscribed them: spec "Incremental xDS"): with the
// resource when it is still in a collection, else as removed. Only once
// the collections were listed in full.
func (d *diff) forcedLocked() {
	if !d.fullLookup {
		return
	}
	ts := d.ts
	for n := range ts.force {
		if ts.subs.has(n) {
			continue
		}
		if r, ok := d.present[n]; ok {
			d.updateLocked(n, r, true)
		} else {
			d.absentLocked(n, true, nil)
			ts.sent.del(n)
		}
		delete(ts.force, n)
	}
}

// unknownLocked answers, once each, the names that cannot be served:
// with the relay's NOT_FOUND saying why (an unknown authority, a type not
// carried), and in delta's removed_resources. A denied glob is answered
// as if it did not exist: over delta, removed_resources alone.
func (d *diff) unknownLocked() {
	for n, u := range d.ts.unknown {
		if !u.reported {
			u.reported = true
			d.ts.unknown[n] = u
			detail := u.detail
			if detail == relayNotFound && d.variant == xdstype.Delta {
				detail = nil
			}
			d.absentLocked(n, true, detail)
		}
	}
}

// updateLocked notes r as the client's revision of name, and adds it to
// the updates unless the client already holds it (force: add it anyway).
// A name goes out once; if any of its notes is forced, with its body. A
// revision too large to send is left out (tooLargeLocked).
func (d *diff) updateLocked(name string, r *cache.Resource, force bool) {
	if i, done := d.find(name); done {
		if force && i >= 0 && d.updates[i].heartbeat {
			d.withBodyLocked(&d.updates[i])
		}
		return
	}
	h, ok := d.ts.sent.get(name)
	if !force && !changed(h, ok, r) {
		d.ts.sent.set(name, h.renoted(r))
		return
	}
	heartbeat := heartbeatOnly(h, ok, r) && !force
	if heartbeat && !d.ts.ttl {
		// A TTL refresh, for a client that takes no TTL: nothing to send.
		d.ts.sent.set(name, h.renoted(r))
		return
	}
	if r.Body == nil && !heartbeat {
		return // nothing to send
	}
	e := entryFor(d.variant, d.ts, name, r, heartbeat)
	if e != nil && e.Len() > d.room {
		d.tooLargeLocked(name, r, e.Len())
		return
	}
	d.updates = append(d.updates, update{name: name, res: r, heartbeat: heartbeat, entry: e})
	d.markDone(name, len(d.updates)-1)
	prev := d.ts.noteSentLocked(name, h, ok, r, d.seq, d.now()) // propagation.go
	d.ts.sent.set(name, sentHeld(r, d.seq).withPrev(prev))
	d.changed = true
}

// withBodyLocked makes u, a heartbeat, carry its body. One too large to
// send stays a heartbeat: the client holds that body already (a heartbeat
// has the version it holds).
func (d *diff) withBodyLocked(u *update) {
	e := entryFor(d.variant, d.ts, u.name, u.res, false)
	if e != nil && e.Len() > d.room {
		return
	}
	u.heartbeat, u.entry = false, e
}

// tooLargeLocked leaves r out, its entry (size bytes) too large to send:
// what the client holds of name stays as it was, and it is told why in
// resource_errors, once per revision (sendlimit.go).
func (d *diff) tooLargeLocked(name string, r *cache.Resource, size int) {
	d.errorLocked(name, name, d.srv.tooLarge(d.ts.typeURL, r, size))
}

// absentLocked tells the client name does not exist, unless it was told
// already (force: tell it again); with detail, also as a resource error
// (notFoundLocked).
func (d *diff) absentLocked(name string, force bool, detail *statuspb.Status) {
	if _, done := d.find(name); done {
		return
	}
	h, ok := d.ts.sent.get(name)
	if ok && h.absent && !force {
		return
	}
	d.removed = append(d.removed, name)
	d.markDone(name, -1)
	prev := d.ts.replacedLocked(name, h, ok) // propagation.go
	d.ts.sent.set(name, held{absent: true, seq: d.seq, err: detail}.withPrev(prev))
	if detail != nil {
		d.errors = append(d.errors, resErr{name: name, detail: detail})
	}
	d.changed = true
}

// leaveLocked forgets name, a member that left its collection, unless the
// client is still subscribed to it otherwise; a client that held it is
// told.
func (d *diff) leaveLocked(name string) {
	if d.ts.subscribedLocked(name) {
		return
	}
	if d.ts.sent.has(name) {
		d.absentLocked(name, false, nil)
	}
	d.ts.sent.del(name)
	d.changed = true // SotW full state: the next response omits it
}

func (d *diff) notePresent(name string, r *cache.Resource) {
	if d.present != nil {
		d.present[name] = r
	}
}

// find reports whether name is already in updates (i is its index) or
// in removed (i is -1).
func (d *diff) find(name string) (i int, ok bool) {
	if d.done != nil {
		i, ok = d.done[name]
		return i, ok
	}
	for i := range d.updates {
		if d.updates[i].name == name {
			return i, true
		}
	}
	return -1, slices.Contains(d.removed, name)
}

// markDone notes name, just added to updates at i (-1: to removed), in
// done once there are too many to scan.
func (d *diff) markDone(name string, i int) {
	if d.done != nil {
		d.done[name] = i
		return
	}
	if len(d.updates)+len(d.removed) <= manyProbes {
		return
	}
	if d.done, d.spareDone = d.spareDone, nil; d.done == nil {
		d.done = make(map[string]int, 2*(len(d.updates)+len(d.removed)))
	}
	for i := range d.updates {
		d.done[d.updates[i].name] = i
	}
	for _, n := range d.removed {
		d.done[n] = -1
	}
}

// stillSubscribedLocked reports whether p still describes a subscription
// (it was looked up without the lock).
func stillSubscribedLocked(ts *typeState, p *probe) bool {
	s, ok := ts.subs.get(p.name)
	return ok && s.collection == p.collection && (p.member || ts.keyOf(p.name, s) == p.key)
}

// changed reports whether the client holding h lacks r.
func changed(h held, ok bool, r *cache.Resource) bool {
	if !ok || h.absent {
		return true
	}
	if h.res != nil {
		return h.res != r
	}
	// Known only by version (initial_resource_versions).
	return h.version() != r.Version
}

// heartbeatOnly reports whether the client holding h needs only the TTL
// refresh of r, not its body: r is a heartbeat, or a revision with the
// version and the very body the client already has (the cache stores a
// heartbeat as such a revision with the new TTL).
func heartbeatOnly(h held, ok bool, r *cache.Resource) bool {
	if !ok || h.absent || h.version() != r.Version {
		return false
	}
	return r.Heartbeat || (h.res != nil && h.res.Body == r.Body && r.TTL != nil)
}
