package upstream

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"

	"github.com/xds-relay/xds-relay/internal/cache"
	"github.com/xds-relay/xds-relay/internal/xdstype"
)

// deltaState is what one delta attempt told the origin. owned by the
// link's run goroutine.
type deltaState struct {
	nodeSent bool
	// seq numbers the subscription requests of the attempt, one per type
	// and sync (the parts of a split request share it).
	seq int
	// sent: type → names subscribed upstream on this attempt → the seq of
	// the request that subscribed them.
	sent map[string]map[string]int
	// answeredAt: type → names of sent that a response carried (resource or
	// removal) → the seq of the last request sent when the first did.
	answeredAt map[string]map[string]int
	// awaiting: type → collections (globs, Wildcard) subscribed whose first
	// answer has not arrived → the seq of their request; their own answer
	// (answered.go) completes them.
	awaiting map[string]map[string]int
	// wildcardAnswered: type → the origin answered the Wildcard on this
	// attempt, so a new emulated glob is complete at once.
	wildcardAnswered map[string]bool
	// told: type → names whose version the attempt's first request of the
	// type carried (initial_resource_versions); untold: some subscription
	// asked for a collection or a name the origin was not told of. Silence
	// after only told names is an up-to-date origin's (probe.go).
	told   map[string]map[string]bool
	untold bool
	// lastNonce: type → the nonce of its latest response applied;
	// carriedBy: type → name → the nonce of the response that last
	// brought it (what the NACK breaker's NACK names, heldnack.go).
	lastNonce map[string]string
	carriedBy map[string]map[string]string
}

func newDeltaState() *deltaState {
	return &deltaState{
		sent:             make(map[string]map[string]int),
		answeredAt:       make(map[string]map[string]int),
		awaiting:         make(map[string]map[string]int),
		wildcardAnswered: make(map[string]bool),
		lastNonce:        make(map[string]string),
		carriedBy:        make(map[string]map[string]string),
	}
}

// deltaAttempt runs one delta ADS stream (or per-type streams) to origin
// until it fails or ctx ends.
func (l *link) deltaAttempt(ctx context.Context, origin string) (bool, error) {
	transport, open := xdstype.TransportDelta, deltaADS
	if l.auth.perType {
		transport, open = xdstype.TransportDeltaPerType, perTypeOpener(deltaPerType)
	}
	return runAttempt(ctx, l, origin, transport, open,
		func(node *corev3.Node, t string) *discoveryv3.DeltaDiscoveryRequest {
			return &discoveryv3.DeltaDiscoveryRequest{Node: node, TypeUrl: t, ResourceNamesSubscribe: []string{cache.Wildcard}}
		},
		func(ads deltaStream) attemptOps[discoveryv3.DeltaDiscoveryResponse] {
			st := newDeltaState()
			return attemptOps[discoveryv3.DeltaDiscoveryResponse]{
				sync:   func() error { return l.deltaSync(ads, st) },
				handle: func(r *discoveryv3.DeltaDiscoveryResponse) error { return l.deltaHandle(ads, st, r) },
				probe:  func() (bool, error) { return l.deltaProbe(ads, st) },
			}
		})
}

// deltaSync sends the subscription diffs between what the cache wants and
// what this attempt told the origin. The first request of a type carries
// initial_resource_versions for what the cache has on this link.
func (l *link) deltaSync(ads discoveryv3.AggregatedDiscoveryService_DeltaAggregatedResourcesClient, st *deltaState) error {
	l.answerRefused()
	if err := l.deltaHeldNacks(ads, st); err != nil { // heldnack.go
		return err
	}
	resub, node, wants := l.syncView()
	if err := l.deltaResubscribe(ads, st, resub); err != nil {
		return err
	}
	types := slices.Sorted(maps.Keys(wants))
	for _, t := range types {
		req := l.deltaSubscription(st, t, wants[t], node)
		if req == nil {
			continue
		}
		if err := l.sendDeltaSubscription(ads, req); err != nil {
			return err
		}
	}
	l.completeEmulatedGlobs(st, types, wants)
	return nil
}

// deltaResubscribe makes the origin forget the names unsubscribed and
// subscribed again since the last sync (resub), so that it sends them
// again: it unsubscribes those this attempt told it of now, and forgets
// them in st, so the subscribe of deltaSubscription follows.
func (l *link) deltaResubscribe(ads discoveryv3.AggregatedDiscoveryService_DeltaAggregatedResourcesClient, st *deltaState, resub map[string][]string) error {
	for _, t := range slices.Sorted(maps.Keys(resub)) {
		var again []string
		for _, n := range resub[t] {
			if _, ok := st.sent[t][n]; ok {
				st.forget(t, n)
				again = append(again, n)
			}
		}
		if len(again) == 0 {
			continue
		}
		if err := ads.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: t, ResourceNamesUnsubscribe: again}); err != nil {
			return fmt.Errorf("upstream %s: send delta request: %w", l.id.Authority, err)
		}
	}
	return nil
}

