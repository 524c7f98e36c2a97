package downstream

import (
	"testing"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/google/go-cmp/cmp"
	rpcstatus "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/xds-relay/xds-relay/internal/cache"
)

var ignoreNonce = protocmp.IgnoreFields(&discoveryv3.DeltaDiscoveryResponse{}, "nonce", "system_version_info")

func deltaResp(typeURL string, removed []string, rs ...*discoveryv3.Resource) *discoveryv3.DeltaDiscoveryResponse {
	return &discoveryv3.DeltaDiscoveryResponse{TypeUrl: typeURL, Resources: rs, RemovedResources: removed}
}

func dres(name string, r *cache.Resource) *discoveryv3.Resource {
	return &discoveryv3.Resource{Name: name, Version: cache.ContentVersion(r.Body), Resource: r.Body, Ttl: r.TTL}
}

func checkDelta(t *testing.T, want, got *discoveryv3.DeltaDiscoveryResponse) {
	t.Helper()
	if d := cmp.Diff(want, got, protocmp.Transform(), ignoreNonce,
		protocmp.SortRepeated(func(a, b *discoveryv3.Resource) bool { return a.GetName() < b.GetName() })); d != "" {
		t.Fatalf("response mismatch (-want +got):\n%s", d)
	}
}

func ack(typeURL string, resp *discoveryv3.DeltaDiscoveryResponse) *discoveryv3.DeltaDiscoveryRequest {
	return &discoveryv3.DeltaDiscoveryRequest{TypeUrl: typeURL, ResponseNonce: resp.GetNonce()}
}

// The spec's incremental example of "How the client specifies what
// resources to return", step by step. A and B are in the wildcard (legacy
// names); X is an xdstp name of another authority, outside it.
func TestDeltaWildcardSpecExample(t *testing.T) {
	e := newEnv(t, 0)
	a := e.put(ldsType, "A", "1")
	b := e.put(ldsType, "B", "1")
	xName := xdstp(ldsType, "X")
	x := e.put(ldsType, xName, "1")
	c := e.delta()

	// 1. subscribe unset: a subscription to *.
	c.Send(&discoveryv3.DeltaDiscoveryRequest{Node: testNode, TypeUrl: ldsType})
	r := c.Recv()
	checkDelta(t, deltaResp(ldsType, nil, dres("A", a), dres("B", b)), r)
	c.Send(ack(ldsType, r))

	// 2. subscribe X: * continues, X is added.
	c.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: ldsType, ResourceNamesSubscribe: []string{xName}})
	r = c.Recv()
	checkDelta(t, deltaResp(ldsType, nil, dres(xName, x)), r)
	c.Send(ack(ldsType, r))

	// 3. unsubscribe *: X continues, the wildcard's members are not sent.
	c.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: ldsType, ResourceNamesUnsubscribe: []string{cache.Wildcard}})
	e.syncDelta(c)
	e.put(ldsType, "B", "2")
	c.None()
	x2 := e.put(ldsType, xName, "2")
	r = c.Recv()
	checkDelta(t, deltaResp(ldsType, nil, dres(xName, x2)), r)
	c.Send(ack(ldsType, r))

	// 4. unsubscribe X: nothing left, and an empty set is not a wildcard.
	c.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: ldsType, ResourceNamesUnsubscribe: []string{xName}})
	e.syncDelta(c)
	e.put(ldsType, "C", "1")
	e.put(ldsType, xName, "3")
	c.None()
}

