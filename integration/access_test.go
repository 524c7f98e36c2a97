package integration

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	clusterservice "github.com/envoyproxy/go-control-plane/envoy/service/cluster/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/xds-relay/xds-relay/config"
	"github.com/xds-relay/xds-relay/internal/access"
	relayproc "github.com/xds-relay/xds-relay/internal/relay"
	"github.com/xds-relay/xds-relay/internal/xdstest"
	"github.com/xds-relay/xds-relay/internal/xdstype"
)

// The identities of the access tests: SPIFFE IDs (URI SANs) and DNS SANs.
const (
	spiffeProdApp     = "spiffe://fleet.example/ns/prod/sa/app"
	spiffeProdGateway = "spiffe://fleet.example/ns/prod/sa/gateway"
	spiffeStagingApp  = "spiffe://fleet.example/ns/staging/sa/app"
)

// accessPKI is a CA, the relay's server certificate (127.0.0.1) and client
// certificates, written as PEM files into a test directory.
type accessPKI struct {
	pool               *x509.CertPool
	caFile             string
	serverCert, srvKey string
	prodApp, gateway   tls.Certificate // URI SANs under ns/prod
	staging, dnsOnly   tls.Certificate // ns/staging; DNS SAN api.prod.example only
}

func newAccessPKI(t testing.TB) *accessPKI {
	t.Helper()
	dir := t.TempDir()
	ca := xdstest.NewCA(t, "access test CA")
	p := &accessPKI{pool: ca.Pool(), caFile: ca.WriteFile(dir, "ca.pem")}
	p.serverCert, p.srvKey = ca.Server("access test server").WriteFiles(t, dir, "server")
	client := func(uris, dns []string) tls.Certificate {
		return ca.Issue("access test leaf", x509.ExtKeyUsageClientAuth, xdstest.SANs{URIs: uris, DNS: dns}).TLS
	}
	p.prodApp = client([]string{spiffeProdApp}, []string{"app.prod.example"})
	p.gateway = client([]string{spiffeProdGateway}, nil)
	p.staging = client([]string{spiffeStagingApp}, []string{"app.staging.example"})
	p.dnsOnly = client(nil, []string{"api.prod.example"})
	return p
}

// tlsConfig is a client's TLS config presenting cert (none when nil).
func (p *accessPKI) tlsConfig(cert *tls.Certificate) *tls.Config {
	c := &tls.Config{RootCAs: p.pool, MinVersion: tls.VersionTLS12}
	if cert != nil {
		c.Certificates = []tls.Certificate{*cert}
	}
	return c
}

// dial connects to the relay with mTLS as cert.
func (p *accessPKI) dial(t testing.TB, addr string, cert tls.Certificate) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(p.tlsConfig(&cert))))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// restPoll POSTs a JSON DiscoveryRequest to the relay's rest_listen over
// mTLS as cert (nil: no client certificate) and returns the HTTP status
// and body; err is a transport failure (a refused handshake).
func (p *accessPKI) restPoll(t testing.TB, addr, kind, body string, cert *tls.Certificate) (int, string, error) {
	t.Helper()
	tr := &http.Transport{TLSClientConfig: p.tlsConfig(cert)}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr, Timeout: xdstest.WaitTimeout}
	resp, err := c.Post("https://"+addr+"/v3/discovery:"+kind, "application/json", strings.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(raw), nil
}

// newAccessOrigin is a go-control-plane origin serving clusters, endpoints
// and secrets.
func newAccessOrigin(t testing.TB) *gcpOrigin {
	t.Helper()
	return serveOrigin(t, linearOrigin(resource.ClusterType, resource.EndpointType, resource.SecretType), nil)
}

var (
	accessCluster1 = xdstpName(dsAuthority, "envoy.config.cluster.v3.Cluster", "c1")
	accessCluster2 = xdstpName(dsAuthority, "envoy.config.cluster.v3.Cluster", "c2")
	accessGlob     = xdstpName(dsAuthority, "envoy.config.cluster.v3.Cluster", "*")
	accessSecret   = xdstpName(dsAuthority, "envoy.extensions.transport_sockets.tls.v3.Secret", "gw-key")
)

