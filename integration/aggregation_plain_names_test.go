package integration

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	corev1 "k8s.io/api/core/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/xds-relay/xds-relay/config"
	relayproc "github.com/xds-relay/xds-relay/internal/relay"
)

// Plain names, as most Envoy fleets and grpc-go without xdstp templates use
// them, served by the shipped configs as they are: the demo's and the
// Kubernetes ConfigMaps'. No aggregation rule is written in any of them.

// plainWant is what an Envoy-shaped client of one node cluster must hold.
type plainWant struct {
	listeners, clusters []string // its wildcard LDS and CDS
	route, cla          string   // then RDS and EDS by name
}

// envoyShaped runs a raw ADS client (variant delta or sotw) of node cluster
// as Envoy does: wildcard CDS, EDS by cluster name, wildcard LDS, RDS by
// route name; it must hold exactly what want lists.
func envoyShaped(t *testing.T, conn *grpc.ClientConn, variant, id, cluster string, want plainWant) {
	t.Helper()
	c := newADSClient(t, conn, variant, id, cluster, nil)
	c.subscribe(resource.ClusterType)
	c.waitHolds(resource.ClusterType, want.clusters...)
	c.subscribe(resource.EndpointType, want.cla)
	c.waitHolds(resource.EndpointType, want.cla)
	c.subscribe(resource.ListenerType)
	c.waitHolds(resource.ListenerType, want.listeners...)
	c.subscribe(resource.RouteType, want.route)
	c.waitHolds(resource.RouteType, want.route)
}

// grpcPlainBootstrap is a grpc-go xDS bootstrap with no xdstp template:
// xds:///<name> asks for the plain listener <name>.
func grpcPlainBootstrap(relayAddr, cluster string) []byte {
	return fmt.Appendf(nil, `{
  "xds_servers": [{"server_uri": %q, "channel_creds": [{"type": "insecure"}], "server_features": ["xds_v3"]}],
  "node": {"id": "grpc-plain-client", "cluster": %q}
}`, relayAddr, cluster)
}

// grpcPlainCheck is grpcXDSCheck with a plain-name bootstrap of node
// cluster.
func grpcPlainCheck(t *testing.T, relayAddr, cluster, target string) {
	t.Helper()
	grpcXDSCheck(t, grpcPlainBootstrap(relayAddr, cluster), target)
}

// onLoopback moves cfg's listeners to free loopback ports (REST off) and
// drops the drain delay, for a shipped config run by a test.
func onLoopback(cfg *config.Config) *config.Config {
	cfg.Listen, cfg.Admin, cfg.RESTListen = "127.0.0.1:0", "127.0.0.1:0", ""
	cfg.Downstream.DrainDelay = 0
	return cfg
}

// The demo, as `make run` serves it: an Envoy-shaped client (delta and
// SotW) gets the plain-name listeners, clusters, route and endpoints, and
// grpc-go resolves xds:///demo without xdstp templates and makes an RPC.
func TestPlainNamesDemo(t *testing.T) {
	backend := startBackend(t)
	dir := t.TempDir()
	cfg, err := config.Demo(dir)
	if err != nil {
		t.Fatal(err)
	}
	// The demo's plain endpoints point at 127.0.0.1:50051; this test's
	// backend is elsewhere.
	_, port, _ := strings.Cut(backend, ":")
	path := filepath.Join(dir, "config", "demo", "resources", "plain-endpoints.yaml")
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	edited := strings.Replace(string(raw), "port_value: 50051", "port_value: "+port, 1)
	if edited == string(raw) || !strings.Contains(string(raw), "address: 127.0.0.1") {
		t.Fatal("plain-endpoints.yaml no longer has 127.0.0.1, port_value: 50051")
	}
	if err := os.WriteFile(path, []byte(edited), 0o644); err != nil {
		t.Fatal(err)
	}
	r := runRelay(t, onLoopback(cfg))

	name := func(typ, id string) string { return xdstpName(demoAuthority, typ, id) }
	// A wildcard is the whole directory's type: plain and xdstp names.
	want := plainWant{
		listeners: []string{"demo", "demo-envoy", name("envoy.config.listener.v3.Listener", "demo")},
		clusters:  []string{"demo", name("envoy.config.cluster.v3.Cluster", "demo")},
		route:     "demo",
		cla:       "demo",
	}
	conn := dial(t, r.XDSAddr())
	envoyShaped(t, conn, "delta", "envoy-1", "demo", want)
	envoyShaped(t, conn, "sotw", "envoy-2", "demo", want)
	grpcPlainCheck(t, r.XDSAddr(), "demo", "xds:///demo")
}

// setChain sets what the origin answers nodes of one cluster: ch's four
// resources.
func (o *gcpOrigin) setChain(cluster, version string, ch *chain) {
	o.t.Helper()
	o.setSnapshotOf(cluster, version, map[resource.Type][]types.Resource{
		resource.ListenerType: {ch.listener},
		resource.RouteType:    {ch.route},
		resource.ClusterType:  {ch.cluster},
		resource.EndpointType: {ch.cla},
	})
}

