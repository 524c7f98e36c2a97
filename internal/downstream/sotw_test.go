package downstream

import (
	"testing"

	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/xds-relay/xds-relay/internal/cache"
)

func sotwResp(typeURL, version string, rs ...*anypb.Any) *discoveryv3.DiscoveryResponse {
	return &discoveryv3.DiscoveryResponse{TypeUrl: typeURL, VersionInfo: version, Resources: rs}
}

func checkSotW(t *testing.T, want, got *discoveryv3.DiscoveryResponse) {
	t.Helper()
	if d := cmp.Diff(want, got, protocmp.Transform(), protocmp.IgnoreFields(&discoveryv3.DiscoveryResponse{}, "nonce")); d != "" {
		t.Fatalf("response mismatch (-want +got):\n%s", d)
	}
}

func sotwAck(resp *discoveryv3.DiscoveryResponse, names ...string) *discoveryv3.DiscoveryRequest {
	return &discoveryv3.DiscoveryRequest{TypeUrl: resp.GetTypeUrl(), VersionInfo: resp.GetVersionInfo(), ResponseNonce: resp.GetNonce(), ResourceNames: names}
}

// The spec's SotW example of "How the client specifies what resources to
// return", step by step (Listener: full state in every response).
func TestSotWWildcardSpecExample(t *testing.T) {
	e := newEnv(t, 0)
	a := e.put(ldsType, "A", "1")
	b := e.put(ldsType, "B", "1")
	xName := xdstp(ldsType, "X")
	x := e.put(ldsType, xName, "1")
	c := e.sotw()

	// 1. resource_names unset: a subscription to *.
	c.Send(&discoveryv3.DiscoveryRequest{Node: testNode, TypeUrl: ldsType})
	r := c.Recv()
	checkSotW(t, sotwResp(ldsType, "1", a.Body, b.Body), r)

	// 2. * and X: the wildcard continues, X is added; full state.
	c.Send(sotwAck(r, "*", xName))
	r = c.Recv()
	checkSotW(t, sotwResp(ldsType, "2", a.Body, b.Body, x.Body), r)

	// 3. X only: unsubscribes *.
	c.Send(sotwAck(r, xName))
	e.syncSotW(c)
	e.put(ldsType, "B", "2")
	c.None()
	x2 := e.put(ldsType, xName, "2")
	r = c.Recv()
	checkSotW(t, sotwResp(ldsType, "3", x2.Body), r)

	// 4. unset again: unsubscribes X; not a wildcard any more.
	c.Send(sotwAck(r))
	e.syncSotW(c)
	e.put(ldsType, "C", "1")
	e.put(ldsType, xName, "3")
	c.None()
}

// A request whose nonce is not the latest sent for its type gets no response.
func TestSotWStaleNonceIgnored(t *testing.T) {
	e := newEnv(t, 0)
	n1, n2 := xdstp(edsType, "e1"), xdstp(edsType, "e2")
	r1 := e.put(edsType, n1, "1")
	e.put(edsType, n2, "1")
	c := e.sotw()
	c.Send(&discoveryv3.DiscoveryRequest{Node: testNode, TypeUrl: edsType, ResourceNames: []string{n1}})
	first := c.Recv()
	checkSotW(t, sotwResp(edsType, "1", r1.Body), first)
	r1b := e.put(edsType, n1, "2")
	second := c.Recv()
	checkSotW(t, sotwResp(edsType, "2", r1b.Body), second)
	if first.GetNonce() == second.GetNonce() {
		t.Fatalf("nonce %q reused", first.GetNonce())
	}
	c.Send(sotwAck(first, n1, n2)) // stale: ignored
	c.None()
	c.Send(sotwAck(second, n1, n2))
	r := c.Recv()
	if len(r.GetResources()) != 1 || r.GetVersionInfo() != "3" {
		t.Fatalf("after fresh request: got %v, want e2 alone at version 3", r)
	}
}

