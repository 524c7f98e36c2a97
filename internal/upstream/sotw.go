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
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"

	"github.com/xds-relay/xds-relay/internal/cache"
	"github.com/xds-relay/xds-relay/internal/xdstype"
)

// sotwType is what one SotW attempt told the origin for one type. owned by
// the link's run goroutine.
type sotwType struct {
	names []string // the full list last sent, sorted; nil with only Wildcard
	set   map[string]struct{}
	nonce string // nonce of the last response
	// answerable: what the next response answers (answered.go).
	answerable sotwAnswerable
	// pace queues repeated NACKs (nackpace.go).
	pace nackPace
}

// sotwAttempt runs one SotW ADS stream (or per-type streams) to origin
// until it fails or ctx ends. Globs are always emulated over the type's wildcard.
func (l *link) sotwAttempt(ctx context.Context, origin string) (bool, error) {
	if origin != l.sotwOrigin {
		clear(l.sotwVersions)
		l.sotwOrigin = origin
	}
	transport, open := xdstype.TransportSotW, sotwADS
	if l.auth.perType {
		transport, open = xdstype.TransportSotWPerType, perTypeOpener(sotwPerType)
	}
	types := make(map[string]*sotwType) // this attempt's (newOps runs once)
	defer stopPacing(types)
	return runAttempt(ctx, l, origin, transport, open,
		func(node *corev3.Node, t string) *discoveryv3.DiscoveryRequest {
			return &discoveryv3.DiscoveryRequest{Node: node, TypeUrl: t} // no names: the wildcard
		},
		func(ads sotwStream) attemptOps[discoveryv3.DiscoveryResponse] {
			nodeSent := false
			return attemptOps[discoveryv3.DiscoveryResponse]{
				sync:   func() error { return l.sotwSync(ads, types, &nodeSent) },
				handle: func(r *discoveryv3.DiscoveryResponse) error { return l.sotwHandle(ads, types, r) },
			}
		})
}

// sotwNames is the resource_names list for a set: empty for a wildcard
// alone, "*" among the names when mixed.
func sotwNames(set map[string]struct{}) []string {
	if _, ok := set[cache.Wildcard]; ok && len(set) == 1 {
		return nil
	}
	names := slices.Collect(maps.Keys(set))
	sort.Strings(names)
	return names
}

// sotwSync sends the full name list of every type whose set changed (the
// first request of a type carries the last version accepted on an earlier
// attempt).
func (l *link) sotwSync(ads discoveryv3.AggregatedDiscoveryService_StreamAggregatedResourcesClient, types map[string]*sotwType, nodeSent *bool) error {
	// Names unsubscribed and subscribed again since the last sync: the
	// list is unchanged, so ask again without a version, which makes the
	// origin answer with what it has (unchanged bytes notify no client).
	l.answerRefused()
	now := time.Now()
	for _, cur := range types {
		if nack := cur.pace.takeDue(now); nack != nil {
			if err := l.sotwSend(ads, cur, nack); err != nil {
				return err
			}
		}
	}
	if err := l.sotwHeldNacks(ads, types); err != nil { // heldnack.go
		return err
	}
	resub, node, wants := l.syncView()
	keys := slices.Sorted(maps.Keys(wants))
	for _, t := range keys {
		w := wants[t]
		cur := types[t]
		if cur != nil && maps.Equal(cur.set, w.names) {
			if !anyIn(resub[t], cur.set) {
				continue
			}
			if err := l.sotwSend(ads, cur, &discoveryv3.DiscoveryRequest{TypeUrl: t, ResourceNames: cur.names, ResponseNonce: cur.nonce}); err != nil {
				return err
			}
			continue
		}
		if cur == nil && len(w.names) == 0 {
			continue
		}
		if cur == nil {
			cur = &sotwType{}
			types[t] = cur
		}
		cur.set = maps.Clone(w.names)
		cur.names = sotwNames(cur.set)
		req := &discoveryv3.DiscoveryRequest{
			TypeUrl:       t,
			ResourceNames: cur.names,
			VersionInfo:   l.sotwVersions[t],
			ResponseNonce: cur.nonce,
		}
		if len(cur.set) == 0 {
			// Nothing wanted: an explicit empty list must not read as a
			// wildcard; SotW cannot say "nothing", so ask for no name.
			req.ResourceNames = []string{}
		}
		if !*nodeSent {
			req.Node = node
			*nodeSent = true
		}
		if err := l.sotwSend(ads, cur, req); err != nil {
			return err
		}
	}
	return nil
}

