package integration

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	adminv3 "github.com/envoyproxy/go-control-plane/envoy/admin/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	statusv3 "github.com/envoyproxy/go-control-plane/envoy/service/status/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/google/go-cmp/cmp"
	rpcstatus "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"

	"github.com/xds-relay/xds-relay/config"
	"github.com/xds-relay/xds-relay/internal/access"
	relayproc "github.com/xds-relay/xds-relay/internal/relay"
	"github.com/xds-relay/xds-relay/internal/xdstest"
)

// csdsEntry is what a test compares of one generic_xds_config.
type csdsEntry struct {
	Client  string // node id
	Type    string
	Name    string
	Version string
	Config  string // ConfigStatus name
	Status  string // ClientResourceStatus name
	Error   string // error_state.details
	Updated bool   // last_updated set
}

// csdsEntries flattens a response, ordered by client, type and name.
func csdsEntries(resp *statusv3.ClientStatusResponse) []csdsEntry {
	out := []csdsEntry{}
	for _, c := range resp.GetConfig() {
		for _, g := range c.GetGenericXdsConfigs() {
			out = append(out, csdsEntry{Client: c.GetNode().GetId(), Type: g.GetTypeUrl(), Name: g.GetName(), Version: g.GetVersionInfo(),
				Config: g.GetConfigStatus().String(), Status: g.GetClientStatus().String(), Error: g.GetErrorState().GetDetails(),
				Updated: g.GetLastUpdated() != nil})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		return fmt.Sprint(a.Client, "\x00", a.Type, "\x00", a.Name) < fmt.Sprint(b.Client, "\x00", b.Type, "\x00", b.Name)
	})
	return out
}

// clientIDs lists the node ids of a response's client configs, sorted.
func clientIDs(resp *statusv3.ClientStatusResponse) []string {
	out := []string{}
	for _, c := range resp.GetConfig() {
		out = append(out, c.GetNode().GetId())
	}
	sort.Strings(out)
	return out
}

// waitCSDS fetches req from the relay's CSDS until cond holds on the
// response (the relay applies a client's ACK after the client sent it),
// up to xdstest.WaitTimeout; it returns the last response.
func waitCSDS(t *testing.T, c statusv3.ClientStatusDiscoveryServiceClient, what string, req *statusv3.ClientStatusRequest,
	cond func(*statusv3.ClientStatusResponse) string) *statusv3.ClientStatusResponse {
	t.Helper()
	var resp *statusv3.ClientStatusResponse
	xdstest.Poll(t, what, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), xdstest.WaitTimeout)
		defer cancel()
		var err error
		if resp, err = c.FetchClientStatus(ctx, req); err != nil {
			t.Fatalf("%s: FetchClientStatus: %v", what, err)
		}
		if diff := cond(resp); diff != "" {
			return errors.New("\n" + diff)
		}
		return nil
	})
	return resp
}

func entriesAre(want []csdsEntry) func(*statusv3.ClientStatusResponse) string {
	return func(resp *statusv3.ClientStatusResponse) string {
		if d := cmp.Diff(want, csdsEntries(resp)); d != "" {
			return "entries (-want +got):\n" + d
		}
		return ""
	}
}

func csdsClient(t *testing.T, r *relayproc.Relay) statusv3.ClientStatusDiscoveryServiceClient {
	t.Helper()
	if r.CSDSAddr() == "" {
		t.Fatal("relay serves no CSDS listener")
	}
	return statusv3.NewClientStatusDiscoveryServiceClient(dial(t, r.CSDSAddr()))
}