// A wildcard client unsubscribing a specific name gets it back in
// resources (still in the wildcard) or in removed_resources (not in it).
func TestDeltaWildcardUnsubscribeGetsAnswer(t *testing.T) {
	e := newEnv(t, 0)
	a := e.put(ldsType, "A", "1")
	xName := xdstp(ldsType, "X")
	x := e.put(ldsType, xName, "1")
	c := e.delta()
	c.Send(&discoveryv3.DeltaDiscoveryRequest{Node: testNode, TypeUrl: ldsType, ResourceNamesSubscribe: []string{"*", "A", xName}})
	r := c.Recv()
	checkDelta(t, deltaResp(ldsType, nil, dres("A", a), dres(xName, x)), r)
	c.Send(ack(ldsType, r))

	tests := []struct {
		name string
		want *discoveryv3.DeltaDiscoveryResponse
	}{
		{"A is in the wildcard: resent", deltaResp(ldsType, nil, dres("A", a))},
		{xName, deltaResp(ldsType, []string{xName})},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n := tc.name
			if n != xName {
				n = "A"
			}
			c.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: ldsType, ResourceNamesUnsubscribe: []string{n}})
			r := c.Recv()
			checkDelta(t, tc.want, r)
			c.Send(ack(ldsType, r))
		})
	}
}

// Only changed resources are sent; deletions go in removed_resources; a
// name that does not exist is reported as soon as the cache says so.
func TestDeltaChangesAndDeletions(t *testing.T) {
	e := newEnv(t, 0)
	n1, n2, n3 := xdstp(edsType, "e1"), xdstp(edsType, "e2"), xdstp(edsType, "missing")
	r1 := e.put(edsType, n1, "1")
	r2 := e.put(edsType, n2, "1")
	c := e.delta()
	c.Send(&discoveryv3.DeltaDiscoveryRequest{Node: testNode, TypeUrl: edsType, ResourceNamesSubscribe: []string{n1, n2, n3}})
	// The origin says n3 does not exist: reported at once.
	recvMerged(t, c, deltaResp(edsType, []string{n3}, dres(n1, r1), dres(n2, r2)))

	r2b := e.put(edsType, n2, "2")
	r := c.Recv()
	checkDelta(t, deltaResp(edsType, nil, dres(n2, r2b)), r)
	c.Send(ack(edsType, r))

	e.cache.remove(key(edsType, n1))
	r = c.Recv()
	checkDelta(t, deltaResp(edsType, []string{n1}), r)
	c.Send(ack(edsType, r))

	// The missing one springs into existence.
	r3 := e.put(edsType, n3, "1")
	r = c.Recv()
	checkDelta(t, deltaResp(edsType, nil, dres(n3, r3)), r)
}

// Subscription changes are honoured even with a stale nonce.
func TestDeltaStaleNonceStillSubscribes(t *testing.T) {
	e := newEnv(t, 0)
	n1, n2 := xdstp(edsType, "e1"), xdstp(edsType, "e2")
	r1 := e.put(edsType, n1, "1")
	r2 := e.put(edsType, n2, "1")
	c := e.delta()
	c.Send(&discoveryv3.DeltaDiscoveryRequest{Node: testNode, TypeUrl: edsType, ResourceNamesSubscribe: []string{n1}})
	first := c.Recv()
	checkDelta(t, deltaResp(edsType, nil, dres(n1, r1)), first)
	r1b := e.put(edsType, n1, "2")
	second := c.Recv()
	checkDelta(t, deltaResp(edsType, nil, dres(n1, r1b)), second)
	if first.GetNonce() == second.GetNonce() {
		t.Fatalf("nonce %q reused on one stream", first.GetNonce())
	}
	c.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: edsType, ResponseNonce: first.GetNonce(), ResourceNamesSubscribe: []string{n2}})
	checkDelta(t, deltaResp(edsType, nil, dres(n2, r2)), c.Recv())
}

// A reconnecting client's initial_resource_versions are honoured.
func TestDeltaReconnectInitialVersions(t *testing.T) {
	e := newEnv(t, 0)
	same, newer, gone := xdstp(edsType, "same"), xdstp(edsType, "newer"), xdstp(edsType, "gone")
	rs := e.put(edsType, same, "1")
	rn := e.put(edsType, newer, "2")
	e.cache.remove(key(edsType, gone))
	c := e.delta()
	c.Send(&discoveryv3.DeltaDiscoveryRequest{
		Node: testNode, TypeUrl: edsType,
		ResourceNamesSubscribe: []string{same, newer, gone},
		InitialResourceVersions: map[string]string{
			same:  cache.ContentVersion(rs.Body),
			newer: cache.ContentVersion(res(edsType, newer, "1").Body),
			gone:  "1",
		},
	})
	recvMerged(t, c, deltaResp(edsType, []string{gone}, dres(newer, rn)))
	c.None()
}

