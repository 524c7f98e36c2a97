package integration

import (
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/xds-relay/xds-relay/config"
	relayadmin "github.com/xds-relay/xds-relay/internal/admin"
	relayproc "github.com/xds-relay/xds-relay/internal/relay"
	"github.com/xds-relay/xds-relay/internal/upstream"
	"github.com/xds-relay/xds-relay/internal/xdstest"
	"github.com/xds-relay/xds-relay/internal/xdstype"
)

// originGate is what a TLS origin checks and records of each stream the
// relay opens: the client certificate it presented and its authorization
// header, and whether the stream was let in. Its serverOpts are the
// origin's gRPC server options at each start: the serving certificate and
// client CA of the moment, and an interceptor checking the token.
type originGate struct {
	mu       sync.Mutex
	cert     *tls.Certificate // guarded by mu; serving certificate
	clientCA *xdstest.CA      // guarded by mu; nil: no client certificate asked
	token    string           // guarded by mu; "": any or none accepted
	seen     []gateSeen       // guarded by mu
	poke     chan struct{}    // 1 slot: a stream was seen
}

type gateSeen struct {
	clientCN string // "" without a client certificate
	auth     string // the authorization header
	refused  bool
}

func newOriginGate(cert xdstest.Leaf, clientCA *xdstest.CA) *originGate {
	return &originGate{cert: &cert.TLS, clientCA: clientCA, poke: make(chan struct{}, 1)}
}

// set changes what the next start of the origin serves with.
func (g *originGate) set(cert xdstest.Leaf, clientCA *xdstest.CA) {
	g.mu.Lock()
	g.cert, g.clientCA = &cert.TLS, clientCA
	g.mu.Unlock()
}

func (g *originGate) expectToken(tok string) {
	g.mu.Lock()
	g.token = tok
	g.mu.Unlock()
}

func (g *originGate) serverOpts() []grpc.ServerOption {
	g.mu.Lock()
	tc := &tls.Config{Certificates: []tls.Certificate{*g.cert}, MinVersion: tls.VersionTLS12}
	if g.clientCA != nil {
		tc.ClientCAs, tc.ClientAuth = g.clientCA.Pool(), tls.RequireAndVerifyClientCert
	}
	g.mu.Unlock()
	return []grpc.ServerOption{grpc.Creds(credentials.NewTLS(tc)), grpc.StreamInterceptor(g.intercept)}
}

func (g *originGate) intercept(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	var s gateSeen
	if md, ok := metadata.FromIncomingContext(ss.Context()); ok && len(md.Get("authorization")) > 0 {
		s.auth = md.Get("authorization")[0]
	}
	if p, ok := peer.FromContext(ss.Context()); ok {
		if ti, ok := p.AuthInfo.(credentials.TLSInfo); ok && len(ti.State.PeerCertificates) > 0 {
			s.clientCN = ti.State.PeerCertificates[0].Subject.CommonName
		}
	}
	g.mu.Lock()
	s.refused = g.token != "" && s.auth != "Bearer "+g.token
	g.seen = append(g.seen, s)
	g.mu.Unlock()
	select {
	case g.poke <- struct{}{}:
	default:
	}
	if s.refused {
		return status.Error(codes.Unauthenticated, "origin: bearer token not accepted")
	}
	return handler(srv, ss)
}

// waitSeen waits until a stream the gate saw satisfies cond.
func (g *originGate) waitSeen(t *testing.T, what string, cond func(gateSeen) bool) {
	t.Helper()
	xdstest.Await(t, "origin gate: a stream "+what, g.poke, func() error {
		g.mu.Lock()
		defer g.mu.Unlock()
		for _, s := range g.seen {
			if cond(s) {
				return nil
			}
		}
		return fmt.Errorf("saw %+v", g.seen)
	})
}

// tlsFiles are the relay's TLS files in a test's directory.
type tlsFiles struct {
	dir, ca, cert, key string
}