// startAccessRelay runs the relay with downstream mTLS, rest_listen and
// access rules on dsAuthority: ns/prod SPIFFE IDs and *.prod.example DNS
// names may subscribe; Secrets only the prod gateway.
func startAccessRelay(t *testing.T, p *accessPKI, o *gcpOrigin, edit func(*config.Config)) (xds, rest string, r func(name string, labels ...string) float64) {
	t.Helper()
	relay, _ := runAccessRelay(t, p, o, edit)
	return relay.XDSAddr(), relay.RESTAddr(), func(name string, labels ...string) float64 {
		return relayMetric(t, relay, name, labels...)
	}
}

// runAccessRelay is startAccessRelay returning the relay and the config
// it runs (for a test that reloads an edited copy).
func runAccessRelay(t *testing.T, p *accessPKI, o *gcpOrigin, edit func(*config.Config)) (*relayproc.Relay, *config.Config) {
	t.Helper()
	var cfg *config.Config
	relay := startRelay(t, func(c *config.Config) {
		cfg = c
		c.Downstream.TLS = config.ServerTLS{CertFile: p.serverCert, KeyFile: p.srvKey, CAFile: p.caFile}
		c.RESTListen = "127.0.0.1:0"
		c.Authorities[0].Allow = []access.AllowEntry{
			{URISAN: "spiffe://fleet.example/ns/prod/*"},
			{DNSSAN: "*.prod.example"},
		}
		c.Authorities[0].AllowByType = map[string][]access.AllowEntry{
			resource.SecretType: {{URISAN: spiffeProdGateway}},
		}
		if edit != nil {
			edit(c)
		}
	}, o.addr)
	return relay, cfg
}

// permissionDenied checks that a stream ended with PermissionDenied naming
// the authority and type, and nothing of the resource.
func permissionDenied(t *testing.T, who string, err error, typeURL string, hidden ...string) {
	t.Helper()
	st, msg := grpcCode(err), ""
	if err != nil {
		msg = err.Error()
	}
	if st != codes.PermissionDenied {
		t.Fatalf("%s: stream ended with %v, want PermissionDenied", who, err)
	}
	for _, want := range []string{dsAuthority, typeURL} {
		if !strings.Contains(msg, want) {
			t.Errorf("%s: status %q does not name %q", who, msg, want)
		}
	}
	for _, h := range hidden {
		if strings.Contains(msg, h) {
			t.Errorf("%s: status %q reveals %q", who, msg, h)
		}
	}
}

