package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	statusv3 "github.com/envoyproxy/go-control-plane/envoy/service/status/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	rpcstatus "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/xds-relay/xds-relay/config"
	"github.com/xds-relay/xds-relay/internal/access"
	relayadmin "github.com/xds-relay/xds-relay/internal/admin"
	"github.com/xds-relay/xds-relay/internal/downstream"
	"github.com/xds-relay/xds-relay/internal/propagation"
	relayproc "github.com/xds-relay/xds-relay/internal/relay"
	"github.com/xds-relay/xds-relay/internal/xdstest"
)

// adminJSON GETs path (with its query) from r's admin listener into v.
func adminJSON(t *testing.T, r *relayproc.Relay, path string, v any) {
	t.Helper()
	client := &http.Client{Timeout: xdstest.WaitTimeout, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Get("http://" + r.AdminAddr() + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", path, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
}

// edsChangeAfter waits until the relay lists an EDS change that arrived
// after since with counts want, and returns it.
func edsChangeAfter(t *testing.T, r *relayproc.Relay, since time.Time, want propagation.Counts) propagation.ChangeView {
	t.Helper()
	var got propagation.ChangeView
	xdstest.Poll(t, fmt.Sprintf("an EDS change with %+v", want), func() error {
		var p propagation.Page
		adminJSON(t, r, relayadmin.PropagationPath+"?type=envoy.config.endpoint.v3.ClusterLoadAssignment&limit=1", &p)
		if len(p.Changes) == 0 || p.Changes[0].Arrived.Before(since) {
			return fmt.Errorf("no EDS change since %v: %+v", since, p.Changes)
		}
		if got = p.Changes[0]; got.Counts != want {
			return fmt.Errorf("counts %+v", got.Counts)
		}
		return nil
	})
	return got
}

// clientPage is the relay's "why is this client behind?" for node id.
func clientPage(t *testing.T, r *relayproc.Relay, id string) map[string]downstream.ResourceProgress {
	t.Helper()
	var rep downstream.ProgressReport
	adminJSON(t, r, relayadmin.PropagationClientPath+"?node="+url.QueryEscape(id), &rep)
	out := map[string]downstream.ResourceProgress{}
	for _, s := range rep.Streams {
		for _, p := range s.Resources {
			out[p.Name] = p
		}
	}
	return out
}

// waitReason waits until node id's name has reason want on the client
// page, and returns its entry.
func waitReason(t *testing.T, r *relayproc.Relay, id, name string, want propagation.Reason) downstream.ResourceProgress {
	t.Helper()
	var got downstream.ResourceProgress
	xdstest.Poll(t, id+": "+name+" "+want.String(), func() error {
		if got = clientPage(t, r, id)[name]; got.Reason != want {
			return fmt.Errorf("%+v", got)
		}
		return nil
	})
	return got
}

// withEndpoint is cla with one more endpoint at addr.
func withEndpoint(cla *endpointv3.ClusterLoadAssignment, addr string, port uint32) *endpointv3.ClusterLoadAssignment {
	out := proto.Clone(cla).(*endpointv3.ClusterLoadAssignment)
	ep := proto.Clone(out.Endpoints[0].LbEndpoints[0]).(*endpointv3.LbEndpoint)
	sa := ep.GetEndpoint().GetAddress().GetSocketAddress()
	sa.Address, sa.PortSpecifier = addr, &corev3.SocketAddress_PortValue{PortValue: port}
	out.Endpoints[0].LbEndpoints = append(out.Endpoints[0].LbEndpoints, ep)
	return out
}

// One origin change reaches a fleet of real clients through the relay:
// grpc-go's xDS client, raw delta and SotW clients that ACK, and a raw
// client that NACKs. The ledger counts it sent to each, ACKed by those
// that ACKed, NACKed (with its reason, never converged) by the one that
// NACKed, nothing pending; the metrics count the ACKs and the NACK; the
// client page says who runs what and why; CSDS agrees with it.
func TestPropagationConvergence(t *testing.T) {
	o, ch := newChainOrigin(t)
	r := startRelay(t, func(c *config.Config) { c.CSDSListen = "127.0.0.1:0" }, o.addr)
	grpcXDSConn(t, grpcBootstrap(r.XDSAddr(), dsAuthority), "xds:///backend")

	conn := dial(t, r.XDSAddr())
	var ackers []*adsClient
	for i, variant := range []string{"delta", "delta", "sotw"} {
		c := newADSClient(t, conn, variant, fmt.Sprintf("acker-%d", i), "fleet", nil)
		c.subscribe(resource.EndpointType, ch.claName)
		c.waitHolds(resource.EndpointType, ch.claName)
		ackers = append(ackers, c)
	}
	nacker := openDelta(t, conn)
	nacker.Send(&discoveryv3.DeltaDiscoveryRequest{Node: &corev3.Node{Id: "nacker", Cluster: "fleet"}, TypeUrl: resource.EndpointType,
		ResourceNamesSubscribe: []string{ch.claName}})
	first := nacker.Recv()
	nacker.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resource.EndpointType, ResponseNonce: first.GetNonce()})
	waitReason(t, r, "nacker", ch.claName, propagation.InSync)

	since := time.Now()
	o.set(resource.EndpointType, ch.claName, withEndpoint(ch.cla, "127.0.0.2", 1))
	for _, c := range ackers {
		c.recvOne(nil)
	}
	const why = "endpoint 127.0.0.2:1 refused by policy"
	upd := nacker.Recv()
	nacker.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resource.EndpointType, ResponseNonce: upd.GetNonce(),
		ErrorDetail: &rpcstatus.Status{Code: 3, Message: why}})

	v := edsChangeAfter(t, r, since, propagation.Counts{Sent: 5, Acked: 4, Nacked: 1})
	if v.State != propagation.StateNacked || len(v.Reasons) != 1 || v.Reasons[0].Message != why || v.P99MS <= 0 ||
		!strings.Contains(v.Line, "4 ACKed / 1 NACKed ("+why+") / 0 pending") {
		t.Errorf("change %+v: want state nacked, the reason, a p99, and the line", v)
	}
	eds := []string{"authority", dsAuthority, "type", "envoy.config.endpoint.v3.ClusterLoadAssignment"}
	if n := relayMetric(t, r, "xds_relay_propagation_nacks_total", eds...); n != 1 {
		t.Errorf("xds_relay_propagation_nacks_total = %v, want 1", n)
	}
	// The first sync (5 streams) and the change (4 ACKs).
	if n := relayMetric(t, r, "xds_relay_propagation_seconds", eds...); n != 9 {
		t.Errorf("xds_relay_propagation_seconds count = %v, want 9", n)
	}

	p := waitReason(t, r, "nacker", ch.claName, propagation.Nacked)
	if p.Detail != why || p.Acked == "" || p.Acked == p.Sent || p.Sent != p.Newest || p.State != "nacked" {
		t.Errorf("nacker: %+v: want the error, ACKed the old version, sent the newest", p)
	}
	for name, p := range clientPage(t, r, "grpc-xds-client") {
		if p.Reason != propagation.InSync || p.Acked != p.Newest {
			t.Errorf("grpc-go client: %s %+v, want in sync", name, p)
		}
	}
	checkCSDSAgrees(t, r, "nacker", "grpc-xds-client", "acker-0", "acker-2")
}