func newTLSFiles(t *testing.T, ca *xdstest.CA, client xdstest.Leaf) tlsFiles {
	t.Helper()
	dir := t.TempDir()
	f := tlsFiles{dir: dir, ca: filepath.Join(dir, "ca.PEM"), cert: filepath.Join(dir, "relay.pem"), key: filepath.Join(dir, "relay-key.pem")}
	f.rotate(t, ca, client)
	return f
}

// rotate replaces the CA file and the client pair, each by rename.
func (f tlsFiles) rotate(t *testing.T, ca *xdstest.CA, client xdstest.Leaf) {
	t.Helper()
	writeFileAtomic(t, f.ca, ca.PEM)
	writeFileAtomic(t, f.cert, client.CertPEM)
	writeFileAtomic(t, f.key, client.KeyPEM)
}

// mtls is the relay's client TLS from f.
func (f tlsFiles) mtls() *config.ClientTLS {
	return &config.ClientTLS{Enabled: true, CAFile: f.ca, CertFile: f.cert, KeyFile: f.key}
}

// upstreamLink waits until /debug/upstreams shows a link of authority
// satisfying cond, and returns it.
func upstreamLink(t *testing.T, r *relayproc.Relay, authority string, cond func(upstream.LinkStatus) bool) upstream.LinkStatus {
	t.Helper()
	var found upstream.LinkStatus
	xdstest.Poll(t, "/debug/upstreams: a link of "+authority+" as expected", func() error { // a page to re-read: no event to wait on
		resp, err := http.Get("http://" + r.AdminAddr() + relayadmin.UpstreamsPath)
		if err != nil {
			t.Fatal(err)
		}
		var links []upstream.LinkStatus
		err = json.NewDecoder(resp.Body).Decode(&links)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range links {
			if l.Authority == authority && cond(l) {
				found = l
				return nil
			}
		}
		return fmt.Errorf("links %+v", links)
	})
	return found
}

// clusterTimeout is the connect timeout, in seconds, of cluster name in v
// (cluster(name, n) bodies tell versions apart).
func clusterTimeout(t *testing.T, v deltaView, name string) int64 {
	t.Helper()
	x, ok := v[name]
	if !ok {
		return -1
	}
	var c clusterv3.Cluster
	if err := x.GetResource().UnmarshalTo(&c); err != nil {
		t.Fatal(err)
	}
	return c.GetConnectTimeout().GetSeconds()
}

// waitClusterTimeout receives on s until name's connect timeout is want;
// the stream ending fails the test.
func waitClusterTimeout(t *testing.T, s *deltaADS, v deltaView, name string, want int64) {
	t.Helper()
	recvDelta(t, s, v, func() bool { return clusterTimeout(t, v, name) == want })
}

const nocaAuthority = "noca.example"