// TestAccessMTLS: with downstream mTLS, clients whose certificate matches
// the authority's allow list get resources over delta, SotW, Fetch and
// REST; others get PermissionDenied (403) naming authority and type only,
// or nothing for a glob; Secrets are narrower (allow_by_type); each denial
// is counted; a denied client does not disturb an allowed one.
func TestAccessMTLS(t *testing.T) {
	p := newAccessPKI(t)
	o := newAccessOrigin(t)
	o.set(resource.ClusterType, accessCluster1, cluster(accessCluster1, 1))
	o.set(resource.ClusterType, accessCluster2, cluster(accessCluster2, 2))
	o.set(resource.SecretType, accessSecret, &tlsv3.Secret{Name: accessSecret})
	xds, rest, metric := startAccessRelay(t, p, o, nil)
	deniedClusters := func() float64 {
		return metric("xds_relay_downstream_access_denied_total", "type", "envoy.config.cluster.v3.Cluster", "authority", dsAuthority)
	}
	deniedSecrets := func() float64 {
		return metric("xds_relay_downstream_access_denied_total", "type", "envoy.extensions.transport_sockets.tls.v3.Secret", "authority", dsAuthority)
	}

	// An allowed client (URI SAN under ns/prod) holds its clusters throughout.
	allowed := newADSClient(t, p.dial(t, xds, p.prodApp), "delta", "prod-app", "prod", nil)
	allowed.subscribe(resource.ClusterType, accessCluster1)
	allowed.waitHolds(resource.ClusterType, accessCluster1)

	t.Run("denied delta name", func(t *testing.T) {
		before := deniedClusters()
		s := openDelta(t, p.dial(t, xds, p.staging))
		s.Send(&discoveryv3.DeltaDiscoveryRequest{Node: testNodeDS, TypeUrl: resource.ClusterType, ResourceNamesSubscribe: []string{accessCluster1}})
		permissionDenied(t, "staging delta", s.Err().Err(), resource.ClusterType, "c1")
		if got := deniedClusters(); got != before+1 {
			t.Errorf("access_denied_total = %v, want %v", got, before+1)
		}
	})
	t.Run("denied name that does not exist answers alike", func(t *testing.T) {
		s := openDelta(t, p.dial(t, xds, p.staging))
		missing := xdstpName(dsAuthority, "envoy.config.cluster.v3.Cluster", "no-such-cluster")
		s.Send(&discoveryv3.DeltaDiscoveryRequest{Node: testNodeDS, TypeUrl: resource.ClusterType, ResourceNamesSubscribe: []string{missing}})
		permissionDenied(t, "staging delta", s.Err().Err(), resource.ClusterType, "no-such-cluster")
	})
	t.Run("denied SotW name", func(t *testing.T) {
		s := openSotW(t, p.dial(t, xds, p.staging))
		s.Send(&discoveryv3.DiscoveryRequest{Node: testNodeDS, TypeUrl: resource.ClusterType, ResourceNames: []string{accessCluster2}})
		permissionDenied(t, "staging sotw", s.Err().Err(), resource.ClusterType, "c2")
	})
	t.Run("denied glob is answered as removed, nothing leaks", func(t *testing.T) {
		before := deniedClusters()
		s := openDelta(t, p.dial(t, xds, p.staging))
		s.Send(&discoveryv3.DeltaDiscoveryRequest{Node: testNodeDS, TypeUrl: resource.ClusterType, ResourceNamesSubscribe: []string{accessGlob}})
		r := s.Recv()
		if len(r.GetResources()) != 0 || len(r.GetRemovedResources()) != 1 || r.GetRemovedResources()[0] != accessGlob {
			t.Fatalf("denied glob: got resources %v, removed %v; want only the glob removed", r.GetResources(), r.GetRemovedResources())
		}
		s.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resource.ClusterType, ResponseNonce: r.GetNonce()})
		s.None() // no member ever follows; the stream stays open
		if got := deniedClusters(); got != before+1 {
			t.Errorf("access_denied_total = %v, want %v", got, before+1)
		}
	})
	t.Run("allowed glob gets its members", func(t *testing.T) {
		c := newADSClient(t, p.dial(t, xds, p.prodApp), "delta", "prod-glob", "prod", nil)
		c.subscribe(resource.ClusterType, accessGlob)
		c.waitHolds(resource.ClusterType, accessCluster1, accessCluster2)
	})
	t.Run("DNS SAN allows", func(t *testing.T) {
		c := newADSClient(t, p.dial(t, xds, p.dnsOnly), "sotw", "dns-only", "prod", nil)
		c.subscribe(resource.ClusterType, accessCluster2)
		c.waitHolds(resource.ClusterType, accessCluster2)
	})
	t.Run("secrets are narrower", func(t *testing.T) {
		before := deniedSecrets()
		s := openDelta(t, p.dial(t, xds, p.prodApp))
		s.Send(&discoveryv3.DeltaDiscoveryRequest{Node: testNodeDS, TypeUrl: resource.SecretType, ResourceNamesSubscribe: []string{accessSecret}})
		permissionDenied(t, "prod app secret", s.Err().Err(), resource.SecretType, "gw-key")
		if got := deniedSecrets(); got != before+1 {
			t.Errorf("secret access_denied_total = %v, want %v", got, before+1)
		}
		gw := newADSClient(t, p.dial(t, xds, p.gateway), "delta", "gateway", "prod", nil)
		gw.subscribe(resource.SecretType, accessSecret)
		gw.waitHolds(resource.SecretType, accessSecret)
		// The gateway's ns/prod identity still gets clusters by `allow`.
		gw.subscribe(resource.ClusterType, accessCluster1)
		gw.waitHolds(resource.ClusterType, accessCluster1)
	})
	t.Run("unary Fetch", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), xdstest.WaitTimeout)
		defer cancel()
		req := &discoveryv3.DiscoveryRequest{Node: testNodeDS, ResourceNames: []string{accessCluster1}}
		_, err := clusterservice.NewClusterDiscoveryServiceClient(p.dial(t, xds, p.staging)).FetchClusters(ctx, req)
		permissionDenied(t, "staging fetch", err, resource.ClusterType, "c1")
		resp, err := clusterservice.NewClusterDiscoveryServiceClient(p.dial(t, xds, p.prodApp)).FetchClusters(ctx, req)
		if err != nil || len(resp.GetResources()) != 1 {
			t.Fatalf("prod app fetch: %v, %v", resp, err)
		}
	})
	t.Run("REST on rest_listen", func(t *testing.T) {
		body := `{"node": {"id": "rest"}, "resource_names": ["` + accessCluster1 + `"]}`
		code, raw, err := p.restPoll(t, rest, "clusters", body, &p.prodApp)
		dr := &discoveryv3.DiscoveryResponse{}
		if err != nil || code != http.StatusOK || protojson.Unmarshal([]byte(raw), dr) != nil || len(dr.GetResources()) != 1 {
			t.Fatalf("allowed REST poll: %d %s %v", code, raw, err)
		}
		before := deniedClusters()
		code, raw, err = p.restPoll(t, rest, "clusters", body, &p.staging)
		if err != nil || code != http.StatusForbidden || strings.Contains(raw, "c1") || !strings.Contains(raw, dsAuthority) {
			t.Errorf("denied REST poll: %d %q %v; want 403 naming the authority, not the resource", code, raw, err)
		}
		if got := deniedClusters(); got != before+1 {
			t.Errorf("access_denied_total after a denied REST poll = %v, want %v", got, before+1)
		}
		secret := `{"node": {"id": "rest"}, "resource_names": ["` + accessSecret + `"]}`
		if code, raw, err := p.restPoll(t, rest, "secrets", secret, &p.prodApp); err != nil || code != http.StatusForbidden {
			t.Errorf("prod app REST secret: %d %q %v; want 403", code, raw, err)
		}
		if code, raw, err := p.restPoll(t, rest, "secrets", secret, &p.gateway); err != nil || code != http.StatusOK || !strings.Contains(raw, "gw-key") {
			t.Errorf("gateway REST secret: %d %q %v; want 200 with the secret", code, raw, err)
		}
		// Without a client certificate the handshake is refused.
		if code, _, err := p.restPoll(t, rest, "clusters", body, nil); err == nil {
			t.Errorf("REST poll without a client certificate: HTTP %d, want the handshake refused", code)
		}
	})

	// Nothing above disturbed the allowed client: it gets the next change.
	o.set(resource.ClusterType, accessCluster1, cluster(accessCluster1, 7))
	allowed.waitTimeout(accessCluster1, 7)
}

