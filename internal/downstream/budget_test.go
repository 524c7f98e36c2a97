package downstream

import (
	"fmt"
	"testing"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/xds-relay/xds-relay/internal/xdstest"
)

// budgetEnv is an env whose streams have the request budget burst, then
// rate a second.
func budgetEnv(t *testing.T, rate, burst int) *env {
	t.Helper()
	e := newEnv(t, 0)
	l := testLimits
	l.RequestsPerSecond, l.RequestBurst = rate, burst
	if err := e.srv.SetLimits(l); err != nil {
		t.Fatal(err)
	}
	return e
}

// A client that changes its subscription as fast as it can is held to its
// budget: its requests are all handled, none dropped and its stream kept,
// but no faster than the burst then the rate; another client is served
// meanwhile.
func TestRequestBudget(t *testing.T) {
	const rate, burst, n = 100, 10, 110
	e := budgetEnv(t, rate, burst)
	churned, other := xdstp(edsType, "churned"), xdstp(edsType, "other")
	e.put(edsType, churned, "1")
	r1 := e.put(edsType, other, "1")
	served := e.delta()
	served.Send(&discoveryv3.DeltaDiscoveryRequest{Node: testNode, TypeUrl: edsType, ResourceNamesSubscribe: []string{other}})
	checkDelta(t, deltaResp(edsType, nil, dres(other, r1)), served.Recv())

	handled := func() int {
		return int(testutil.ToFloat64(e.srv.m.requests.WithLabelValues(typeLabel(edsType)))) - 1 // less served's
	}
	churn := e.delta()
	start := time.Now()
	for i := range n {
		req := &discoveryv3.DeltaDiscoveryRequest{Node: testNode, TypeUrl: edsType, ResourceNamesSubscribe: []string{churned}}
		if i%2 == 1 {
			req = &discoveryv3.DeltaDiscoveryRequest{TypeUrl: edsType, ResourceNamesUnsubscribe: []string{churned}}
		}
		churn.Send(req)
	}
	r2 := e.put(edsType, other, "2")
	checkDelta(t, deltaResp(edsType, nil, dres(other, r2)), served.Recv())

	xdstest.Poll(t, "every churning request handled", func() error {
		// By now, at most the burst, the one that overdrew it, and the
		// rate since: whatever the machine's speed.
		got, since := handled(), time.Since(start)
		if most := burst + 1 + int(since.Seconds()*rate) + 1; got > most {
			t.Fatalf("%d requests handled %v after the first, past the budget's %d", got, since, most)
		}
		if got < n {
			return fmt.Errorf("%d of %d handled", got, n)
		}
		return nil
	})
	if least := time.Duration(n-burst-1) * time.Second / rate; time.Since(start) < least {
		t.Errorf("%d requests handled in %v, faster than the budget allows (%v)", n, time.Since(start), least)
	}
	if got := testutil.ToFloat64(e.srv.m.throttled); got < 1 {
		t.Errorf("requests_throttled_total = %v, want some", got)
	}
}

// Answering the responses the relay sends costs nothing, in both
// variants: with a budget of one request, a client that subscribed and
// then ACKs every change is never held back; answering again, with no
// response to answer, costs as any request.
func TestRequestBudgetAnswersFree(t *testing.T) {
	for _, variant := range []string{"delta", "sotw"} {
		t.Run(variant, func(t *testing.T) {
			e := budgetEnv(t, 1, 1)
			name := xdstp(edsType, "acked")
			e.put(edsType, name, "1")
			requests := func() float64 { return testutil.ToFloat64(e.srv.m.requests.WithLabelValues(typeLabel(edsType))) }
			// answer answers the last response; ack answers it and receives
			// the next.
			var answer, ack func()
			if variant == "delta" {
				c := e.delta()
				c.Send(&discoveryv3.DeltaDiscoveryRequest{Node: testNode, TypeUrl: edsType, ResourceNamesSubscribe: []string{name}})
				nonce := c.Recv().GetNonce()
				answer = func() { c.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: edsType, ResponseNonce: nonce}) }
				ack = func() { answer(); nonce = c.Recv().GetNonce() }
			} else {
				c := e.sotw()
				c.Send(&discoveryv3.DiscoveryRequest{Node: testNode, TypeUrl: edsType, ResourceNames: []string{name}})
				last := c.Recv()
				answer = func() {
					c.Send(&discoveryv3.DiscoveryRequest{TypeUrl: edsType, ResourceNames: []string{name}, VersionInfo: last.GetVersionInfo(), ResponseNonce: last.GetNonce()})
				}
				ack = func() { answer(); last = c.Recv() }
			}
			const changes = 5
			for v := 2; v < 2+changes; v++ {
				e.put(edsType, name, fmt.Sprint(v))
				ack() // the previous response's, then this change's response
			}
			xdstest.Poll(t, "every ACK handled", func() error {
				if got := requests(); got != 1+changes {
					return fmt.Errorf("%v requests handled, want %d", got, 1+changes)
				}
				return nil
			})
			if got := testutil.ToFloat64(e.srv.m.throttled); got != 0 {
				t.Fatalf("requests_throttled_total = %v after answering responses only, want 0", got)
			}
			// The last response's answer is free; three more cost, past the
			// budget of one.
			for range 4 {
				answer()
			}
			xdstest.Poll(t, "repeated answers throttled", func() error {
				if got := testutil.ToFloat64(e.srv.m.throttled); got < 1 {
					return fmt.Errorf("requests_throttled_total = %v", got)
				}
				return nil
			})
		})
	}
}