// Listener and Cluster responses carry every subscribed resource; other
// types only what changed.
func TestSotWFullStateVersusPerResource(t *testing.T) {
	tests := []struct {
		name    string
		typeURL string
		full    bool
	}{
		{"listener", ldsType, true},
		{"cluster", cdsType, true},
		{"endpoint", edsType, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, 0)
			n1, n2 := xdstp(tc.typeURL, "r1"), xdstp(tc.typeURL, "r2")
			r1 := e.put(tc.typeURL, n1, "1")
			r2 := e.put(tc.typeURL, n2, "1")
			c := e.sotw()
			c.Send(&discoveryv3.DiscoveryRequest{Node: testNode, TypeUrl: tc.typeURL, ResourceNames: []string{n1, n2}})
			r := c.Recv()
			checkSotW(t, sotwResp(tc.typeURL, "1", r1.Body, r2.Body), r)
			c.Send(sotwAck(r, n1, n2))
			r2b := e.put(tc.typeURL, n2, "2")
			want := sotwResp(tc.typeURL, "2", r2b.Body)
			if tc.full {
				want = sotwResp(tc.typeURL, "2", r1.Body, r2b.Body)
			}
			r = c.Recv()
			checkSotW(t, want, r)
			c.Send(sotwAck(r, n1, n2))
			// A deletion is a full-state response without it, or, for
			// the others, a response with no resource; both say it with
			// a NOT_FOUND resource error (SotW has no removed_resources).
			e.cache.remove(key(tc.typeURL, n1))
			want = sotwResp(tc.typeURL, "3")
			if tc.full {
				want = sotwResp(tc.typeURL, "3", r2b.Body)
			}
			want.ResourceErrors = []*discoveryv3.ResourceError{resourceError(n1, relayNotFound)}
			checkSotW(t, want, c.Recv())
		})
	}
}

// TTL resources go in the Resource wrapper; a heartbeat has no body.
func TestSotWTTLAndHeartbeat(t *testing.T) {
	e := newEnv(t, 0)
	n := xdstp(edsType, "ttl")
	r := res(edsType, n, "1")
	r.TTL = durationpb.New(30e9)
	e.cache.set(key(edsType, n), r)
	c := e.sotw()
	c.Send(&discoveryv3.DiscoveryRequest{Node: ttlNode, TypeUrl: edsType, ResourceNames: []string{n}})
	got := c.Recv()
	v := cache.ContentVersion(r.Body)
	checkSotW(t, sotwResp(edsType, "1", wrap(t, &discoveryv3.Resource{Name: n, Version: v, Ttl: r.TTL, Resource: r.Body})), got)
	c.Send(sotwAck(got, n))
	hb := &cache.Resource{Name: n, Body: r.Body, TTL: durationpb.New(60e9), Heartbeat: true}
	e.cache.set(key(edsType, n), hb)
	checkSotW(t, sotwResp(edsType, "2", wrap(t, &discoveryv3.Resource{Name: n, Version: v, Ttl: hb.TTL})), c.Recv())
}

func wrap(t *testing.T, m proto.Message) *anypb.Any {
	a, err := anypb.New(m)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// A SotW NACK is recorded and counted and changes nothing for others.
func TestSotWNack(t *testing.T) {
	e := newEnv(t, 0)
	n := xdstp(edsType, "e1")
	r1 := e.put(edsType, n, "1")
	bad, good := e.sotw(), e.sotw()
	var last [2]*discoveryv3.DiscoveryResponse
	for i, c := range []*sotwStreamC{bad, good} {
		c.Send(&discoveryv3.DiscoveryRequest{Node: testNode, TypeUrl: edsType, ResourceNames: []string{n}})
		last[i] = c.Recv()
		checkSotW(t, sotwResp(edsType, "1", r1.Body), last[i])
		c.Send(sotwAck(last[i], n))
	}
	r2 := e.put(edsType, n, "2")
	got := bad.Recv()
	nack := sotwAck(got, n)
	nack.VersionInfo = "1"
	nack.ErrorDetail = &rpcStatus{Code: 3, Message: "bad endpoint"}
	bad.Send(nack)
	checkSotW(t, sotwResp(edsType, "2", r2.Body), good.Recv())
	e.syncSotW(bad)
	checkNacks(t, e, edsType, 1, "bad endpoint")
	bad.None()
}

// A name subscribed both directly and through the wildcard is listed once
// in a response, also on a type whose responses list only what changed.
func TestSotWNameThroughWildcardAndDirectlyListedOnce(t *testing.T) {
	e := newEnv(t, 0)
	e.put(edsType, "A", "1")
	e.put(edsType, "B", "1")
	c := e.sotw()
	c.Send(&discoveryv3.DiscoveryRequest{Node: testNode, TypeUrl: edsType, ResourceNames: []string{"*", "A"}})
	seen := map[string]bool{}
	for len(seen) < 2 { // the wildcard's members may come in a second response
		r := c.Recv()
		in := map[string]bool{}
		for _, a := range r.GetResources() {
			var cla endpointv3.ClusterLoadAssignment
			if err := a.UnmarshalTo(&cla); err != nil {
				t.Fatal(err)
			}
			if in[cla.GetClusterName()] {
				t.Fatalf("response lists %s twice: %v", cla.GetClusterName(), r)
			}
			in[cla.GetClusterName()] = true
			seen[cla.GetClusterName()] = true
		}
	}
}