// TestAccessNodeClaims: in a plaintext deployment the allow list matches the
// node id and cluster a client claims, for legacy names too (their
// authority is the one their aggregation rule gives). A denied legacy
// wildcard is left out: the client receives no resource.
func TestAccessNodeClaims(t *testing.T) {
	o := newAccessOrigin(t)
	o.set(resource.ClusterType, "legacy-a", cluster("legacy-a", 1))
	r := startRelay(t, func(c *config.Config) {
		c.Aggregation.Rules = decodeAggRules(t, `
- name: all
  default: true
  result: {authority: ds.example, group: [{literal: all}]}
`)
		c.Authorities[0].Allow = []access.AllowEntry{{NodeCluster: "prod-*"}, {NodeID: "envoy-*"}}
	}, o.addr)
	conn := dial(t, r.XDSAddr())

	t.Run("admin serves no configuration and no pprof", func(t *testing.T) {
		body := `{"node": {"id": "envoy-1", "cluster": "prod-east"}, "resource_names": ["legacy-a"]}`
		resp, err := http.Post("http://"+r.AdminAddr()+"/v3/discovery:clusters", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("admin POST /v3/discovery:clusters = %d, want 404", resp.StatusCode)
		}
		resp, err = http.Get("http://" + r.AdminAddr() + "/debug/pprof/")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("admin GET /debug/pprof/ without admin_pprof = %d, want 404", resp.StatusCode)
		}
		if r.RESTAddr() != "" {
			t.Errorf("RESTAddr = %q with rest_listen off", r.RESTAddr())
		}
	})

	for _, tc := range []struct{ name, id, cluster, variant string }{
		{"node cluster", "x", "prod-east", "delta"},
		{"node id", "envoy-7", "staging", "sotw"},
	} {
		t.Run("allowed by "+tc.name, func(t *testing.T) {
			c := newADSClient(t, conn, tc.variant, tc.id, tc.cluster, nil)
			c.subscribe(resource.ClusterType, "legacy-a")
			c.waitHolds(resource.ClusterType, "legacy-a")
		})
	}
	t.Run("denied legacy name", func(t *testing.T) {
		s := openSotW(t, conn)
		s.Send(&discoveryv3.DiscoveryRequest{Node: &corev3.Node{Id: "x", Cluster: "staging"}, TypeUrl: resource.ClusterType, ResourceNames: []string{"legacy-a"}})
		permissionDenied(t, "staging legacy", s.Err().Err(), resource.ClusterType, "legacy-a")
	})
	t.Run("denied legacy wildcard receives nothing", func(t *testing.T) {
		s := openDelta(t, conn)
		s.Send(&discoveryv3.DeltaDiscoveryRequest{Node: &corev3.Node{Id: "x", Cluster: "staging"}, TypeUrl: resource.ClusterType})
		deadline := time.After(xdstest.QuietPeriod)
		for {
			select {
			case resp := <-s.Responses():
				if len(resp.GetResources()) > 0 {
					t.Fatalf("denied wildcard received %v", resp.GetResources())
				}
				continue
			case err := <-s.Errors():
				t.Fatalf("denied wildcard: stream ended: %v", err)
			case <-deadline:
			}
			break
		}
		waitRelayMetric(t, r, "denied wildcard counted", func(v float64) bool { return v >= 1 },
			"xds_relay_downstream_access_denied_total", "type", "envoy.config.cluster.v3.Cluster", "authority", dsAuthority)
	})
}

