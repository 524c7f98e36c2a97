package downstream

import (
	rpcstatus "google.golang.org/genproto/googleapis/rpc/status"

	"github.com/xds-relay/xds-relay/internal/cache"
	"github.com/xds-relay/xds-relay/internal/xdstype"
)

// Safe delivery's rollouts as a session sees them (internal/cache,
// rollout.go). A key's newest revision may be held back from some
// clients: the NACK breaker tripped on it, or it rolls out in waves. The
// writer reads each key once (Lookup, LookupMembers), then, under
// the session's mutex, puts in place of a held revision the one this
// client is sent (cache.Rollout.Serve: the last accepted, or what it
// has, or nothing) before the diff, which then sends what differs from
// what the client has: the last accepted version to a client that was
// sent the held one (the rollback), nothing to one that has it already.
//
// Each client NACK of a response that carried new revisions is reported
// to the breaker (Options.Breaker) with those revisions, after the
// handler unlocks: a relay below names, in its breaker's NACK, the
// versions its own breaker holds (xdstype.BreakerDetail), which this
// relay attributes by name instead.

// servedLocked puts in w's probes, in place of each revision held back
// from this client, the one it is served (cache.Rollout.Serve); a name
// served nothing is left pending, a member served nothing left out.
func (ss *session) servedLocked(w *work) {
	ts := w.ts
	for i := range w.probes {
		p := &w.probes[i]
		if p.collection && !p.member {
			if p.rollouts != nil {
				ss.servedMembersLocked(ts, p)
			}
			continue
		}
		if p.ro.Hold == nil || p.res == nil {
			continue
		}
		name := p.name
		if p.member {
			name = p.res.Name
		}
		h, _ := ts.sent.get(name)
		served, _ := p.ro.Serve(p.res, ss.viewer, h.res)
		if served == nil {
			p.res, p.state = nil, cache.StatePending
			if p.member {
				p.state = cache.StateAbsent
			}
			continue
		}
		p.res = served
	}
}

// servedMembersLocked does servedLocked's work for the members of p, a
// collection listed in full: each held member is replaced, or left out.
func (ss *session) servedMembersLocked(ts *typeState, p *probe) {
	kept := p.members[:0]
	for _, r := range p.members {
		ro, ok := p.rollouts[r]
		if !ok || ro.Hold == nil {
			kept = append(kept, r)
			continue
		}
		h, _ := ts.sent.get(r.Name)
		served, _ := ro.Serve(r, ss.viewer, h.res)
		if served == nil {
			continue
		}
		if err, ok := p.memberErrs[r]; ok && served != r {
			p.memberErrs[served] = err
		}
		kept = append(kept, served)
	}
	clear(p.members[len(kept):])
	p.members = kept
}

// breakerNackLocked notes, for the breaker, the client's NACK (detail) of
// response seq of ts: the revisions that response carried new to the
// client; a relay below's breaker NACK, the versions it names. Reported
// by reportNacks once the handler unlocks.
func (ss *session) breakerNackLocked(ts *typeState, seq uint64, detail *rpcstatus.Status) {
	if ss.srv.breaker == nil || detail == nil {
		return
	}
	n := cache.Nack{Node: clientText(ss.node.GetId()), TypeURL: ts.typeURL, Detail: detail}
	if named, ok := xdstype.BreakerVersions(detail); ok {
		n.Relay = true
		for name, v := range named {
			if h, ok := ts.sent.get(name); ok && h.res != nil && h.version() == v {
				n.Revisions = append(n.Revisions, h.res)
			}
		}
	} else if seq != 0 {
		for _, h := range ts.sent.all() {
			if h.seq == seq && h.res != nil && !h.absent {
				n.Revisions = append(n.Revisions, h.res)
			}
		}
	}
	if len(n.Revisions) > 0 {
		ss.nacks = append(ss.nacks, n)
	}
}

// reportNacks tells the breaker of the NACKs noted (breakerNackLocked).
// The handlers call it on the way out, without the session's mutex.
func (ss *session) reportNacks() {
	if ss.srv.breaker == nil {
		return
	}
	ss.mu.Lock()
	nacks := ss.nacks
	ss.nacks = nil
	ss.mu.Unlock()
	for _, n := range nacks {
		ss.srv.breaker.Nacked(n)
	}
}

// Viewers returns the node of every open stream that sent one, as a
// rollout's hold tells clients apart (waves are cut from them). Its cost
// is a walk of the streams under the Server's mutex.
func (s *Server) Viewers() []cache.Viewer {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]cache.Viewer, 0, len(s.sessions))
	for _, ss := range s.sessions {
		if ss.indexed != "" {
			out = append(out, ss.viewer) // read-only once indexed
		}
	}
	return out
}

// sentVersion is what one client stream was sent of one key (SentVersions).
type sentVersion struct {
	key     int
	version string
	acked   bool
}

// SentVersions calls f with what each open stream has of each of keys: the
// stream's client, the key's index, the version it has ("": it was
// told the resource does not exist) and whether it ACKed the response
// that carried it (a stream subscribing to a key by several names counts
// once). What a stream has is copied under its mutex, and f called
// without it. Its cost is a walk of the streams, and per stream one
// lookup per key.
func (s *Server) SentVersions(keys []cache.Key, f func(v cache.Viewer, key int, version string, acked bool)) {
	var out []sentVersion
	for _, ss := range s.listSessions() {
		out = out[:0]
		ss.mu.Lock()
		v := ss.viewer
		for i, k := range keys {
			ts, _ := ss.types.get(k.TypeURL)
			if ts == nil {
				continue
			}
			if name, ok := ts.sentNameLocked(k); ok {
				h, _ := ts.sent.get(name)
				out = append(out, sentVersion{key: i, version: h.version(), acked: ts.ackedLocked(name, h)})
			}
		}
		ss.mu.Unlock()
		for _, h := range out {
			f(v, h.key, h.version, h.acked)
		}
	}
}

// sentNameLocked returns the name under which the client has something
// of key k: the key's own name, another name the client subscribed it
// under, or a collection member's.
func (ts *typeState) sentNameLocked(k cache.Key) (string, bool) {
	found := ""
	ts.keyNamesLocked(k, func(name string, _ sub) {
		if ts.sent.has(name) && found == "" {
			found = name
		}
	})
	if found != "" {
		return found, true
	}
	for _, s := range ts.colls {
		if s.key.Link != k.Link {
			continue
		}
		if name, ok := s.memberKeys[k.Name]; ok {
			if ts.sent.has(name) {
				return name, true
			}
		}
	}
	return "", false
}