// deltaSubscription returns the request that brings what this attempt told
// the origin of type t to w, and notes it in st as sent; nil when the
// origin was told w already. The attempt's first request carries the node;
// a type's first subscribe carries initial_resource_versions.
func (l *link) deltaSubscription(st *deltaState, t string, w *want, node *corev3.Node) *discoveryv3.DeltaDiscoveryRequest {
	first := st.sent[t] == nil
	req := st.diff(t, w)
	if len(req.ResourceNamesSubscribe) == 0 && len(req.ResourceNamesUnsubscribe) == 0 {
		return nil
	}
	if first && len(req.ResourceNamesSubscribe) > 0 {
		req.InitialResourceVersions = l.mgr.cache.Versions(l.id, t)
	}
	sort.Strings(req.ResourceNamesSubscribe)
	sort.Strings(req.ResourceNamesUnsubscribe)
	if !st.nodeSent {
		req.Node = node
		st.nodeSent = true
	}
	st.noteSent(req)
	return req
}

// sendDeltaSubscription sends req, split to fit the origin's limit
// (splitDelta).
func (l *link) sendDeltaSubscription(ads discoveryv3.AggregatedDiscoveryService_DeltaAggregatedResourcesClient, req *discoveryv3.DeltaDiscoveryRequest) error {
	parts := splitDelta(req, l.mgr.maxRequest)
	for _, part := range parts {
		if err := ads.Send(part); err != nil {
			return fmt.Errorf("upstream %s: send delta request: %w", l.id.Authority, err)
		}
	}
	l.lg.Debug("delta subscription sent", zap.String("type_url", req.GetTypeUrl()),
		zap.Int("subscribe", len(req.ResourceNamesSubscribe)), zap.Int("unsubscribe", len(req.ResourceNamesUnsubscribe)),
		zap.Int("initial_versions", len(req.InitialResourceVersions)), zap.Int("requests", len(parts)))
	return nil
}

// completeEmulatedGlobs completes, in the cache, the emulated globs added
// while the Wildcard was already answered: the cache computes their
// membership.
func (l *link) completeEmulatedGlobs(st *deltaState, types []string, wants map[string]*want) {
	var local []cache.Update
	for _, t := range types {
		if st.wildcardAnswered[t] && len(wants[t].emulatedGlobs) > 0 {
			local = append(local, cache.Update{Link: l.id, TypeURL: t, Complete: wants[t].emulatedGlobs})
		}
	}
	for _, u := range local {
		l.mgr.cache.Apply(u)
	}
}

// diff returns a request (type, names only) subscribing the names of w
// this attempt did not tell the origin of type t, and unsubscribing those
// it told that w no longer has, unsorted.
func (st *deltaState) diff(t string, w *want) *discoveryv3.DeltaDiscoveryRequest {
	sent := st.sent[t]
	if sent == nil {
		sent = make(map[string]int)
		st.sent[t] = sent
	}
	req := &discoveryv3.DeltaDiscoveryRequest{TypeUrl: t}
	for n := range w.names {
		if _, ok := sent[n]; !ok {
			req.ResourceNamesSubscribe = append(req.ResourceNamesSubscribe, n)
		}
	}
	for n := range sent {
		if _, ok := w.names[n]; !ok {
			req.ResourceNamesUnsubscribe = append(req.ResourceNamesUnsubscribe, n)
		}
	}
	return req
}

// noteSent records subscription request req as sent under the next seq:
// its names subscribed (collections as awaiting their first answer), its
// names unsubscribed forgotten.
func (st *deltaState) noteSent(req *discoveryv3.DeltaDiscoveryRequest) {
	t := req.GetTypeUrl()
	aw := st.awaiting[t]
	if aw == nil {
		aw = make(map[string]int)
		st.awaiting[t] = aw
	}
	st.seq++
	for _, n := range req.ResourceNamesSubscribe {
		st.sent[t][n] = st.seq
		if n == cache.Wildcard || isGlob(n) {
			aw[n] = st.seq
		}
	}
	for _, n := range req.ResourceNamesUnsubscribe {
		st.forget(t, n)
	}
	st.record(req)
}

// forget drops name n of type t from what this attempt told the origin: no
// longer sent, answered or awaiting; a forgotten Wildcard is unanswered.
func (st *deltaState) forget(t, n string) {
	delete(st.sent[t], n)
	delete(st.answeredAt[t], n)
	delete(st.awaiting[t], n)
	if n == cache.Wildcard {
		st.wildcardAnswered[t] = false
	}
}