// A glob is served member by member; an empty glob is answered with its
// own name in removed_resources.
func TestDeltaGlob(t *testing.T) {
	e := newEnv(t, 0)
	glob := xdstp(edsType, "dir/*")
	empty := xdstp(edsType, "empty/*")
	m1 := e.put(edsType, xdstp(edsType, "dir/m1"), "1")
	e.put(edsType, xdstp(edsType, "dir/sub/not-a-member"), "1")
	c := e.delta()
	c.Send(&discoveryv3.DeltaDiscoveryRequest{Node: testNode, TypeUrl: edsType, ResourceNamesSubscribe: []string{glob, empty}})
	recvMerged(t, c, deltaResp(edsType, []string{empty}, dres(m1.Name, m1)))

	m2 := e.put(edsType, xdstp(edsType, "dir/m2"), "1")
	r := c.Recv()
	checkDelta(t, deltaResp(edsType, nil, dres(m2.Name, m2)), r)
	c.Send(ack(edsType, r))

	e.cache.remove(key(edsType, m1.Name))
	checkDelta(t, deltaResp(edsType, []string{m1.Name}), c.Recv())
}

// Each client gets a resource under the name it asked for.
func TestDeltaNameSpelling(t *testing.T) {
	e := newEnv(t, 0)
	canonical := xdstp(edsType, "foo?a=1&b=2")
	r := e.put(edsType, canonical, "1")
	tests := []struct{ name, asked string }{
		{"params b,a", xdstp(edsType, "foo?b=2&a=1")},
		{"params a,b", xdstp(edsType, "foo?a=1&b=2")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := e.delta()
			c.Send(&discoveryv3.DeltaDiscoveryRequest{Node: testNode, TypeUrl: edsType, ResourceNamesSubscribe: []string{tc.asked}})
			checkDelta(t, deltaResp(edsType, nil, dres(tc.asked, r)), c.Recv())
		})
	}
}

// TTL passes through; a heartbeat to a client holding the version carries
// no body.
func TestDeltaTTLAndHeartbeat(t *testing.T) {
	e := newEnv(t, 0)
	n := xdstp(edsType, "ttl")
	r := res(edsType, n, "1")
	r.TTL = durationpb.New(30e9)
	e.cache.set(key(edsType, n), r)
	c := e.delta()
	c.Send(&discoveryv3.DeltaDiscoveryRequest{Node: ttlNode, TypeUrl: edsType, ResourceNamesSubscribe: []string{n}})
	got := c.Recv()
	checkDelta(t, deltaResp(edsType, nil, dres(n, r)), got)
	c.Send(ack(edsType, got))

	hb := &cache.Resource{Name: n, Body: r.Body, TTL: durationpb.New(60e9), Heartbeat: true}
	e.cache.set(key(edsType, n), hb)
	checkDelta(t, deltaResp(edsType, nil, &discoveryv3.Resource{Name: n, Version: cache.ContentVersion(r.Body), Ttl: hb.TTL}), c.Recv())
}