// TestUpstreamTLSPerAuthority: a go-control-plane origin serves over
// mutual TLS only. An authority whose own tls block has the CA and a
// client certificate reaches it and serves a client; another authority
// of the same relay, to the same address, with a client certificate but
// without the CA, fails verification with a clear last_error in
// /debug/upstreams and serves nothing, so the two never share a
// connection. upstream.tls stays plaintext.
func TestUpstreamTLSPerAuthority(t *testing.T) {
	ca := xdstest.NewCA(t, "test-ca")
	gate := newOriginGate(ca.Server("origin"), ca)
	o := newGCPOriginWith(t, gate.serverOpts)
	c := dsCluster("tls")
	other := "xdstp://" + nocaAuthority + "/envoy.config.cluster.v3.Cluster/tls"
	o.set(resource.ClusterType, c, cluster(c, 1))
	o.set(resource.ClusterType, other, cluster(other, 1))
	files := newTLSFiles(t, ca, ca.Client("relay"))

	r := startRelay(t, func(cfg *config.Config) {
		cfg.Log.Level = config.LogInfo
		cfg.Authorities[0].TLS = files.mtls()
		cfg.Authorities = append(cfg.Authorities, config.Authority{Name: nocaAuthority, Origins: []string{o.addr},
			Transport: xdstype.TransportDelta, GlobCollections: config.GlobEmulated,
			TLS: &config.ClientTLS{Enabled: true, CertFile: files.cert, KeyFile: files.key}})
	}, o.addr)
	conn := dial(t, r.XDSAddr())

	d := openDelta(t, conn)
	v := subscribeClusters(t, d, c)
	if got := clusterTimeout(t, v, c); got != 1 {
		t.Errorf("client holds %s with timeout %d, want 1", c, got)
	}
	gate.waitSeen(t, "with the relay's client certificate", func(s gateSeen) bool { return s.clientCN == "relay" })

	noca := openDelta(t, conn)
	noca.Send(&discoveryv3.DeltaDiscoveryRequest{Node: testNodeDS, TypeUrl: resource.ClusterType, ResourceNamesSubscribe: []string{other}})
	l := upstreamLink(t, r, nocaAuthority, func(l upstream.LinkStatus) bool { return l.LastError != "" })
	if !strings.Contains(l.LastError, "certificate signed by unknown authority") || l.State == "open" {
		t.Errorf("link without the CA: %+v; want a last_error saying the origin's certificate is signed by an unknown authority", l)
	}
	// The client is told, once, that no origin answers (resource_errors),
	// and gets nothing more.
	if errs := noca.Recv().GetResourceErrors(); len(errs) != 1 || errs[0].GetResourceName().GetName() != other ||
		codes.Code(errs[0].GetErrorDetail().GetCode()) != codes.Unavailable {
		t.Errorf("client of the link without the CA: resource_errors %v, want UNAVAILABLE for %s", errs, other)
	}
	noca.None()
	if l := upstreamLink(t, r, dsAuthority, func(upstream.LinkStatus) bool { return true }); l.State != "open" {
		t.Errorf("link with the CA: %+v, want open", l)
	}
}

// TestUpstreamTLSRotation: while a client's stream is open, the relay's CA
// file and client certificate pair are replaced (by rename) with ones of a
// new CA. The open upstream connection and the client's stream are kept
// and the client keeps receiving updates. Then the origin restarts with a
// certificate of the new CA, accepting only client certificates of the new
// CA: the relay's next connection verifies it with the new CA file and
// presents the new client certificate, and the client, never dropped, gets
// the origin's next change.
func TestUpstreamTLSRotation(t *testing.T) {
	ca1, ca2 := xdstest.NewCA(t, "ca-1"), xdstest.NewCA(t, "ca-2")
	gate := newOriginGate(ca1.Server("origin-1"), ca1)
	o := newGCPOriginWith(t, gate.serverOpts)
	c := dsCluster("rotated")
	o.set(resource.ClusterType, c, cluster(c, 1))
	files := newTLSFiles(t, ca1, ca1.Client("relay-1"))
	r := startRelay(t, func(cfg *config.Config) {
		cfg.Log.Level = config.LogInfo
		cfg.Authorities[0].TLS = files.mtls()
	}, o.addr)
	d := openDelta(t, dial(t, r.XDSAddr()))
	v := subscribeClusters(t, d, c)
	gate.waitSeen(t, "from relay-1", func(s gateSeen) bool { return s.clientCN == "relay-1" })

	files.rotate(t, ca2, ca2.Client("relay-2"))
	o.set(resource.ClusterType, c, cluster(c, 2))
	waitClusterTimeout(t, d, v, c, 2)
	o.mu.Lock()
	opens := o.deltaOpens
	o.mu.Unlock()
	if opens != 1 {
		t.Errorf("origin saw %d delta streams after the rotation, want the first one kept", opens)
	}

	gate.set(ca2.Server("origin-2"), ca2)
	o.stop()
	o.restart()
	gate.waitSeen(t, "from relay-2 (the rotated client certificate)", func(s gateSeen) bool { return s.clientCN == "relay-2" })
	o.set(resource.ClusterType, c, cluster(c, 3))
	waitClusterTimeout(t, d, v, c, 3)
	if l := upstreamLink(t, r, dsAuthority, func(l upstream.LinkStatus) bool { return l.State == "open" }); l.Origin != o.addr {
		t.Errorf("link after the restart: %+v", l)
	}
}