// deltaHandle validates a response, applies it to the cache and ACKs it,
// or NACKs it (with why) and keeps the last good state.
func (l *link) deltaHandle(ads discoveryv3.AggregatedDiscoveryService_DeltaAggregatedResourcesClient, st *deltaState, r *discoveryv3.DeltaDiscoveryResponse) error {
	t := r.GetTypeUrl()
	l.mgr.metrics.responses.WithLabelValues(xdstype.Label(t)).Inc()
	u, err := deltaUpdate(l.id, r, time.Now())
	if err != nil {
		nack := &discoveryv3.DeltaDiscoveryRequest{
			TypeUrl:       t,
			ResponseNonce: r.GetNonce(),
			ErrorDetail:   l.rejected(t, r.GetNonce(), err),
		}
		if err := ads.Send(nack); err != nil {
			return fmt.Errorf("upstream %s: send NACK: %w", l.id.Authority, err)
		}
		return nil
	}
	// Only the collections this response answers are complete: a response
	// of the type may answer another subscription of it (answered.go).
	answered := deltaAnswers(u, st.sent[t], st.answeredAt[t], st.awaiting[t])
	st.noteAnswered(t, u)
	if len(answered) > 0 {
		_, wants := l.copyWants()
		for _, n := range answered {
			delete(st.awaiting[t], n)
			if n == cache.Wildcard {
				st.wildcardAnswered[t] = true
				if w := wants[t]; w != nil {
					u.Complete = append(u.Complete, w.completeForWildcard()...)
					continue
				}
			}
			u.Complete = append(u.Complete, n)
		}
	}
	l.mgr.metrics.countResourceErrors(l.id.Authority, u)
	st.noteCarried(t, r.GetNonce(), u) // heldnack.go
	applied := l.mgr.cache.Apply(u)
	// An ACK, or a NACK of what the cache refused (nack.go).
	ack := &discoveryv3.DeltaDiscoveryRequest{TypeUrl: t, ResponseNonce: r.GetNonce(), ErrorDetail: l.refusalNACK(t, applied.Refused)}
	if err := ads.Send(ack); err != nil {
		return fmt.Errorf("upstream %s: send ACK: %w", l.id.Authority, err)
	}
	return nil
}

// noteAnswered records the subscribed names response u carried (answeredAt).
func (st *deltaState) noteAnswered(t string, u cache.Update) {
	sent := st.sent[t]
	at := st.answeredAt[t]
	if at == nil {
		at = make(map[string]int)
		st.answeredAt[t] = at
	}
	note := func(name string) {
		if _, ok := sent[name]; !ok {
			return
		}
		if _, ok := at[name]; !ok {
			at[name] = st.seq
		}
	}
	for _, r := range u.Resources {
		if c, err := cache.CanonicalName(r.Name); err == nil {
			note(c)
		}
	}
	for _, n := range u.Removed {
		note(n)
	}
}

// splitDelta returns req, or, when its encoding would exceed max bytes,
// several requests that together say the same, each within max: the first
// carries the node and as many initial_resource_versions as fit (the
// origin resends what the others named: bytes, not correctness; the spec
// honours them only on a type's first request), then the names to
// subscribe and to unsubscribe, in order. Sizes are over-estimated per
// name, so a part never exceeds max unless one name alone does.
func splitDelta(req *discoveryv3.DeltaDiscoveryRequest, max int) []*discoveryv3.DeltaDiscoveryRequest {
	if proto.Size(req) <= max {
		return []*discoveryv3.DeltaDiscoveryRequest{req}
	}
	const perName, perEntry = 8, 16 // tag and length bytes, rounded up
	fresh := func() (*discoveryv3.DeltaDiscoveryRequest, int) {
		r := &discoveryv3.DeltaDiscoveryRequest{TypeUrl: req.GetTypeUrl()}
		return r, proto.Size(r) + perName
	}
	cur, size := fresh()
	cur.Node = req.GetNode()
	size += proto.Size(cur.GetNode()) + perName
	for _, k := range slices.Sorted(maps.Keys(req.GetInitialResourceVersions())) {
		v := req.GetInitialResourceVersions()[k]
		e := len(k) + len(v) + perEntry
		if size+e > max {
			break
		}
		if cur.InitialResourceVersions == nil {
			cur.InitialResourceVersions = make(map[string]string)
		}
		cur.InitialResourceVersions[k] = v
		size += e
	}
	var out []*discoveryv3.DeltaDiscoveryRequest
	add := func(n string, subscribe bool) {
		e := len(n) + perName
		if size+e > max && len(cur.ResourceNamesSubscribe)+len(cur.ResourceNamesUnsubscribe) > 0 {
			out = append(out, cur)
			cur, size = fresh()
		}
		if subscribe {
			cur.ResourceNamesSubscribe = append(cur.ResourceNamesSubscribe, n)
		} else {
			cur.ResourceNamesUnsubscribe = append(cur.ResourceNamesUnsubscribe, n)
		}
		size += e
	}
	for _, n := range req.GetResourceNamesSubscribe() {
		add(n, true)
	}
	for _, n := range req.GetResourceNamesUnsubscribe() {
		add(n, false)
	}
	return append(out, cur)
}
