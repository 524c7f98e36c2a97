package downstream

import (
	"sort"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"go.uber.org/zap"

	"github.com/xds-relay/xds-relay/internal/cache"
)

// handleDelta applies one DeltaDiscoveryRequest. Subscription changes are
// honoured whatever the nonce (spec: "Incremental xDS").
func (ss *session) handleDelta(req *discoveryv3.DeltaDiscoveryRequest) error {
	typeURL, err := ss.accept(req.GetNode(), req.GetTypeUrl())
	if err != nil {
		return err
	}
	subscribe, unsubscribe := req.GetResourceNamesSubscribe(), req.GetResourceNamesUnsubscribe()
	if err := checkDuplicates("resource_names_subscribe", typeURL, subscribe); err != nil {
		return err
	}
	if err := checkDuplicates("resource_names_unsubscribe", typeURL, unsubscribe); err != nil {
		return err
	}

	ss.mu.Lock()
	ts := ss.typeLocked(typeURL)
	node := ss.nodeLocked()
	first := !ts.started
	ts.started = true
	if nonce := req.GetResponseNonce(); nonce != "" {
		if d := req.GetErrorDetail(); d != nil {
			ss.recordNackLocked(ts, nonce, d.GetMessage())
			ss.srv.m.nacks.WithLabelValues(typeLabel(typeURL)).Inc()
			ss.lg.Warn("client rejected a response", zap.String("type_url", typeURL),
				zap.String("nonce", nonce), zap.String("error_detail", d.GetMessage()))
		}
	}
	if first && !ts.explicit && len(subscribe) == 0 && len(unsubscribe) == 0 {
		// Legacy wildcard: no name ever subscribed on this type.
		subscribe = []string{cache.Wildcard}
	} else if len(subscribe) > 0 {
		ts.explicit = true
	}
	if first {
		for n, v := range req.GetInitialResourceVersions() {
			ts.sent[n] = held{version: v}
		}
	}
	ss.mu.Unlock()

	rs, err := ss.resolveAll(typeURL, subscribe, node)
	if err != nil {
		return err
	}

	var ch change
	ss.mu.Lock()
	for _, n := range unsubscribe {
		delete(ts.unknown, n)
		if key, last, ok := ts.removeLocked(n); ok && last {
			ch.unwatch = append(ch.unwatch, key)
		}
	}
	if ts.hasWildcardLocked() {
		// Spec: a wildcard client unsubscribing a name gets it back in
		// resources (still in the wildcard) or in removed_resources.
		for _, n := range unsubscribe {
			if n != cache.Wildcard {
				ts.force[n] = struct{}{}
			}
		}
	}
	for _, r := range rs {
		if r.err != nil {
			ts.unknown[r.name] = false
			continue
		}
		if ts.addLocked(r.name, r.res.Key, r.res.Collection) {
			ch.add(r.res)
		}
		if h, ok := ts.sent[r.name]; !(first && ok && h.res == nil && !h.absent) {
			// The server must send every name in resource_names_subscribe,
			// unless the client just told us its version (reconnect).
			ts.force[r.name] = struct{}{}
		}
	}
	if len(rs) > 0 || len(unsubscribe) > 0 || first {
		ts.evalAll = true
	}
	ss.mu.Unlock()

	ch.apply(ss, node) // the writer waits until the loop's endRequest
	return nil
}

