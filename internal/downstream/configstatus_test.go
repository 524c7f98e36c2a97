package downstream

import (
	"fmt"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/google/go-cmp/cmp"
	rpcstatus "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/protobuf/proto"
)

// edsStates is a client's EDS entries: name → state (and "+pending").
func edsStates(c ClientStatus) map[string]string {
	out := map[string]string{}
	for _, r := range c.Resources {
		if r.TypeURL != edsType {
			continue
		}
		s := r.State.String()
		if r.Pending {
			s += "+pending"
		}
		out[r.Name] = s
	}
	return out
}

// TestConfigStatusBounds: clients past MaxClients are counted, not listed;
// entries past MaxResources are counted per client and in all; Match
// selects by node.
func TestConfigStatusBounds(t *testing.T) {
	e := newEnv(t, 0)
	names := []string{xdstp(edsType, "a"), xdstp(edsType, "b"), xdstp(edsType, "c")}
	for _, n := range names {
		e.put(edsType, n, "1")
	}
	for i := range 3 {
		c := e.delta()
		c.Send(&discoveryv3.DeltaDiscoveryRequest{Node: &corev3.Node{Id: fmt.Sprintf("node-%d", i)}, TypeUrl: edsType, ResourceNamesSubscribe: names})
		got := c.Recv()
		c.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: edsType, ResponseNonce: got.GetNonce()})
		e.syncDelta(c) // the ACK is applied; adds one Secret entry
	}
	rep := e.srv.ConfigStatus(StatusQuery{MaxClients: 2, MaxResources: 5})
	if rep.Matched != 3 || len(rep.Clients) != 2 {
		t.Fatalf("matched %d, listed %d; want 3 and 2 (MaxClients)", rep.Matched, len(rep.Clients))
	}
	// 4 entries each (3 EDS, 1 Secret): the first in full, 1 of the second.
	if got := []int{len(rep.Clients[0].Resources), rep.Clients[0].ResourcesCut, len(rep.Clients[1].Resources), rep.Clients[1].ResourcesCut, rep.ResourcesCut}; !cmp.Equal(got, []int{4, 0, 1, 3, 3}) {
		t.Errorf("entries, cut of client 0, 1, cut in all = %v, want [4 0 1 3 3]", got)
	}
	want := map[string]string{names[0]: "acked", names[1]: "acked", names[2]: "acked"}
	if d := cmp.Diff(want, edsStates(rep.Clients[0])); d != "" {
		t.Errorf("client 0 (-want +got):\n%s", d)
	}

	rep = e.srv.ConfigStatus(StatusQuery{Match: func(n *corev3.Node) bool { return n.GetId() == "node-2" }, MaxClients: 10, MaxResources: 100})
	if rep.Matched != 1 || len(rep.Clients) != 1 || rep.Clients[0].Node.GetId() != "node-2" {
		t.Errorf("Match node-2: %+v", rep)
	}
	rep = e.srv.ConfigStatus(StatusQuery{MaxClients: 10, MaxResources: 0})
	if len(rep.Clients) != 3 || rep.ResourcesCut != 12 || len(rep.Clients[2].Resources) != 0 {
		t.Errorf("no entry budget: %d clients, %d cut; want 3 clients listed, 12 entries cut", len(rep.Clients), rep.ResourcesCut)
	}
}

// TestConfigStatusNackIsTheResponses: a delta NACK marks the names of the
// response it answers, not a name sent again since; an answer naming a
// nonce never sent changes nothing.
func TestConfigStatusNackIsTheResponses(t *testing.T) {
	e := newEnv(t, 0)
	a, b := xdstp(edsType, "a"), xdstp(edsType, "b")
	e.put(edsType, a, "1")
	e.put(edsType, b, "1")
	c := e.delta()
	c.Send(&discoveryv3.DeltaDiscoveryRequest{Node: testNode, TypeUrl: edsType, ResourceNamesSubscribe: []string{a, b}})
	first := c.Recv() // a and b
	states := func() map[string]string {
		t.Helper()
		e.syncDelta(c)
		rep := e.srv.ConfigStatus(StatusQuery{MaxClients: 1, MaxResources: 100})
		return edsStates(rep.Clients[0])
	}
	if d := cmp.Diff(map[string]string{a: "sent", b: "sent"}, states()); d != "" {
		t.Errorf("before any answer (-want +got):\n%s", d)
	}
	// a changes before the client answers the first response.
	e.put(edsType, a, "2")
	second := c.Recv()
	if len(second.GetResources()) != 1 || second.GetResources()[0].GetName() != a {
		t.Fatalf("second response %v, want a alone", second)
	}
	c.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: edsType, ResponseNonce: "999999"}) // never sent
	if d := cmp.Diff(map[string]string{a: "sent", b: "sent"}, states()); d != "" {
		t.Errorf("after an unknown nonce (-want +got):\n%s", d)
	}
	c.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: edsType, ResponseNonce: first.GetNonce(),
		ErrorDetail: &rpcstatus.Status{Code: 3, Message: "bad b"}})
	if d := cmp.Diff(map[string]string{a: "sent", b: "nacked"}, states()); d != "" {
		t.Errorf("after the first response's NACK (-want +got):\n%s", d)
	}
	c.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: edsType, ResponseNonce: second.GetNonce()})
	if d := cmp.Diff(map[string]string{a: "acked", b: "nacked"}, states()); d != "" {
		t.Errorf("after the second response's ACK (-want +got):\n%s", d)
	}
}

// TestConfigStatusBytes: MaxBytes bounds the report by its entries' and
// nodes' size upper bounds; a client whose node does not fit is counted,
// not listed.
func TestConfigStatusBytes(t *testing.T) {
	e := newEnv(t, 0)
	names := []string{xdstp(edsType, "a"), xdstp(edsType, "b"), xdstp(edsType, "c")}
	for _, n := range names {
		e.put(edsType, n, "1")
	}
	for i := range 3 {
		c := e.delta()
		c.Send(&discoveryv3.DeltaDiscoveryRequest{Node: &corev3.Node{Id: fmt.Sprintf("node-%d", i)}, TypeUrl: edsType, ResourceNamesSubscribe: names})
		c.Recv()
	}
	all := e.srv.ConfigStatus(StatusQuery{MaxClients: 10, MaxResources: 100})
	size := func(c ClientStatus, entries int) int {
		n := proto.Size(c.Node) + entryOverhead
		for i := range entries {
			n += c.Resources[i].size()
		}
		return n
	}
	// Room for the first client whole, the second's node and one entry.
	max := size(all.Clients[0], 3) + size(all.Clients[1], 1)
	rep := e.srv.ConfigStatus(StatusQuery{MaxClients: 10, MaxResources: 100, MaxBytes: max})
	if got := []int{rep.Matched, len(rep.Clients), len(rep.Clients[0].Resources), len(rep.Clients[1].Resources), rep.ResourcesCut}; !cmp.Equal(got, []int{3, 2, 3, 1, 2}) {
		t.Errorf("matched, listed, entries of 0 and 1, cut = %v; want [3 2 3 1 2]", got)
	}
	rep = e.srv.ConfigStatus(StatusQuery{MaxClients: 10, MaxResources: 100, MaxBytes: 1})
	if rep.Matched != 3 || len(rep.Clients) != 0 {
		t.Errorf("MaxBytes 1: matched %d, listed %d; want 3, 0", rep.Matched, len(rep.Clients))
	}
}
