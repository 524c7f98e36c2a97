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
	defer ss.reportNacks() // rollout.go: the breaker hears of a NACK once unlocked
	typeURL, err := ss.accept(req.GetNode(), req.GetTypeUrl())
	if err != nil {
		return err
	}
	if err := ss.checkDelta(typeURL, req); err != nil {
		return err
	}
	subscribe, unsubscribe := req.GetResourceNamesSubscribe(), req.GetResourceNamesUnsubscribe()

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
		ts.sent.set(n, declaredRev(v))
	}
	ts.declaredLeft = int32(len(declared)) // within max_names_per_stream
	ss.mu.Unlock()

	return ss.subscribeRequested(subscribing{
		ts: ts, typeURL: typeURL, node: node, add: subscribe, first: first,
		dropLocked: func(ed *watchEdit) bool {
			ts.unsubscribeAllLocked(unsubscribe, ed)
			return len(unsubscribe) > 0
		},
		renewUnknown: true,
		declares:     true,
	})
}

// checkDelta checks a delta request's fields before anything is applied.
func (ss *session) checkDelta(typeURL string, req *discoveryv3.DeltaDiscoveryRequest) error {
	if err := ss.srv.checkNames("resource_names_subscribe", typeURL, req.GetResourceNamesSubscribe()); err != nil {
		return err
	}
	if err := ss.srv.checkNames("resource_names_unsubscribe", typeURL, req.GetResourceNamesUnsubscribe()); err != nil {
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
	return ss.srv.checkVersion("response_nonce", req.GetResponseNonce())
}

// unsubscribeAllLocked drops the names a delta request unsubscribes.
func (ts *typeState) unsubscribeAllLocked(unsubscribe []string, ed *watchEdit) {
	for _, n := range unsubscribe {
		ts.unsubscribeLocked(n, ed)
		ts.forgetUnknownLocked(n)
	}
	if ts.hasWildcardLocked() {
		// Spec: a wildcard client unsubscribing a name gets it back in
		// resources (still in the wildcard) or in removed_resources.
		for _, n := range unsubscribe {
			if n != cache.Wildcard {
				ts.forceLocked(n)
			}
		}
	}
}

// deltaResponsesLocked appends to out the response for one type built from
// the diff, changed resources and removals only: one, or several when it
// would not fit the send limit (sendlimit.go).
func (ss *session) deltaResponsesLocked(out []outMsg, w *work) []outMsg {
	w.diff.seq = ss.nonce + 1 // this response's nonce, if built
	d := w.diffLocked(ss.srv, xdstype.Delta)
	if len(d.updates) == 0 && len(d.removed) == 0 && len(d.errors) == 0 {
		return out
	}
	sort.Strings(d.removed)
	return ss.packLocked(out, w.ts, d, d.removed, wireErrors(d.errors))
}