// TestCSDS: a relay between a go-control-plane origin and two raw ADS
// clients, a delta one that ACKs everything and a SotW one that NACKs an
// update, reports through the generated CSDS client what each was sent
// and what it answered: SYNCED and NACKED with the versions the clients
// saw, STALE until a client answers, filtered by node matchers and node,
// over Fetch and the stream; a client that leaves is no longer reported.
func TestCSDS(t *testing.T) {
	o := newGCPOrigin(t)
	c1, c2 := dsCluster("csds-1"), dsCluster("csds-2")
	o.set(resource.ClusterType, c1, cluster(c1, 1))
	o.set(resource.ClusterType, c2, cluster(c2, 1))
	r := startRelay(t, func(c *config.Config) { c.CSDSListen = "127.0.0.1:0" }, o.addr)
	conn := dial(t, r.XDSAddr())
	csds := csdsClient(t, r)
	all := &statusv3.ClientStatusRequest{}

	// The delta client ACKs both clusters.
	acker, leave := xdstest.Start(t, xdstest.DeltaOpener(conn))
	t.Cleanup(leave)
	acker.Send(&discoveryv3.DeltaDiscoveryRequest{Node: &corev3.Node{Id: "csds-acker", Cluster: "csds"}, TypeUrl: resource.ClusterType,
		ResourceNamesSubscribe: []string{c1, c2}})
	held := deltaView{}
	recvDelta(t, acker, held, has(held, c1, c2))

	// The SotW client ACKs c1 at version_info 1.
	nacker := openSotW(t, conn)
	nacker.Send(&discoveryv3.DiscoveryRequest{Node: &corev3.Node{Id: "csds-nacker", Cluster: "csds"}, TypeUrl: resource.ClusterType,
		ResourceNames: []string{c1}})
	first := nacker.Recv()
	nacker.Send(&discoveryv3.DiscoveryRequest{TypeUrl: resource.ClusterType, ResourceNames: []string{c1},
		VersionInfo: first.GetVersionInfo(), ResponseNonce: first.GetNonce()})

	want := []csdsEntry{
		{Client: "csds-acker", Type: resource.ClusterType, Name: c1, Version: held[c1].GetVersion(), Config: "SYNCED", Status: "ACKED", Updated: true},
		{Client: "csds-acker", Type: resource.ClusterType, Name: c2, Version: held[c2].GetVersion(), Config: "SYNCED", Status: "ACKED", Updated: true},
		{Client: "csds-nacker", Type: resource.ClusterType, Name: c1, Version: first.GetVersionInfo(), Config: "SYNCED", Status: "ACKED", Updated: true},
	}
	waitCSDS(t, csds, "both clients ACKed", all, entriesAre(want))

	// c1 changes: the delta client holds the new version unanswered
	// (STALE), then ACKs it; the SotW client NACKs it (ERROR).
	o.set(resource.ClusterType, c1, cluster(c1, 2))
	upd := acker.Recv()
	held.apply(upd)
	bad := nacker.Recv()
	const why = "connect_timeout too short"
	nacker.Send(&discoveryv3.DiscoveryRequest{TypeUrl: resource.ClusterType, ResourceNames: []string{c1},
		VersionInfo: first.GetVersionInfo(), ResponseNonce: bad.GetNonce(),
		ErrorDetail: &rpcstatus.Status{Code: int32(codes.InvalidArgument), Message: why}})
	if held[c1].GetVersion() == want[0].Version {
		t.Fatalf("the update kept version %q", want[0].Version)
	}
	want[0].Version, want[0].Config, want[0].Status = held[c1].GetVersion(), "STALE", "UNKNOWN"
	want[2] = csdsEntry{Client: "csds-nacker", Type: resource.ClusterType, Name: c1, Version: bad.GetVersionInfo(),
		Config: "ERROR", Status: "NACKED", Error: why, Updated: true}
	resp := waitCSDS(t, csds, "update sent, delta unanswered, SotW NACKed", all, entriesAre(want))
	for _, c := range resp.GetConfig() {
		for _, g := range c.GetGenericXdsConfigs() {
			if es := g.GetErrorState(); es != nil && (es.GetVersionInfo() != bad.GetVersionInfo() || es.GetLastUpdateAttempt() == nil) {
				t.Errorf("error_state %v, want version_info %q and last_update_attempt", es, bad.GetVersionInfo())
			}
		}
	}
	acker.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resource.ClusterType, ResponseNonce: upd.GetNonce()})
	want[0].Config, want[0].Status = "SYNCED", "ACKED"
	waitCSDS(t, csds, "delta client ACKed the update", all, entriesAre(want))

	// Selection: node matchers (any matches) and node.
	strm := func(sm *matcherv3.StringMatcher) *statusv3.ClientStatusRequest {
		return &statusv3.ClientStatusRequest{NodeMatchers: []*matcherv3.NodeMatcher{{NodeId: sm}}}
	}
	for _, tc := range []struct {
		name string
		req  *statusv3.ClientStatusRequest
		want []string
	}{
		{"exact", strm(&matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: "csds-nacker"}}), []string{"csds-nacker"}},
		{"prefix", strm(&matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Prefix{Prefix: "csds-"}}), []string{"csds-acker", "csds-nacker"}},
		{"suffix", strm(&matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Suffix{Suffix: "-acker"}}), []string{"csds-acker"}},
		{"regex", strm(&matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_SafeRegex{SafeRegex: &matcherv3.RegexMatcher{Regex: "csds-n.*"}}}), []string{"csds-nacker"}},
		{"contains, none", strm(&matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Contains{Contains: "gateway"}}), []string{}},
		{"node", &statusv3.ClientStatusRequest{Node: &corev3.Node{Id: "csds-acker"}}, []string{"csds-acker"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), xdstest.WaitTimeout)
			defer cancel()
			resp, err := csds.FetchClientStatus(ctx, tc.req)
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.want, clientIDs(resp)); d != "" {
				t.Errorf("clients (-want +got):\n%s", d)
			}
		})
	}

	// The stream answers each request.
	ctx, cancel := context.WithTimeout(context.Background(), xdstest.WaitTimeout)
	defer cancel()
	st, err := csds.StreamClientStatus(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		req  *statusv3.ClientStatusRequest
		want []csdsEntry
	}{
		{all, want},
		{strm(&matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: "csds-nacker"}}), want[2:]},
	} {
		if err := st.Send(tc.req); err != nil {
			t.Fatal(err)
		}
		resp, err := st.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(tc.want, csdsEntries(resp)); d != "" {
			t.Errorf("stream answer (-want +got):\n%s", d)
		}
	}
	if err := st.CloseSend(); err != nil {
		t.Fatal(err)
	}

	// The delta client leaves: it is no longer reported.
	leave()
	waitCSDS(t, csds, "the delta client left", all, func(resp *statusv3.ClientStatusResponse) string {
		if ids := clientIDs(resp); strings.Join(ids, ",") != "csds-nacker" {
			return fmt.Sprintf("clients %v, want only csds-nacker", ids)
		}
		return ""
	})
}