// sotwHandle validates a response, applies it and ACKs it, or NACKs it with
// why (keeping the last good version).
func (l *link) sotwHandle(ads discoveryv3.AggregatedDiscoveryService_StreamAggregatedResourcesClient, types map[string]*sotwType, r *discoveryv3.DiscoveryResponse) error {
	t := r.GetTypeUrl()
	l.mgr.metrics.responses.WithLabelValues(xdstype.Label(t)).Inc()
	cur := types[t]
	if cur == nil {
		cur = &sotwType{}
		types[t] = cur
	}
	cur.nonce = r.GetNonce()
	answers := cur.answerable.take()
	u, err := sotwUpdate(l.id, r, time.Now())
	if err != nil {
		nack := &discoveryv3.DiscoveryRequest{
			TypeUrl: t, ResourceNames: cur.names, VersionInfo: l.sotwVersions[t], ResponseNonce: r.GetNonce(),
			ErrorDetail: l.rejected(t, r.GetNonce(), err),
		}
		if d := cur.pace.delay(l.mgr.backoff); d > 0 {
			cur.pace.queue(nack, d, l.wake)
			return nil
		}
		return l.sotwSend(ads, cur, nack)
	}
	cur.pace.acked()
	_, wants := l.copyWants()
	reask := l.sotwAnswers(&u, t, wants[t], answers)
	l.mgr.metrics.countResourceErrors(l.id.Authority, u)
	applied := l.mgr.cache.Apply(u)
	// Applied, but for what the cache refused: an ACK, or a NACK of those
	// (nack.go) that still carries this version, since the rest of it was
	// applied (so an origin that answers an older version at once, as
	// go-control-plane does, does not send the same response again).
	l.sotwVersions[t] = r.GetVersionInfo()
	if err := l.sotwSend(ads, cur, &discoveryv3.DiscoveryRequest{
		TypeUrl: t, ResourceNames: cur.names, VersionInfo: r.GetVersionInfo(), ResponseNonce: r.GetNonce(),
		ErrorDetail: l.refusalNACK(t, applied.Refused),
	}); err != nil || !reask {
		return err
	}
	// The response spoke for the type's full state, but not for names
	// subscribed after the request it answered, and left some of them out:
	// ask again without a version, so the origin answers the list as it
	// is now (one more response, only when a name may be missing).
	return l.sotwSend(ads, cur, &discoveryv3.DiscoveryRequest{TypeUrl: t, ResourceNames: cur.names, ResponseNonce: r.GetNonce()})
}

// sotwAnswers fills in what the SotW response u of type t says beyond its
// resources, given answers, the names of the request it answers
// (answered.go): LDS and CDS answers have every subscribed resource, and
// an answer to the wildcard alone every resource of the type (FullState),
// but only for the names that request carried (Unanswered lists the others);
// the wildcard (with the globs emulated over it) is complete when that
// request carried it, and a native glob when it carried the glob and the answer
// is full state or carries a member of it. It reports whether a name the
// answer could not speak for is missing from it (ask again).
func (l *link) sotwAnswers(u *cache.Update, t string, w *want, answers map[string]struct{}) (reask bool) {
	if w == nil {
		w = &want{}
	}
	if answers == nil {
		return false // no request of ours is answered: it says nothing more
	}
	_, wildcard := answers[cache.Wildcard]
	full := cachev3.ResourceRequiresFullStateInSotw(t) || (wildcard && len(answers) == 1)
	if !full {
		// Native globs answered by a member of their own (not one also
		// subscribed by name: it may answer that name).
		for _, r := range u.Resources {
			c, err := cache.CanonicalName(r.Name)
			if err != nil {
				continue
			}
			g := cache.GlobOf(c)
			_, named := answers[c]
			if _, asked := answers[g]; g != "" && asked && !named && !slices.Contains(u.Complete, g) {
				u.Complete = append(u.Complete, g)
			}
		}
		return false
	}
	u.FullState = true
	in := make(map[string]struct{}, len(u.Resources))
	for _, r := range u.Resources {
		if c, err := cache.CanonicalName(r.Name); err == nil {
			in[c] = struct{}{}
		}
	}
	for _, re := range u.Errors {
		in[re.Name] = struct{}{} // the origin spoke for it: nothing to ask again
	}
	for n := range w.names {
		if _, ok := answers[n]; ok {
			if n == cache.Wildcard {
				u.Complete = append(u.Complete, w.completeForWildcard()...)
			} else if isGlob(n) {
				u.Complete = append(u.Complete, n)
			}
			continue
		}
		u.Unanswered = append(u.Unanswered, n)
		if n == cache.Wildcard {
			u.Unanswered = append(u.Unanswered, w.emulatedGlobs...)
			reask = true // which members it lacks is unknowable
		} else if _, ok := in[n]; !ok {
			reask = true
		}
	}
	sort.Strings(u.Unanswered)
	return reask
}

// sotwSend sends req, a request of cur's type carrying cur.set.
func (l *link) sotwSend(ads discoveryv3.AggregatedDiscoveryService_StreamAggregatedResourcesClient, cur *sotwType, req *discoveryv3.DiscoveryRequest) error {
	cur.pace.drop() // a NACK queued is replaced
	if err := ads.Send(req); err != nil {
		return fmt.Errorf("upstream %s: send sotw request: %w", l.id.Authority, err)
	}
	cur.answerable.sent(cur.set)
	return nil
}

// anyIn reports whether a name of names is in set.
func anyIn(names []string, set map[string]struct{}) bool {
	for _, n := range names {
		if _, ok := set[n]; ok {
			return true
		}
	}
	return false
}