// A NACK is recorded and counted; it changes nothing for another client.
func TestDeltaNack(t *testing.T) {
	e := newEnv(t, 0)
	n := xdstp(edsType, "e1")
	r1 := e.put(edsType, n, "1")
	bad, good := e.delta(), e.delta()
	for _, c := range []*deltaStreamC{bad, good} {
		c.Send(&discoveryv3.DeltaDiscoveryRequest{Node: testNode, TypeUrl: edsType, ResourceNamesSubscribe: []string{n}})
		checkDelta(t, deltaResp(edsType, nil, dres(n, r1)), c.Recv())
	}
	r2 := e.put(edsType, n, "2")
	got := bad.Recv()
	bad.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: edsType, ResponseNonce: got.GetNonce(), ErrorDetail: &rpcstatus.Status{Code: 3, Message: "bad endpoint"}})
	checkDelta(t, deltaResp(edsType, nil, dres(n, r2)), good.Recv())
	bad.None()
	// Requests are handled in order: once a later one is answered, the NACK was seen.
	syncName := xdstp(edsType, "sync")
	rs := e.put(edsType, syncName, "1")
	bad.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: edsType, ResourceNamesSubscribe: []string{syncName}})
	checkDelta(t, deltaResp(edsType, nil, dres(syncName, rs)), bad.Recv())
	checkNacks(t, e, edsType, 1, "bad endpoint")
	r3 := e.put(edsType, n, "3")
	checkDelta(t, deltaResp(edsType, nil, dres(n, r3)), good.Recv())
	checkDelta(t, deltaResp(edsType, nil, dres(n, r3)), bad.Recv())
}

type rpcStatus = rpcstatus.Status

// recvMerged receives responses until they hold as many resources and
// removals as want (the origin may answer existing and missing names in
// separate updates), merges them, and compares.
func recvMerged(t *testing.T, c *deltaStreamC, want *discoveryv3.DeltaDiscoveryResponse) {
	t.Helper()
	got := &discoveryv3.DeltaDiscoveryResponse{TypeUrl: want.GetTypeUrl()}
	for len(got.GetResources()) < len(want.GetResources()) || len(got.GetRemovedResources()) < len(want.GetRemovedResources()) {
		r := c.Recv()
		got.Resources = append(got.Resources, r.GetResources()...)
		got.RemovedResources = append(got.RemovedResources, r.GetRemovedResources()...)
		c.Send(ack(r.GetTypeUrl(), r))
	}
	checkDelta(t, want, got)
}

// A reconnecting wildcard client holding a resource that vanished while it
// was away gets it in removed_resources; unchanged members are not resent.
func TestDeltaReconnectWildcardRemoval(t *testing.T) {
	e := newEnv(t, 0)
	kept := e.put(ldsType, "kept", "1")
	c := e.delta()
	c.Send(&discoveryv3.DeltaDiscoveryRequest{
		Node: testNode, TypeUrl: ldsType,
		InitialResourceVersions: map[string]string{"kept": cache.ContentVersion(kept.Body), "vanished": "1"},
	})
	checkDelta(t, deltaResp(ldsType, []string{"vanished"}), c.Recv())
	c.None()
}

// A wildcard client hears of members added, changed and deleted, each
// looked up alone.
func TestDeltaWildcardMembers(t *testing.T) {
	e := newEnv(t, 0)
	a := e.put(cdsType, "A", "1")
	c := e.delta()
	c.Send(&discoveryv3.DeltaDiscoveryRequest{Node: testNode, TypeUrl: cdsType})
	checkDelta(t, deltaResp(cdsType, nil, dres("A", a)), c.Recv())
	tests := []struct {
		name string
		do   func() *discoveryv3.DeltaDiscoveryResponse
	}{
		{"added", func() *discoveryv3.DeltaDiscoveryResponse {
			b := e.put(cdsType, "B", "1")
			return deltaResp(cdsType, nil, dres("B", b))
		}},
		{"changed", func() *discoveryv3.DeltaDiscoveryResponse {
			a2 := e.put(cdsType, "A", "2")
			return deltaResp(cdsType, nil, dres("A", a2))
		}},
		{"deleted", func() *discoveryv3.DeltaDiscoveryResponse {
			e.cache.remove(key(cdsType, "B"))
			return deltaResp(cdsType, []string{"B"})
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			want := tc.do()
			checkDelta(t, want, c.Recv())
		})
	}
}