// configMapConfig decodes the relay config in the ConfigMap named name of
// a manifest file under deploy/kubernetes (documents of other kinds are
// skipped) and points every authority at origin.
func configMapConfig(t *testing.T, file, name, origin string) *config.Config {
	t.Helper()
	path := filepath.Join("..", "deploy", "kubernetes", file)
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dec := utilyaml.NewYAMLOrJSONDecoder(f, 4096)
	for {
		var cm corev1.ConfigMap
		err := dec.Decode(&cm)
		if errors.Is(err, io.EOF) {
			t.Fatalf("%s: no ConfigMap %s", path, name)
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if cm.Kind != "ConfigMap" || cm.Name != name {
			continue
		}
		cfg, err := config.Parse([]byte(cm.Data["config.yaml"]), path)
		if err != nil {
			t.Fatal(err)
		}
		for i := range cfg.Authorities {
			cfg.Authorities[i].Origins = []string{origin}
		}
		return cfg
	}
}

// The Kubernetes ConfigMaps' configs, unchanged but for their origin:
// Envoy-shaped clients of two node clusters and a grpc-go client each get
// their own cluster's plain-name resources from an origin that answers by
// node cluster, which sees one stream per cluster. Through one tier
// (deploy/kubernetes) and two (two-tier/: edge → central → origin).
func TestPlainNamesKubernetes(t *testing.T) {
	for _, tc := range []struct {
		name      string
		start     func(t *testing.T, origin string) *relayproc.Relay
		originIDs string // the node id the origin is shown
	}{
		{"one tier", func(t *testing.T, origin string) *relayproc.Relay {
			return runRelay(t, onLoopback(configMapConfig(t, "configmap.yaml", "xds-relay", origin)))
		}, "xds-relay"},
		{"two tiers", func(t *testing.T, origin string) *relayproc.Relay {
			central := runRelay(t, onLoopback(configMapConfig(t, "two-tier/central.yaml", "xds-relay-central", origin)))
			return runRelay(t, onLoopback(configMapConfig(t, "two-tier/edge.yaml", "xds-relay-edge", central.XDSAddr())))
		}, "xds-relay-central"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			origin := newClusterSnapshotOrigin(t)
			chains := map[string]*chain{}
			for _, c := range []string{"web", "api", "grpc"} {
				ch, err := newPlainChain(c+"-svc", startBackend(t))
				if err != nil {
					t.Fatal(err)
				}
				chains[c] = ch
				origin.setChain(c, "v1", ch)
			}
			r := tc.start(t, origin.addr)

			conn := dial(t, r.XDSAddr())
			for i, c := range []string{"web", "api"} {
				ch := chains[c]
				want := plainWant{listeners: []string{ch.listenerName}, clusters: []string{ch.clusterName}, route: ch.routeName, cla: ch.claName}
				envoyShaped(t, conn, "delta", fmt.Sprintf("envoy-%d", 2*i), c, want)
				envoyShaped(t, conn, "sotw", fmt.Sprintf("envoy-%d", 2*i+1), c, want)
			}
			grpcPlainCheck(t, r.XDSAddr(), "grpc", "xds:///grpc-svc")

			origin.waitStreams([]string{tc.originIDs + "/api", tc.originIDs + "/grpc", tc.originIDs + "/web"})
		})
	}
}

// plain_names is reloadable: with two authorities and none marked, a plain
// name is refused; once a reload marks one, new requests are served from it
// (its upstream untouched: only the rule set changes).
func TestPlainNamesReload(t *testing.T) {
	origin := newClusterSnapshotOrigin(t)
	ch, err := newPlainChain("web-svc", "127.0.0.1:1")
	if err != nil {
		t.Fatal(err)
	}
	origin.setChain("web", "v1", ch)
	cfg := func(mark string) string {
		return fmt.Sprintf(`listen: 127.0.0.1:0
admin: 127.0.0.1:0
downstream: {drain_delay: 0s}
authorities:
  - {name: a.example, origins: [%q]}
  - {name: b.example, origins: [%q]%s}
`, origin.addr, origin.addr, mark)
	}
	path := filepath.Join(t.TempDir(), "relay.yaml")
	writeFileAtomic(t, path, []byte(cfg("")))
	r, _ := fileRelay(t, path)
	conn := dial(t, r.XDSAddr())

	refused := newADSClient(t, conn, "delta", "envoy-1", "web", nil)
	refused.subscribe(resource.ClusterType)
	if st := refused.delta.Err(); st.Code() != codes.FailedPrecondition {
		t.Fatalf("plain name with no authority marked: status %v, want FailedPrecondition", st)
	}

	replaceFile(t, path, cfg(", plain_names: true"))
	postReload(t, r)
	served := newADSClient(t, conn, "delta", "envoy-2", "web", nil)
	served.subscribe(resource.ClusterType)
	served.waitHolds(resource.ClusterType, ch.clusterName)
}
