package downstream

import (
	"sort"
	"strconv"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"go.uber.org/zap"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/xds-relay/xds-relay/internal/cache"
)

// handleSotW applies one DiscoveryRequest. A request whose nonce is not the
// latest sent for its type is stale and ignored (spec: "Resource updates").
func (ss *session) handleSotW(req *discoveryv3.DiscoveryRequest) error {
	typeURL, err := ss.accept(req.GetNode(), req.GetTypeUrl())
	if err != nil {
		return err
	}
	names := req.GetResourceNames()
	if err := checkDuplicates("resource_names", typeURL, names); err != nil {
		return err
	}

	ss.mu.Lock()
	ts := ss.typeLocked(typeURL)
	node := ss.nodeLocked()
	nonce := req.GetResponseNonce()
	if nonce != "" && nonce != ts.lastNonce {
		ss.mu.Unlock()
		ss.logger().Debug("ignoring request with stale nonce", zap.String("type_url", typeURL),
			zap.String("nonce", nonce))
		return nil
	}
	if nonce != "" {
		if d := req.GetErrorDetail(); d != nil {
			ss.recordNackLocked(ts, nonce, d.GetMessage())
			ss.srv.m.nacks.WithLabelValues(typeLabel(typeURL)).Inc()
			ss.lg.Warn("client rejected a response", zap.String("type_url", typeURL),
				zap.String("nonce", nonce), zap.String("version_info", req.GetVersionInfo()),
				zap.String("error_detail", d.GetMessage()))
		} else {
			ts.ackVersion = req.GetVersionInfo()
		}
	}
	first := !ts.started
	ts.started = true
	if len(names) == 0 && !ts.explicit {
		// Legacy wildcard: no name ever subscribed on this type.
		names = []string{cache.Wildcard}
	} else if len(names) > 0 {
		ts.explicit = true
	}
	if ts.explicit && sameNames(ts, names) {
		// An ACK (or a repeat) of the current subscription: nothing to
		// change, and nothing to allocate.
		ss.mu.Unlock()
		return nil
	}
	want := make(map[string]struct{}, len(names))
	var added []string
	for _, n := range names {
		want[n] = struct{}{}
		if _, ok := ts.subs[n]; !ok {
			added = append(added, n)
		}
	}
	var ch change
	removedAny := false
	for n := range ts.subs {
		if _, ok := want[n]; !ok {
			removedAny = true
			if key, last, ok := ts.removeLocked(n); ok && last {
				ch.unwatch = append(ch.unwatch, key)
			}
		}
	}
	ss.mu.Unlock()

	rs, err := ss.resolveAll(typeURL, added, node)
	if err != nil {
		return err
	}

	ss.mu.Lock()
	for _, r := range rs {
		if r.err != nil {
			continue // logged and counted; SotW cannot say "does not exist"
		}
		if ts.addLocked(r.name, r.res.Key, r.res.Collection) {
			ch.add(r.res)
		}
		// Spec: the server must resend any newly requested resource.
		ts.force[r.name] = struct{}{}
	}
	if len(rs) > 0 || first || (removedAny && fullStateTypes[typeURL]) {
		ts.evalAll = true
	}
	ss.mu.Unlock()

	ch.apply(ss, node) // the writer waits until the loop's endRequest
	return nil
}

// sotwResponseLocked builds the response for one type: for full-state types
// every subscribed resource, for the others the changed ones.
func (ss *session) sotwResponseLocked(w *work) (outMsg, bool) {
	ts := w.ts
	full := fullStateTypes[ts.typeURL]
	changedAny := false
	var changedNames []string
	heartbeat := make(map[string]bool) // by name listed in this response
	note := func(name string, r *cache.Resource, force bool) {
		if _, dup := heartbeat[name]; dup {
			return // subscribed directly and through a collection: listed once
		}
		h, ok := ts.sent[name]
		if !force && !changed(h, ok, r) {
			ts.sent[name] = held{res: r, version: r.Version}
			return
		}
		if r.Body == nil && !heartbeatOnly(h, ok, r) {
			return
		}
		heartbeat[name] = heartbeatOnly(h, ok, r) && !force
		changedAny = true
		changedNames = append(changedNames, name)
		ts.sent[name] = held{res: r, version: r.Version}
	}
	noteAbsent := func(name string, force bool) {
		h, ok := ts.sent[name]
		if ok && h.absent && !force {
			return
		}
		if ok && !h.absent || force || !ok {
			changedAny = true // full state: the next response omits it
		}
		ts.sent[name] = held{absent: true}
	}
	for i := range w.probes {
		p := &w.probes[i]
		s, ok := stillSubscribedLocked(ts, p)
		if !ok {
			continue
		}
		_, force := ts.force[p.name]
		if p.state != cache.StatePending && !p.member {
			delete(ts.force, p.name)
		}
		if !p.collection {
			switch p.state {
			case cache.StatePresent:
				note(p.name, p.res, force)
			case cache.StateAbsent:
				noteAbsent(p.name, force)
			}
			continue
		}
		if p.member {
			name, isMember, left := s.member(p.key, p.res, p.state)
			switch {
			case isMember:
				_, forceMember := ts.force[name]
				note(name, p.res, forceMember)
			case left && !ts.subscribedLocked(name):
				delete(ts.sent, name)
				changedAny = true // full state: the next response omits it
			}
			continue
		}
		if p.state == cache.StatePending {
			continue
		}
		old := s.setMembers(p.members)
		for _, r := range p.members {
			note(r.Name, r, force)
		}
		for n := range old {
			if _, still := s.members[n]; !still && !ts.subscribedLocked(n) {
				delete(ts.sent, n)
				changedAny = true
			}
		}
		if force && len(p.members) == 0 {
			changedAny = true // answer a new subscription even when empty
		}
	}
	if !changedAny {
		return outMsg{}, false
	}
	var names []string
	if full {
		for n, h := range ts.sent {
			if h.res != nil && ts.subscribedLocked(n) {
				names = append(names, n)
			}
		}
		sort.Strings(names)
	} else {
		names = changedNames
		if len(names) == 0 {
			return outMsg{}, false
		}
	}
	resources := make([]*anypb.Any, 0, len(names))
	for _, n := range names {
		if a := sotwEnvelope(ss.srv.wrappers, n, ts.sent[n].res, heartbeat[n]); a != nil {
			resources = append(resources, a)
		}
	}
	ts.version++
	nonce := ss.nextNonceLocked()
	ts.lastNonce = nonce
	return outMsg{
		msg: &discoveryv3.DiscoveryResponse{
			VersionInfo: strconv.FormatUint(ts.version, 10),
			Resources:   resources,
			TypeUrl:     ts.typeURL,
			Nonce:       nonce,
		},
		typeURL: ts.typeURL,
		count:   len(resources),
	}, true
}

// sameNames reports whether names is exactly ts's subscription (a request
// with no duplicates, as checked before).
func sameNames(ts *typeState, names []string) bool {
	if len(names) != len(ts.subs) || len(names) == 0 {
		return false
	}
	for _, n := range names {
		if _, ok := ts.subs[n]; !ok {
			return false
		}
	}
	return true
}