// TestAccessNodeIdentity: with downstream.node_identity, a client's node
// cluster must be the service account its certificate names, so it cannot
// join another cluster's aggregation group by claiming it.
func TestAccessNodeIdentity(t *testing.T) {
	p := newAccessPKI(t)
	o := newAccessOrigin(t)
	o.set(resource.ClusterType, accessCluster1, cluster(accessCluster1, 1))
	xds, _, metric := startAccessRelay(t, p, o, func(c *config.Config) {
		c.Downstream.NodeIdentity = "spiffe://fleet.example/ns/*/sa/{cluster}"
		c.Authorities[0].Allow, c.Authorities[0].AllowByType = nil, nil
	})

	own := newADSClient(t, p.dial(t, xds, p.prodApp), "delta", "n1", "app", nil)
	own.subscribe(resource.ClusterType, accessCluster1)
	own.waitHolds(resource.ClusterType, accessCluster1)

	s := openDelta(t, p.dial(t, xds, p.prodApp))
	s.Send(&discoveryv3.DeltaDiscoveryRequest{Node: &corev3.Node{Id: "n2", Cluster: "gateway"}, TypeUrl: resource.ClusterType, ResourceNamesSubscribe: []string{accessCluster1}})
	err := s.Err().Err()
	if grpcCode(err) != codes.PermissionDenied || !strings.Contains(err.Error(), `"gateway"`) {
		t.Fatalf("claiming another cluster: %v, want PermissionDenied naming the claimed cluster", err)
	}
	if got := metric("xds_relay_downstream_node_identity_denied_total"); got != 1 {
		t.Errorf("node_identity_denied_total = %v, want 1", got)
	}
}

// receiveOnly receives until c holds exactly want of typeURL; a response
// that carries one of hidden fails the test.
func receiveOnly(t *testing.T, c *adsClient, typeURL string, hidden []string, want ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), xdstest.WaitTimeout)
	defer cancel()
	want = slices.Sorted(slices.Values(want))
	for !slices.Equal(want, c.names(typeURL)) {
		got, ok := c.recvOne(ctx.Done())
		if !ok {
			t.Fatalf("%s holds %v of %s, want %v", c.name, c.names(typeURL), typeURL, want)
		}
		for _, r := range got.resources {
			if slices.Contains(hidden, r.GetName()) {
				t.Fatalf("%s received %s, which the rules of its own authority deny it", c.name, r.GetName())
			}
		}
	}
}

// fetchedNames are the names of a SotW response's resources, sorted.
func fetchedNames(t *testing.T, resp *discoveryv3.DiscoveryResponse) []string {
	t.Helper()
	out := []string{}
	for _, a := range resp.GetResources() {
		out = append(out, resourceName(t, a))
	}
	slices.Sort(out)
	return out
}