// TestCSDSRemoved: a name the origin does not have stays REQUESTED
// (NOT_SENT) while the relay has nothing to say of it; a resource the
// origin deletes is, once the delta client ACKs the removal,
// DOES_NOT_EXIST and SYNCED.
func TestCSDSRemoved(t *testing.T) {
	o := newGCPOrigin(t)
	gone, missing := dsCluster("csds-gone"), dsCluster("csds-missing")
	o.set(resource.ClusterType, gone, cluster(gone, 1))
	r := startRelay(t, func(c *config.Config) { c.CSDSListen = "127.0.0.1:0" }, o.addr)
	csds := csdsClient(t, r)
	s := openDelta(t, dial(t, r.XDSAddr()))
	s.Send(&discoveryv3.DeltaDiscoveryRequest{Node: &corev3.Node{Id: "csds-removed"}, TypeUrl: resource.ClusterType,
		ResourceNamesSubscribe: []string{gone, missing}})
	held := deltaView{}
	recvDelta(t, s, held, has(held, gone))
	waitCSDS(t, csds, "one sent and ACKed, one requested", &statusv3.ClientStatusRequest{}, entriesAre([]csdsEntry{
		{Client: "csds-removed", Type: resource.ClusterType, Name: gone, Version: held[gone].GetVersion(), Config: "SYNCED", Status: "ACKED", Updated: true},
		{Client: "csds-removed", Type: resource.ClusterType, Name: missing, Config: "NOT_SENT", Status: "REQUESTED"},
	}))

	o.del(resource.ClusterType, gone)
	recvDelta(t, s, held, func() bool { _, ok := held[gone]; return !ok })
	waitCSDS(t, csds, "removal ACKed", &statusv3.ClientStatusRequest{}, entriesAre([]csdsEntry{
		{Client: "csds-removed", Type: resource.ClusterType, Name: gone, Config: "SYNCED", Status: adminv3.ClientResourceStatus_DOES_NOT_EXIST.String()},
		{Client: "csds-removed", Type: resource.ClusterType, Name: missing, Config: "NOT_SENT", Status: "REQUESTED"},
	}))
}

