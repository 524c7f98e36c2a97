package main

import (
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"text/template"
)

// demoAuthority is the authority config/demo/relay.yaml serves.
const demoAuthority = "demo.xds-relay.local"

// demoRESTListen is config/demo/relay.yaml's rest_listen.
const demoRESTListen = "127.0.0.1:18002"

// Files the demo writes next to its resources, for clients to use as is.
const (
	demoGRPCBootstrap      = "grpc-bootstrap.json"       // grpc-go, xdstp names
	demoGRPCPlainBootstrap = "grpc-bootstrap-plain.json" // grpc-go, plain names
	demoEnvoyBootstrap     = "envoy-bootstrap.json"      // Envoy, plain names
)

// demoGuide tells the user how to point a client at the demo relay and
// which file to edit to see an update flow.
var demoGuide = template.Must(template.New("guide").Parse(`
xds-relay demo: authority {{.Authority}} served from the files in
  {{.Resources}}
both as xdstp names (xdstp://{{.Authority}}/...) and as plain names
(listeners demo and demo-envoy, route demo, cluster demo, endpoints demo).

  xDS (SotW and delta; ADS and per-type services):  {{.Listen}}
  admin:   http://{{.Admin}}/debug/   (clients: /debug/clients, metrics: /metrics)
  REST:    curl -s -XPOST http://{{.REST}}/v3/discovery:clusters \
             -d '{"resource_names":["xdstp://{{.Authority}}/envoy.config.cluster.v3.Cluster/demo"]}'

A grpc-go client (bootstrap written for you):
  GRPC_XDS_BOOTSTRAP={{.Bootstrap}} <your grpc-go program> xds:///demo
  It resolves Listener → RouteConfiguration → Cluster → ClusterLoadAssignment
  (endpoints 127.0.0.1:50051..50053 — start a backend there to make RPCs).
  With plain names instead of xdstp:  GRPC_XDS_BOOTSTRAP={{.PlainBootstrap}}

An Envoy (ADS; wildcard LDS and CDS, then RDS and EDS by name; bootstrap
written for you; it serves HTTP on 127.0.0.1:10000, routed to 127.0.0.1:50051):
  envoy -c {{.EnvoyBootstrap}}

To see an update flow, change a port_value in one of these and save:
  {{.Endpoints}}
      the glob collection demo/* (xdstp names: loadgen --glob, grpc-go)
  {{.PlainEndpoints}}
      the endpoints of plain name demo (loadgen --names demo, Envoy)
Subscribed clients get the new ClusterLoadAssignment; a load generator's
progress line counts it ("newest backend-a v2: 100/100 clients").

The relay's own config is {{.Config}}; after editing it:
  xds-relay reload --admin {{.Admin}}
`))

// printDemoGuide writes the client bootstraps into dir and the guide to w.
func printDemoGuide(w io.Writer, dir, listen, admin, rest string) error {
	files := map[string][]byte{
		demoGRPCBootstrap:      grpcDemoBootstrap(listen, true),
		demoGRPCPlainBootstrap: grpcDemoBootstrap(listen, false),
	}
	envoy, err := envoyDemoBootstrap(listen)
	if err != nil {
		return err
	}
	files[demoEnvoyBootstrap] = envoy
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			return fmt.Errorf("demo: write %s: %w", name, err)
		}
	}
	resources := filepath.Join(dir, "config", "demo", "resources")
	return demoGuide.Execute(w, map[string]string{
		"Authority":      demoAuthority,
		"Resources":      resources,
		"Endpoints":      filepath.Join(resources, "endpoints.yaml"),
		"PlainEndpoints": filepath.Join(resources, "plain-endpoints.yaml"),
		"Listen":         listen,
		"Admin":          admin,
		"REST":           rest,
		"Bootstrap":      filepath.Join(dir, demoGRPCBootstrap),
		"PlainBootstrap": filepath.Join(dir, demoGRPCPlainBootstrap),
		"EnvoyBootstrap": filepath.Join(dir, demoEnvoyBootstrap),
		"Config":         filepath.Join(dir, "config", "demo", "relay.yaml"),
	})
}

// grpcDemoBootstrap is a grpc-go xDS bootstrap for the relay at listen.
// With xdstp, xds:///demo resolves the demo authority's xdstp listener;
// without, the plain-name listener "demo".
func grpcDemoBootstrap(listen string, xdstp bool) []byte {
	server := fmt.Sprintf(`{"server_uri": %q, "channel_creds": [{"type": "insecure"}], "server_features": ["xds_v3"]}`, listen)
	if !xdstp {
		return fmt.Appendf(nil, `{
  "xds_servers": [%s],
  "node": {"id": "demo-client", "cluster": "demo"}
}
`, server)
	}
	return fmt.Appendf(nil, `{
  "xds_servers": [%s],
  "node": {"id": "demo-client", "cluster": "demo"},
  "client_default_listener_resource_name_template": "xdstp://%s/envoy.config.listener.v3.Listener/%%s",
  "authorities": {%q: {"xds_servers": [%s]}}
}
`, server, demoAuthority, demoAuthority, server)
}

// envoyDemoBootstrap is a complete Envoy bootstrap (JSON, which Envoy reads
// as its YAML) for the relay at listen: node, a static HTTP/2 cluster to the
// relay, ADS with LDS and CDS over it, and an admin on 127.0.0.1:9901.
func envoyDemoBootstrap(listen string) ([]byte, error) {
	host, portStr, err := net.SplitHostPort(listen)
	if err != nil {
		return nil, fmt.Errorf("demo: listen %q: %w", listen, err)
	}
	port, err := strconv.ParseUint(portStr, 10, 16)
	if err != nil {
		return nil, fmt.Errorf("demo: listen %q: port: %w", listen, err)
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1" // listening on every interface: connect locally
	}
	return fmt.Appendf(nil, `{
  "node": {"id": "demo-envoy", "cluster": "demo"},
  "dynamic_resources": {
    "ads_config": {
      "api_type": "GRPC",
      "transport_api_version": "V3",
      "grpc_services": [{"envoy_grpc": {"cluster_name": "xds_relay"}}]
    },
    "lds_config": {"ads": {}, "resource_api_version": "V3"},
    "cds_config": {"ads": {}, "resource_api_version": "V3"}
  },
  "static_resources": {
    "clusters": [{
      "name": "xds_relay",
      "type": "STATIC",
      "connect_timeout": "1s",
      "typed_extension_protocol_options": {
        "envoy.extensions.upstreams.http.v3.HttpProtocolOptions": {
          "@type": "type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions",
          "explicit_http_config": {"http2_protocol_options": {}}
        }
      },
      "load_assignment": {
        "cluster_name": "xds_relay",
        "endpoints": [{"lb_endpoints": [{"endpoint": {"address": {"socket_address": {"address": %q, "port_value": %d}}}}]}]
      }
    }]
  },
  "admin": {"address": {"socket_address": {"address": "127.0.0.1", "port_value": 9901}}}
}
`, host, port), nil
}

// demoFlags are the demo's flags for its listeners, by config key.
var demoFlags = map[string]string{"listen": "--listen", "admin": "--admin", "rest_listen": "--rest-listen"}

// demoHint: the demo's listeners move by its flags.
func demoHint(key string) string {
	if f, ok := demoFlags[key]; ok {
		return fmt.Sprintf("give the demo another address: xds-relay demo %s 127.0.0.1:PORT", f)
	}
	return "set " + key + " to a free address"
}