// The resources of TestAccessMembersOwnAuthority: a legacy name the rules
// give to the open authority, one they give to ds.example.
const openLegacy, restrictedLegacy = "open-legacy", "restricted-legacy"

// twoAuthorities edits an access relay's config (startAccessRelay) to
// serve a second, open authority (open.example) from ds.example's origin:
// legacy names starting "restricted-" go to ds.example, the rest, the
// wildcard included, to open.example. snapshot, when set, is
// cache.snapshot_path.
func twoAuthorities(t *testing.T, snapshot string) func(*config.Config) {
	return func(c *config.Config) {
		c.Authorities = append(c.Authorities, config.Authority{Name: "open.example", Origins: c.Authorities[0].Origins,
			Transport: xdstype.TransportDelta, GlobCollections: config.GlobEmulated})
		c.Aggregation.Rules = decodeAggRules(t, `
- name: restricted
  match: {resource_name: {prefix: "restricted-"}}
  result: {authority: ds.example, group: [{literal: r}]}
- name: open
  default: true
  result: {authority: open.example, group: [{literal: all}]}
`)
		c.Cache.SnapshotPath = snapshot
	}
}

// newMembersOrigin is an origin holding the clusters of
// TestAccessMembersOwnAuthority: both legacy names. (Not ds.example's xdstp
// clusters: the open authority's link would refuse an answer listing
// them, docs/protocol.md "Authorities kept apart".)
func newMembersOrigin(t *testing.T) *gcpOrigin {
	t.Helper()
	o := newAccessOrigin(t)
	for _, n := range []string{restrictedLegacy, openLegacy} {
		o.set(resource.ClusterType, n, cluster(n, 1))
	}
	return o
}