// TestCSDSWithClientCertificates: csds_listen takes downstream.tls as the
// xDS listener does, and csds_allow decides who of those is answered: a
// caller whose certificate csds_allow lists is answered, other certificates
// of ca_file get PermissionDenied, one
// without a client certificate is refused at the handshake, and one that
// does not trust the relay's serving CA does not connect.
func TestCSDSWithClientCertificates(t *testing.T) {
	serving, clients := xdstest.NewCA(t, "serving-ca"), xdstest.NewCA(t, "clients")
	dir := t.TempDir()
	certFile, keyFile, caFile := filepath.Join(dir, "relay.pem"), filepath.Join(dir, "relay-key.pem"), filepath.Join(dir, "clients.PEM")
	srv := serving.Server("relay")
	writeFileAtomic(t, certFile, srv.CertPEM)
	writeFileAtomic(t, keyFile, srv.KeyPEM)
	writeFileAtomic(t, caFile, clients.PEM)
	o := newGCPOrigin(t)
	r := startRelay(t, func(cfg *config.Config) {
		cfg.Log.Level = config.LogInfo
		cfg.CSDSListen = "127.0.0.1:0"
		cfg.Downstream.TLS = config.ServerTLS{CertFile: certFile, KeyFile: keyFile, CAFile: caFile}
		cfg.CSDSAllow = []access.AllowEntry{{URISAN: "spiffe://fleet.example/ops/*"}}
	}, o.addr)
	operator := clients.Issue("operator", x509.ExtKeyUsageClientAuth, xdstest.SANs{URIs: []string{"spiffe://fleet.example/ops/alice"}}).TLS
	proxy := clients.Issue("proxy", x509.ExtKeyUsageClientAuth, xdstest.SANs{URIs: []string{"spiffe://fleet.example/ns/prod/envoy"}}).TLS

	fetch := func(tc *tls.Config) error {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), xdstest.WaitTimeout)
		defer cancel()
		c := statusv3.NewClientStatusDiscoveryServiceClient(dial(t, r.CSDSAddr(), grpc.WithTransportCredentials(credentials.NewTLS(tc))))
		_, err := c.FetchClientStatus(ctx, &statusv3.ClientStatusRequest{})
		if ctx.Err() != nil {
			t.Fatalf("no answer within %v: %v", xdstest.WaitTimeout, err)
		}
		return err
	}
	if err := fetch(&tls.Config{RootCAs: serving.Pool(), Certificates: []tls.Certificate{operator}}); err != nil {
		t.Errorf("caller whose certificate csds_allow lists: %v", err)
	}
	// A client of the fleet (trusted by downstream.tls, and allowed to
	// subscribe) may not list every client's resources, nor may a
	// certificate without SANs: csds_allow decides.
	if err := fetch(&tls.Config{RootCAs: serving.Pool(), Certificates: []tls.Certificate{proxy}}); grpcCode(err) != codes.PermissionDenied {
		t.Errorf("caller whose certificate csds_allow does not list: %v; want PermissionDenied", err)
	}
	if err := fetch(&tls.Config{RootCAs: serving.Pool(), Certificates: []tls.Certificate{clients.Client("operator").TLS}}); grpcCode(err) != codes.PermissionDenied {
		t.Errorf("caller whose certificate has no SANs: %v; want PermissionDenied", err)
	}
	if n := relayMetric(t, r, "xds_relay_csds_denied_total"); n != 2 {
		t.Errorf("xds_relay_csds_denied_total = %v, want 2", n)
	}
	if err := fetch(&tls.Config{RootCAs: serving.Pool()}); grpcCode(err) != codes.Unavailable {
		t.Errorf("caller without a client certificate: %v; want the connection refused (Unavailable)", err)
	}
	if err := fetch(&tls.Config{RootCAs: clients.Pool(), Certificates: []tls.Certificate{clients.Client("operator").TLS}}); grpcCode(err) != codes.Unavailable {
		t.Errorf("caller that does not trust the relay: %v; want Unavailable", err)
	}
	// Plaintext is not served.
	ctx, cancel := context.WithTimeout(context.Background(), xdstest.WaitTimeout)
	defer cancel()
	if _, err := csdsClient(t, r).FetchClientStatus(ctx, &statusv3.ClientStatusRequest{}); grpcCode(err) != codes.Unavailable {
		t.Errorf("plaintext caller: %v; want Unavailable", err)
	}
}