// deltaResponseLocked builds the response for one type from fresh lookups:
// changed resources and removals only.
func (ss *session) deltaResponseLocked(w *work) (outMsg, bool) {
	ts := w.ts
	var resources []*discoveryv3.Resource
	var removed []string
	sentNow := make(map[string]struct{})
	addRes := func(name string, r *cache.Resource, force bool) {
		if _, dup := sentNow[name]; dup {
			return
		}
		h, ok := ts.sent[name]
		if !force && !changed(h, ok, r) {
			ts.sent[name] = held{res: r, version: r.Version}
			return
		}
		env := deltaEnvelope(name, r, heartbeatOnly(h, ok, r) && !force)
		if env == nil {
			return
		}
		sentNow[name] = struct{}{}
		resources = append(resources, env)
		ts.sent[name] = held{res: r, version: r.Version}
	}
	addRemoved := func(name string, force bool) {
		if _, dup := sentNow[name]; dup {
			return
		}
		h, ok := ts.sent[name]
		if ok && h.absent && !force {
			return
		}
		sentNow[name] = struct{}{}
		removed = append(removed, name)
		ts.sent[name] = held{absent: true}
	}

	var collections []*probe
	for i := range w.probes {
		p := &w.probes[i]
		if _, ok := stillSubscribedLocked(ts, p); !ok {
			continue
		}
		if p.collection {
			collections = append(collections, p)
			continue
		}
		_, force := ts.force[p.name]
		switch p.state {
		case cache.StatePresent:
			addRes(p.name, p.res, force)
			delete(ts.force, p.name)
		case cache.StateAbsent:
			addRemoved(p.name, force)
			delete(ts.force, p.name)
		}
	}
	// Collections: members by the origin's spelling; members that left
	// (and are not otherwise subscribed) are removed.
	present := make(map[string]*cache.Resource)
	fullLookup := false
	for _, p := range collections {
		s := ts.subs[p.name]
		if p.member {
			name, isMember, left := s.member(p.key, p.res, p.state)
			switch {
			case isMember:
				present[name] = p.res
				_, force := ts.force[name]
				addRes(name, p.res, force)
			case left && !ts.subscribedLocked(name):
				if _, ok := ts.sent[name]; ok {
					addRemoved(name, false)
				}
				delete(ts.sent, name)
			}
			continue
		}
		if p.state == cache.StatePending {
			continue
		}
		fullLookup = true
		old := s.setMembers(p.members)
		for _, r := range p.members {
			present[r.Name] = r
			_, force := ts.force[r.Name]
			addRes(r.Name, r, force)
		}
		for n := range old {
			if _, still := s.members[n]; !still && !ts.subscribedLocked(n) {
				if _, ok := ts.sent[n]; ok {
					addRemoved(n, false)
				}
				delete(ts.sent, n)
			}
		}
		// A reconnected client may hold members (initial_resource_versions)
		// that vanished while it was away: they are removed.
		for n, h := range ts.sent {
			if h.res == nil && !h.absent && h.version != "" && !ts.subscribedLocked(n) && s.holds(n) {
				addRemoved(n, false)
				delete(ts.sent, n)
			}
		}
		if len(p.members) == 0 && p.name != cache.Wildcard {
			if !s.emptyReported {
				// An empty glob is answered with its own name.
				s.emptyReported = true
				addRemoved(p.name, true)
			}
		} else {
			s.emptyReported = false
			if p.name != cache.Wildcard {
				delete(ts.sent, p.name)
			}
		}
		delete(ts.force, p.name)
	}
	// Forced names no longer subscribed: the wildcard unsubscribe rule.
	for n := range ts.force {
		if _, sub := ts.subs[n]; sub {
			continue
		}
		if !fullLookup {
			continue // collections not looked up this time
		}
		if r, ok := present[n]; ok {
			addRes(n, r, true)
		} else {
			addRemoved(n, true)
			delete(ts.sent, n)
		}
		delete(ts.force, n)
	}
	for n, reported := range ts.unknown {
		if !reported {
			ts.unknown[n] = true
			addRemoved(n, true)
		}
	}
	if len(resources) == 0 && len(removed) == 0 {
		return outMsg{}, false
	}
	sort.Strings(removed)
	nonce := ss.nextNonceLocked()
	ts.lastNonce = nonce
	return outMsg{
		msg: &discoveryv3.DeltaDiscoveryResponse{
			TypeUrl:          ts.typeURL,
			Resources:        resources,
			RemovedResources: removed,
			Nonce:            nonce,
		},
		typeURL: ts.typeURL,
		count:   len(resources) + len(removed),
	}, true
}