// checkCSDSAgrees: for each node, CSDS's client status of each resource
// is the state the client page reports of it (two reads: polled until a
// client's answer between them no longer makes them differ).
func checkCSDSAgrees(t *testing.T, r *relayproc.Relay, ids ...string) {
	t.Helper()
	csds := csdsClient(t, r)
	for _, id := range ids {
		xdstest.Poll(t, id+": CSDS agrees with the client page", func() error { return csdsAgrees(t, r, csds, id) })
	}
}

// csdsAgrees compares node id's CSDS entries with its client page.
func csdsAgrees(t *testing.T, r *relayproc.Relay, csds statusv3.ClientStatusDiscoveryServiceClient, id string) error {
	want := map[string]string{"REQUESTED": "requested", "UNKNOWN": "sent", "ACKED": "acked", "DOES_NOT_EXIST": "acked", "NACKED": "nacked"}
	ctx, cancel := context.WithTimeout(context.Background(), xdstest.WaitTimeout)
	defer cancel()
	resp, err := csds.FetchClientStatus(ctx, &statusv3.ClientStatusRequest{Node: &corev3.Node{Id: id}})
	if err != nil {
		t.Fatal(err)
	}
	page := clientPage(t, r, id)
	n := 0
	for _, c := range resp.GetConfig() {
		for _, g := range c.GetGenericXdsConfigs() {
			n++
			if got := page[g.GetName()].State; got != want[g.GetClientStatus().String()] {
				return fmt.Errorf("%s: CSDS %s, client page %q", g.GetName(), g.GetClientStatus(), got)
			}
		}
	}
	if n == 0 || n != len(page) {
		return fmt.Errorf("CSDS reports %d resources, the client page %d", n, len(page))
	}
	return nil
}