// TestAccessMembersOwnAuthority: two authorities behind one origin, one
// restricted (ds.example), one open (open.example, where the legacy
// wildcard goes). The origin's wildcard answer lists a legacy name the
// rules give to ds.example; a client ds.example denies subscribes to the
// open wildcard and does not receive it, over delta, SotW, unary Fetch and
// REST, at first and on later changes; an allowed client receives both.
func TestAccessMembersOwnAuthority(t *testing.T) {
	p, o := newAccessPKI(t), newMembersOrigin(t)
	relay, cfg := runAccessRelay(t, p, o, twoAuthorities(t, ""))
	xds, rest := relay.XDSAddr(), relay.RESTAddr()
	hidden := []string{restrictedLegacy}
	all := []string{openLegacy, restrictedLegacy} // sorted

	// The allowed client's wildcard lists both: the origin's answer does
	// carry what the denied client must not see.
	prod := newADSClient(t, p.dial(t, xds, p.prodApp), "delta", "prod", "prod", nil)
	prod.subscribe(resource.ClusterType)
	prod.waitHolds(resource.ClusterType, all...)

	for _, variant := range []string{"delta", "sotw"} {
		t.Run(variant, func(t *testing.T) {
			c := newADSClient(t, p.dial(t, xds, p.staging), variant, "staging-"+variant, "staging", nil)
			c.subscribe(resource.ClusterType)
			receiveOnly(t, c, resource.ClusterType, hidden, openLegacy)
			// Later changes: the denied member changes (looked up
			// alone), then the allowed one; only the allowed one arrives.
			v := prod.timeoutSeconds(openLegacy) + 1
			o.set(resource.ClusterType, restrictedLegacy, cluster(restrictedLegacy, v))
			prod.waitTimeout(restrictedLegacy, v)
			o.set(resource.ClusterType, openLegacy, cluster(openLegacy, v))
			prod.waitTimeout(openLegacy, v)
			ctx, cancel := context.WithTimeout(context.Background(), xdstest.WaitTimeout)
			defer cancel()
			for c.timeoutSeconds(openLegacy) != v {
				got, ok := c.recvOne(ctx.Done())
				if !ok {
					t.Fatalf("%s: no update of %s", c.name, openLegacy)
				}
				for _, r := range got.resources {
					if slices.Contains(hidden, r.GetName()) {
						t.Fatalf("%s received %s after a change", c.name, r.GetName())
					}
				}
			}
			if got := c.names(resource.ClusterType); !slices.Equal(got, []string{openLegacy}) {
				t.Errorf("%s holds %v, want only %s", c.name, got, openLegacy)
			}
		})
	}

	t.Run("unary Fetch", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), xdstest.WaitTimeout)
		defer cancel()
		req := &discoveryv3.DiscoveryRequest{Node: &corev3.Node{Id: "fetch", Cluster: "staging"}}
		resp, err := clusterservice.NewClusterDiscoveryServiceClient(p.dial(t, xds, p.staging)).FetchClusters(ctx, req)
		if err != nil || !slices.Equal(fetchedNames(t, resp), []string{openLegacy}) {
			t.Errorf("denied client's wildcard Fetch: %v, %v; want only %s", fetchedNames(t, resp), err, openLegacy)
		}
		resp, err = clusterservice.NewClusterDiscoveryServiceClient(p.dial(t, xds, p.prodApp)).FetchClusters(ctx, req)
		if err != nil || !slices.Equal(fetchedNames(t, resp), all) {
			t.Errorf("allowed client's wildcard Fetch: %v, %v; want %v", fetchedNames(t, resp), err, all)
		}
	})
	t.Run("REST", func(t *testing.T) {
		body := `{"node": {"id": "rest", "cluster": "staging"}}`
		for _, tc := range []struct {
			name string
			cert *tls.Certificate
			want []string
		}{
			{"denied", &p.staging, []string{openLegacy}},
			{"allowed", &p.prodApp, all},
		} {
			code, raw, err := p.restPoll(t, rest, "clusters", body, tc.cert)
			dr := &discoveryv3.DiscoveryResponse{}
			if err != nil || code != http.StatusOK || protojson.Unmarshal([]byte(raw), dr) != nil {
				t.Fatalf("%s REST poll: %d %s %v", tc.name, code, raw, err)
			}
			if got := fetchedNames(t, dr); !slices.Equal(got, tc.want) {
				t.Errorf("%s REST wildcard poll lists %v, want %v", tc.name, got, tc.want)
			}
		}
	})
	// A reload that closes ds.example to the prod app ends its stream,
	// which holds ds.example's members through the open wildcard; on
	// reconnecting it gets only what the new rules allow.
	t.Run("reload", func(t *testing.T) {
		next := *cfg
		next.Authorities = slices.Clone(cfg.Authorities)
		next.Authorities[0].Allow = []access.AllowEntry{{URISAN: spiffeProdGateway}}
		if err := relay.ReloadConfig(&next); err != nil {
			t.Fatal(err)
		}
		permissionDenied(t, "prod wildcard after the reload", prod.delta.Err().Err(), resource.ClusterType, "c1")
		again := newADSClient(t, p.dial(t, xds, p.prodApp), "sotw", "prod-again", "prod", nil)
		again.subscribe(resource.ClusterType)
		receiveOnly(t, again, resource.ClusterType, hidden, openLegacy)
	})
}

