package downstream

import (
	"sort"
	"strconv"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"go.uber.org/zap"

	"github.com/xds-relay/xds-relay/internal/cache"
	"github.com/xds-relay/xds-relay/internal/xdstype"
)

// handleSotW applies one DiscoveryRequest. A request whose nonce is not the
// latest sent for its type is stale and ignored (spec: "Resource updates").
func (ss *session) handleSotW(req *discoveryv3.DiscoveryRequest) error {
	defer ss.reportNacks() // rollout.go: the breaker hears of a NACK once unlocked
	typeURL, err := ss.accept(req.GetNode(), req.GetTypeUrl())
	if err != nil {
		return err
	}
	names := req.GetResourceNames()
	if err := ss.checkSotW(typeURL, names, req); err != nil {
		return err
	}

	ss.mu.Lock()
	ts := ss.typeLocked(typeURL)
	node := ss.nodeLocked()
	nonce := req.GetResponseNonce()
	if nonce != "" && nonce != ts.lastNonce {
		ss.mu.Unlock()
		ss.logger().Debug("ignoring request with stale nonce", zap.String("type_url", clientText(typeURL)),
			zap.String("nonce", clientText(nonce)))
		return nil
	}
	if nonce != "" && !ss.answerLocked(ts, nonce, req.GetVersionInfo(), req.GetErrorDetail()) {
		ts.ackVersion = req.GetVersionInfo()
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
		ts.repeatedLocked(req)
		ss.mu.Unlock()
		return nil
	}
	if err := ss.checkNamesLocked(ts, true, nil, names, nil); err != nil {
		ss.mu.Unlock()
		return err
	}
	added := ts.unsubscribedLocked(names)
	ss.mu.Unlock()

	return ss.subscribeRequested(subscribing{
		ts: ts, typeURL: typeURL, node: node, add: added, first: first,
		dropLocked: func(ed *watchEdit) bool {
			return ts.keepOnlyLocked(names, ed) && fullStateTypes[typeURL]
		},
	})
}

// checkSotW checks a SotW request's fields before anything is applied.
func (ss *session) checkSotW(typeURL string, names []string, req *discoveryv3.DiscoveryRequest) error {
	if err := ss.srv.checkNames("resource_names", typeURL, names); err != nil {
		return err
	}
	if err := ss.srv.refuseLocators(typeURL, "resource_locators", len(req.GetResourceLocators())); err != nil {
		return err
	}
	if err := ss.srv.checkVersion("version_info", req.GetVersionInfo()); err != nil {
		return err
	}
	return ss.srv.checkVersion("response_nonce", req.GetResponseNonce())
}

// repeatedLocked applies an ACK (or a repeat) of the current subscription:
// nothing to change, and nothing to allocate. A repeat without a version
// after a response says the client has nothing of the type (how a relay
// above asks again): answer with everything it subscribes to, as for a
// new subscription.
func (ts *typeState) repeatedLocked(req *discoveryv3.DiscoveryRequest) {
	if req.GetResponseNonce() != "" && req.GetVersionInfo() == "" && req.GetErrorDetail() == nil {
		for n := range ts.subs.all() {
			ts.forceLocked(n)
		}
		ts.evalAll = true
	}
}

// sotwResponsesLocked appends to out the response for one type built from
// the diff: for full-state types every subscribed resource the client
// has (whenever anything changed, an omission included), unless that is
// over the send limit; for the others the changed ones, in several
// responses when they would not fit in one (sendlimit.go).
func (ss *session) sotwResponsesLocked(out []outMsg, w *work) []outMsg {
	ts := w.ts
	w.diff.seq = ts.version + 1 // this response's version_info, if built
	d := w.diffLocked(ss.srv, xdstype.SotW)
	if !fullStateTypes[ts.typeURL] {
		if len(d.updates) == 0 && len(d.errors) == 0 {
			return out
		}
		return ss.packLocked(out, ts, d, nil, wireErrors(d.errors))
	}
	if !d.changed {
		return out
	}
	resp, size := ss.fullStateLocked(ts, d.updates)
	errs := wireErrors(d.errors)
	nonce := strconv.FormatUint(ss.nonce+1, 10) // issued only if sent
	resp.own = ss.srv.ownSotW(resp.own, ts.version+1, ts.typeURL, nonce, errs)
	if !ss.srv.fullStateFits(ts.typeURL, size+len(resp.own)) {
		return out
	}
	ts.version++
	ss.nonce++
	ts.lastNonce = nonce
	return append(out, outMsg{msg: resp, typeURL: ts.typeURL, count: len(resp.shared), errs: errs})
}

// fullStateLocked lists, in a new response, every subscribed resource the
// client has of ts, by name; those in updates that are heartbeats go
// without their body. size is what its entries take.
func (ss *session) fullStateLocked(ts *typeState, updates []update) (resp *encodedResponse, size int) {
	var heartbeat map[string]bool
	for _, u := range updates {
		if u.heartbeat {
			if heartbeat == nil {
				heartbeat = make(map[string]bool)
			}
			heartbeat[u.name] = true
		}
	}
	var names []string
	for n, h := range ts.sent.all() {
		if h.res != nil && ts.subscribedLocked(n) {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	resp = newEncodedResponse(len(names))
	for _, n := range names {
		h, _ := ts.sent.get(n)
		if e := sotwEntry(n, h.res, heartbeat[n], ts.wrap); e != nil {
			resp.shared = append(resp.shared, e)
			size += e.Len()
		}
	}
	return resp, size
}

// sameNames reports whether names is exactly ts's subscription (a request
// with no duplicates, as checked before).
func sameNames(ts *typeState, names []string) bool {
	if len(names) != ts.subs.len() || len(names) == 0 {
		return false
	}
	for _, n := range names {
		if !ts.subs.has(n) {
			return false
		}
	}
	return true
}
