package downstream

import (
	"context"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
)

// The request budget: each stream may send Limits.RequestBurst requests at
// once, then Limits.RequestsPerSecond (a token bucket; config
// downstream.limits.requests_per_second and request_burst). A stream over
// it is not ended and nothing it sent is dropped: its handler reads its
// next request later (backpressure: the client's sends wait on HTTP/2 flow
// control meanwhile), so a client that churns its subscriptions costs the
// relay at most the budget's worth of work, whatever it sends.
//
// What costs: every request, but an answer (ACK or NACK) to a response
// the relay sent that changes no subscription (delta: subscribes and
// unsubscribes nothing; SotW: lists the type's subscription as it is),
// which is free once per response sent: the relay decides how many
// responses there are, so a client is never slowed for answering them,
// while answers beyond that (repeats, stale nonces) cost as any request.
// A cold Envoy sends one request per type and one per change of what it
// subscribes (clusters bring endpoints, listeners routes), far below the
// defaults (500 at once, then 50 a second).

// requestBudget is a stream's token bucket, owned by its handler goroutine.
type requestBudget struct {
	// tokens left; below 0 after the request that overdrew it, a debt the
	// next Recv waits off.
	tokens float64
	// at: when tokens was last brought up to date (since budgetEpoch, on
	// the monotonic clock); zero before the first request (the bucket
	// starts full).
	at time.Duration
	// answered counts the free answers taken, at most one per response
	// sent (session.responsesSent).
	answered uint64
}

// charge takes one token for request m unless it is a free answer (see
// above); called before m is handled.
func (ss *session) charge(m any) {
	l := ss.srv.limits()
	if l.RequestsPerSecond <= 0 || ss.freeAnswer(m) {
		return
	}
	b := &ss.budget
	now := time.Since(budgetEpoch)
	if b.at == 0 {
		b.tokens = float64(l.RequestBurst)
	} else {
		b.tokens = min(float64(l.RequestBurst), b.tokens+(now-b.at).Seconds()*float64(l.RequestsPerSecond))
	}
	b.at = now
	b.tokens--
}

// budgetEpoch is what budgets count time from: a Duration since it is 8
// bytes per stream, where a time.Time is 24.
var budgetEpoch = time.Now()

// throttle waits, before the next Recv, until the stream's budget is out
// of debt; it returns ctx's error if the stream ends meanwhile.
func (ss *session) throttle(ctx context.Context) error {
	l := ss.srv.limits()
	b := &ss.budget
	if l.RequestsPerSecond <= 0 || b.tokens >= 0 {
		return nil
	}
	wait := time.Duration(-b.tokens/float64(l.RequestsPerSecond)*float64(time.Second)) - (time.Since(budgetEpoch) - b.at)
	if wait <= 0 {
		return nil
	}
	ss.srv.m.throttled.Inc()
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// freeAnswer reports whether m answers a response without changing any
// subscription while the stream has an unanswered response, and takes
// that response's free answer.
func (ss *session) freeAnswer(m any) bool {
	switch r := m.(type) {
	case *discoveryv3.DeltaDiscoveryRequest:
		if r.GetResponseNonce() == "" || len(r.GetResourceNamesSubscribe()) > 0 || len(r.GetResourceNamesUnsubscribe()) > 0 ||
			len(r.GetInitialResourceVersions()) > 0 {
			return false
		}
	case *discoveryv3.DiscoveryRequest:
		if r.GetResponseNonce() == "" || !ss.subscribesAlready(r.GetTypeUrl(), r.GetResourceNames()) {
			return false
		}
	default:
		return false
	}
	if ss.budget.answered >= ss.responsesSent.Load() {
		return false
	}
	ss.budget.answered++
	return true
}

// subscribesAlready reports whether names, a SotW request's, is the
// subscription the stream has on typeURL.
func (ss *session) subscribesAlready(typeURL string, names []string) bool {
	if typeURL == "" {
		typeURL = ss.fixedType
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	ts := ss.typeOf(typeURL)
	switch {
	case ts == nil:
		return false
	case !ts.explicit:
		return len(names) == 0 // the legacy wildcard, as it was asked
	}
	return sameNames(ts, names)
}