// TestAccessReloadEndsLongPolls: REST and Fetch long polls already waiting
// when a reload takes access away answer PermissionDenied (HTTP 403), never
// the next change; a poll the new rules still allow gets the change.
func TestAccessReloadEndsLongPolls(t *testing.T) {
	p := newAccessPKI(t)
	o := newAccessOrigin(t)
	o.set(resource.ClusterType, accessCluster1, cluster(accessCluster1, 1))
	relay, cfg := runAccessRelay(t, p, o, nil)
	xds, rest := relay.XDSAddr(), relay.RESTAddr()
	requests := func() float64 {
		return relayMetric(t, relay, "xds_relay_downstream_requests_total", "type", "envoy.config.cluster.v3.Cluster")
	}

	// A first poll of each learns the current version.
	body := func(version string) string {
		return `{"node": {"id": "rest"}, "version_info": "` + version + `", "resource_names": ["` + accessCluster1 + `"]}`
	}
	code, raw, err := p.restPoll(t, rest, "clusters", body(""), &p.dnsOnly)
	first := &discoveryv3.DiscoveryResponse{}
	if err != nil || code != http.StatusOK || protojson.Unmarshal([]byte(raw), first) != nil {
		t.Fatalf("first REST poll: %d %s %v", code, raw, err)
	}
	version := first.GetVersionInfo()
	fetchClient := clusterservice.NewClusterDiscoveryServiceClient(p.dial(t, xds, p.dnsOnly))
	fetchReq := &discoveryv3.DiscoveryRequest{Node: testNodeDS, ResourceNames: []string{accessCluster1}, VersionInfo: version}

	// Three long polls wait on a change: REST and Fetch as the DNS-SAN
	// client the reload will deny, REST as the prod app it keeps allowing.
	base := requests()
	type result struct {
		code int
		body string
		err  error
	}
	restDenied, restAllowed, fetched := make(chan result, 1), make(chan result, 1), make(chan result, 1)
	go func() {
		code, raw, err := p.restPoll(t, rest, "clusters", body(version), &p.dnsOnly)
		restDenied <- result{code, raw, err}
	}()
	go func() {
		code, raw, err := p.restPoll(t, rest, "clusters", body(version), &p.prodApp)
		restAllowed <- result{code, raw, err}
	}()
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), xdstest.WaitTimeout)
		defer cancel()
		resp, err := fetchClient.FetchClusters(ctx, fetchReq)
		fetched <- result{body: resp.String(), err: err}
	}()
	waitRelayMetric(t, relay, "three long polls arrived", func(v float64) bool { return v >= base+3 },
		"xds_relay_downstream_requests_total", "type", "envoy.config.cluster.v3.Cluster")

	next := *cfg
	next.Authorities = slices.Clone(cfg.Authorities)
	next.Authorities[0].Allow = []access.AllowEntry{{URISAN: "spiffe://fleet.example/ns/prod/*"}}
	if err := relay.ReloadConfig(&next); err != nil {
		t.Fatal(err)
	}
	o.set(resource.ClusterType, accessCluster1, cluster(accessCluster1, 2))

	r := <-restDenied
	if r.err != nil || r.code != http.StatusForbidden || strings.Contains(r.body, "c1") {
		t.Errorf("waiting REST poll the reload denies: %d %q %v; want 403 without the resource", r.code, r.body, r.err)
	}
	r = <-fetched
	permissionDenied(t, "waiting Fetch the reload denies", r.err, resource.ClusterType, "c1")
	r = <-restAllowed
	dr := &discoveryv3.DiscoveryResponse{}
	if r.err != nil || r.code != http.StatusOK || protojson.Unmarshal([]byte(r.body), dr) != nil || len(dr.GetResources()) != 1 || dr.GetVersionInfo() == version {
		t.Errorf("waiting REST poll the reload still allows: %d %q %v; want 200 with the change", r.code, r.body, r.err)
	}
}

// TestAccessMembersFromSnapshot: resources a restarted relay serves from
// its warm-restart snapshot, with the origin down, are checked like any
// other: the denied client's wildcard of the open authority gets none of
// ds.example's.
func TestAccessMembersFromSnapshot(t *testing.T) {
	p, o := newAccessPKI(t), newMembersOrigin(t)
	snapshot := filepath.Join(t.TempDir(), "relay.snap")
	all := []string{openLegacy, restrictedLegacy}

	a, _ := runAccessRelay(t, p, o, twoAuthorities(t, snapshot))
	before := newADSClient(t, p.dial(t, a.XDSAddr(), p.prodApp), "delta", "before", "prod", nil)
	before.subscribe(resource.ClusterType)
	before.waitHolds(resource.ClusterType, all...)
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	o.stop()

	b, _ := runAccessRelay(t, p, o, twoAuthorities(t, snapshot))
	if n := relayMetric(t, b, "xds_relay_cache_snapshot_loads_total", "result", "loaded"); n != 1 {
		t.Fatalf("snapshot_loads_total{result=loaded} = %v, want 1", n)
	}
	for _, variant := range []string{"delta", "sotw"} {
		c := newADSClient(t, p.dial(t, b.XDSAddr(), p.staging), variant, "staging-"+variant, "staging", nil)
		c.subscribe(resource.ClusterType)
		receiveOnly(t, c, resource.ClusterType, []string{restrictedLegacy}, openLegacy)
	}
	prod := newADSClient(t, p.dial(t, b.XDSAddr(), p.prodApp), "sotw", "prod-after", "prod", nil)
	prod.subscribe(resource.ClusterType)
	prod.waitHolds(resource.ClusterType, all...)
}