// grpc-go's own xDS client rejects a ClusterLoadAssignment it cannot use
// (two endpoints at one address): the ledger counts the change NACKed by
// it, with grpc-go's own error, and the client page says it NACKed it and
// still runs the version it ACKed before.
func TestPropagationGRPCClientNacks(t *testing.T) {
	o, ch := newChainOrigin(t)
	r := startRelay(t, nil, o.addr)
	grpcXDSConn(t, grpcBootstrap(r.XDSAddr(), dsAuthority), "xds:///backend")
	before := waitReason(t, r, "grpc-xds-client", ch.claName, propagation.InSync)

	since := time.Now()
	sa := ch.cla.Endpoints[0].LbEndpoints[0].GetEndpoint().GetAddress().GetSocketAddress()
	o.set(resource.EndpointType, ch.claName, withEndpoint(ch.cla, sa.GetAddress(), sa.GetPortValue()))
	v := edsChangeAfter(t, r, since, propagation.Counts{Sent: 1, Nacked: 1})
	if v.State != propagation.StateNacked || len(v.Reasons) != 1 || !strings.Contains(v.Reasons[0].Message, "duplicate endpoint") {
		t.Errorf("change %+v: want NACKed by grpc-go for the duplicate endpoint", v)
	}
	p := waitReason(t, r, "grpc-xds-client", ch.claName, propagation.Nacked)
	if p.Acked != before.Acked || p.Sent == before.Sent || !strings.Contains(p.Detail, "duplicate endpoint") {
		t.Errorf("after the NACK %+v, before %+v: want it to run the version it ACKed before", p, before)
	}
}

// The client page's reasons end to end: waiting for the origin (a name the
// origin does not have), held back by the gather window (a name the relay
// holds, subscribed with that one), not served (an unknown authority),
// denied (a glob the access rules close), and sent but not answered.
func TestPropagationClientReasons(t *testing.T) {
	o := newGCPOrigin(t)
	c1, missing := dsCluster("c1"), dsCluster("missing")
	o.set(resource.ClusterType, c1, cluster(c1, 1))
	r := startRelay(t, func(c *config.Config) {
		c.Downstream.GatherWindow = time.Minute // held back for the whole test
		c.Authorities[0].Allow = []access.Rule{{NodeCluster: "fleet"}}
	}, o.addr)
	conn := dial(t, r.XDSAddr())

	cold := openDelta(t, conn)
	unknown := "xdstp://nowhere.example/envoy.config.cluster.v3.Cluster/x"
	cold.Send(&discoveryv3.DeltaDiscoveryRequest{Node: &corev3.Node{Id: "cold", Cluster: "fleet"}, TypeUrl: resource.ClusterType,
		ResourceNamesSubscribe: []string{c1, missing, unknown}})
	waitReason(t, r, "cold", missing, propagation.WaitingForOrigin)
	p := waitReason(t, r, "cold", c1, propagation.GatherWindow)
	if p.Sent != "" || p.Newest == "" {
		t.Errorf("held back: %+v, want nothing sent and a newest version", p)
	}
	waitReason(t, r, "cold", unknown, propagation.NotServed)

	silent := openDelta(t, conn)
	silent.Send(&discoveryv3.DeltaDiscoveryRequest{Node: &corev3.Node{Id: "silent", Cluster: "fleet"}, TypeUrl: resource.ClusterType,
		ResourceNamesSubscribe: []string{c1}})
	silent.Recv()
	waitReason(t, r, "silent", c1, propagation.AwaitingAck)

	outsider := openDelta(t, conn)
	glob := "xdstp://" + dsAuthority + "/envoy.config.cluster.v3.Cluster/*"
	outsider.Send(&discoveryv3.DeltaDiscoveryRequest{Node: &corev3.Node{Id: "outsider", Cluster: "elsewhere"}, TypeUrl: resource.ClusterType,
		ResourceNamesSubscribe: []string{glob}})
	outsider.Recv() // answered as if it did not exist
	waitReason(t, r, "outsider", glob, propagation.Denied)
}