// TestUpstreamBearerToken: an origin over TLS lets in only streams whose
// authorization header carries the token it expects. The relay reads its
// token from the authority's bearer_token_file; after the file is replaced,
// the next stream (the origin restarted) carries the new token and the
// client, never dropped, is served again. A wrong token is refused with
// Unauthenticated, which /debug/upstreams shows, without the token.
func TestUpstreamBearerToken(t *testing.T) {
	ca := xdstest.NewCA(t, "ca")
	gate := newOriginGate(ca.Server("origin"), nil)
	gate.expectToken("token-1")
	o := newGCPOriginWith(t, gate.serverOpts)
	c := dsCluster("token")
	o.set(resource.ClusterType, c, cluster(c, 1))
	dir := t.TempDir()
	caFile, tokFile := filepath.Join(dir, "ca.PEM"), filepath.Join(dir, "token")
	writeFileAtomic(t, caFile, ca.PEM)
	writeFileAtomic(t, tokFile, []byte("token-1\n"))
	r := startRelay(t, func(cfg *config.Config) {
		cfg.Log.Level = config.LogInfo
		cfg.Upstream.TLS = config.ClientTLS{Enabled: true, CAFile: caFile}
		cfg.Authorities[0].BearerTokenFile = tokFile
	}, o.addr)
	d := openDelta(t, dial(t, r.XDSAddr()))
	v := subscribeClusters(t, d, c)
	gate.waitSeen(t, "with token-1", func(s gateSeen) bool { return s.auth == "Bearer token-1" && !s.refused })

	writeFileAtomic(t, tokFile, []byte("token-2"))
	gate.expectToken("token-2")
	o.stop()
	o.restart()
	gate.waitSeen(t, "with token-2", func(s gateSeen) bool { return s.auth == "Bearer token-2" && !s.refused })
	o.set(resource.ClusterType, c, cluster(c, 2))
	waitClusterTimeout(t, d, v, c, 2)

	writeFileAtomic(t, tokFile, []byte("wrong-token"))
	o.stop()
	o.restart()
	gate.waitSeen(t, "refused for the wrong token", func(s gateSeen) bool { return s.auth == "Bearer wrong-token" && s.refused })
	l := upstreamLink(t, r, dsAuthority, func(l upstream.LinkStatus) bool { return strings.Contains(l.LastError, "Unauthenticated") })
	if !strings.Contains(l.LastError, "bearer token not accepted") || strings.Contains(l.LastError, "wrong-token") {
		t.Errorf("/debug/upstreams last_error %q: want the origin's refusal, never the token", l.LastError)
	}
	o.set(resource.ClusterType, c, cluster(c, 3))
	d.None() // refused: nothing new reaches the client (it keeps what it has)
}

// TestUpstreamBearerTokenPlaintextAllowed: with
// upstream.allow_plaintext_bearer_token a plaintext origin gets the token.
func TestUpstreamBearerTokenPlaintextAllowed(t *testing.T) {
	gate := &originGate{poke: make(chan struct{}, 1)}
	gate.expectToken("plain")
	o := newGCPOriginWith(t, func() []grpc.ServerOption { return []grpc.ServerOption{grpc.StreamInterceptor(gate.intercept)} })
	c := dsCluster("plain")
	o.set(resource.ClusterType, c, cluster(c, 1))
	tokFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokFile, []byte("plain"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := startRelay(t, func(cfg *config.Config) {
		cfg.Log.Level = config.LogInfo
		cfg.Upstream.BearerTokenFile = tokFile
		cfg.Upstream.AllowPlaintextBearerToken = true
	}, o.addr)
	subscribeClusters(t, openDelta(t, dial(t, r.XDSAddr())), c)
	gate.waitSeen(t, "with the token", func(s gateSeen) bool { return s.auth == "Bearer plain" && !s.refused })
}
