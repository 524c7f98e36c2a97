package downstream

import (
	"sort"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"

	"github.com/xds-relay/xds-relay/internal/cache"
	"github.com/xds-relay/xds-relay/internal/xdstype"
)

// handleDelta applies one DeltaDiscoveryRequest. Subscription changes are
// honoured whatever the nonce (spec: "Incremental xDS").
func (ss *session) handleDelta(req *discoveryv3.DeltaDiscoveryRequest) error {
	typeURL, err := ss.accept(req.GetNode(), req.GetTypeUrl())
	if err != nil {
		return err
	}
	subscribe, unsubscribe := req.GetResourceNamesSubscribe(), req.GetResourceNamesUnsubscribe()
	if err := ss.srv.checkNames("resource_names_subscribe", typeURL, subscribe); err != nil {
		return err
	}
	if err := ss.srv.checkNames("resource_names_unsubscribe", typeURL, unsubscribe); err != nil {
		return err
	}
	if err := ss.checkInitialVersions(req.GetInitialResourceVersions()); err != nil {
		return err
	}
	if err := ss.srv.refuseLocators(typeURL, "resource_locators_subscribe", len(req.GetResourceLocatorsSubscribe())); err != nil {
		return err
	}
	if err := ss.srv.refuseLocators(typeURL, "resource_locators_unsubscribe", len(req.GetResourceLocatorsUnsubscribe())); err != nil {
		return err
	}
	if err := ss.srv.checkVersion("response_nonce", req.GetResponseNonce()); err != nil {
		return err
	}

	ss.mu.Lock()
	ts := ss.typeLocked(typeURL)
	first := !ts.started
	var declared map[string]string
	if first {
		declared = req.GetInitialResourceVersions()
	}
	if err := ss.checkNamesLocked(ts, false, unsubscribe, subscribe, declared); err != nil {
		ss.mu.Unlock()
		return err
	}
	node := ss.nodeLocked()
	ts.started = true
	if nonce := req.GetResponseNonce(); nonce != "" {
		ss.answerLocked(ts, nonce, "", req.GetErrorDetail())
	}
	if first && !ts.explicit && len(subscribe) == 0 && len(unsubscribe) == 0 {
		// Legacy wildcard: no name ever subscribed on this type.
		subscribe = []string{cache.Wildcard}
	} else if len(subscribe) > 0 {
		ts.explicit = true
	}
	for n, v := range declared {
		ts.sent[n] = held{version: v}
	}
	ts.declaredLeft = len(declared)
	ss.mu.Unlock()

	rs, err := ss.resolveAll(typeURL, subscribe, node)
	if err != nil {
		return err
	}

	var ch change
	ss.mu.Lock()
	for _, n := range unsubscribe {
		ts.unsubscribeLocked(n, &ch)
		ts.forgetUnknownLocked(n)
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
	var owed []string
	for _, r := range rs {
		if r.err != nil {
			ts.unknown[r.name] = unknownName{detail: unknownStatus(r.err)}
			continue
		}
		delete(ts.unknown, r.name) // served now (a reload added its authority)
		ts.subscribeLocked(r, &ch)
		if h, ok := ts.sent[r.name]; !(first && ok && h.res == nil && !h.absent) {
			// The server must send every name in resource_names_subscribe,
			// unless the client just told us its version (reconnect).
			ts.force[r.name] = struct{}{}
			owed = append(owed, r.name)
		}
	}
	ss.gatherLocked(ts, owed) // answered together (gather.go)
	if len(rs) > 0 || len(unsubscribe) > 0 || first {
		ts.evalAll = true
	}
	ss.mu.Unlock()

	ch.apply(ss) // the writer waits until the loop's endRequest
	return nil
}

// deltaResponseLocked builds the response for one type from the diff:
// changed resources and removals only.
func (ss *session) deltaResponseLocked(w *work) (outMsg, bool) {
	ts := w.ts
	w.diff.seq = ss.nonce + 1 // this response's nonce, if built
	d := w.diffLocked(xdstype.Delta)
	if len(d.updates) == 0 && len(d.removed) == 0 && len(d.errors) == 0 {
		return outMsg{}, false
	}
	var resources []*discoveryv3.Resource
	if len(d.updates) > 0 {
		resources = make([]*discoveryv3.Resource, 0, len(d.updates))
		for _, u := range d.updates {
			resources = append(resources, deltaEnvelope(u.name, u.res, u.heartbeat))
		}
	}
	sort.Strings(d.removed)
	errs := wireErrors(d.errors)
	nonce := ss.nextNonceLocked()
	ts.lastNonce = nonce
	return outMsg{
		msg: &discoveryv3.DeltaDiscoveryResponse{
			TypeUrl:          ts.typeURL,
			Resources:        resources,
			RemovedResources: d.removed,
			Nonce:            nonce,
			ControlPlane:     ss.srv.controlPlane,
			ResourceErrors:   errs,
		},
		typeURL: ts.typeURL,
		count:   len(resources) + len(d.removed),
	}, true
}
