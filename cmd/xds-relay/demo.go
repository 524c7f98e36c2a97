package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/template"
)

// demoAuthority is the authority config/demo/relay.yaml serves.
const demoAuthority = "demo.xds-relay.local"

// demoRESTListen is config/demo/relay.yaml's rest_listen.
const demoRESTListen = "127.0.0.1:18002"

// demoGuide tells the user how to point a client at the demo relay and
// which file to edit to see an update flow.
var demoGuide = template.Must(template.New("guide").Parse(`
xds-relay demo: authority {{.Authority}} served from the files in
  {{.Resources}}

  xDS (SotW and delta; ADS and per-type services):  {{.Listen}}
  admin:   http://{{.Admin}}/debug/   (clients: /debug/clients, metrics: /metrics)
  REST:    curl -s -XPOST http://{{.REST}}/v3/discovery:clusters \
             -d '{"resource_names":["xdstp://{{.Authority}}/envoy.config.cluster.v3.Cluster/demo"]}'

A grpc-go client (bootstrap written for you):
  GRPC_XDS_BOOTSTRAP={{.Bootstrap}} <your grpc-go program> xds:///demo
  It resolves Listener → RouteConfiguration → Cluster → ClusterLoadAssignment
  (endpoints 127.0.0.1:50051..50053 — start a backend there to make RPCs).

An Envoy (ADS) snippet for its bootstrap:
  dynamic_resources:
    ads_config: {api_type: GRPC, transport_api_version: V3,
                 grpc_services: [{envoy_grpc: {cluster_name: xds_relay}}]}
  static_resources:
    clusters: [{name: xds_relay, type: STATIC, typed_extension_protocol_options:
      {envoy.extensions.upstreams.http.v3.HttpProtocolOptions:
        {"@type": type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions,
         explicit_http_config: {http2_protocol_options: {}}}},
      load_assignment: {cluster_name: xds_relay, endpoints: [{lb_endpoints:
        [{endpoint: {address: {socket_address: {address: {{.ListenHost}}, port_value: {{.ListenPort}}}}}}]}]}}]

To see an update flow, edit (and save)
  {{.Endpoints}}
e.g. change a port_value: subscribed clients get the new ClusterLoadAssignment.

The relay's own config is {{.Config}}; after editing it:
  xds-relay reload --admin {{.Admin}}
`))

// printDemoGuide writes the grpc-go bootstrap into dir and the guide to w.
func printDemoGuide(w io.Writer, dir, listen, admin, rest string) error {
	server := fmt.Sprintf(`{"server_uri": %q, "channel_creds": [{"type": "insecure"}], "server_features": ["xds_v3"]}`, listen)
	bootstrap := fmt.Sprintf(`{
  "xds_servers": [%s],
  "node": {"id": "demo-client", "cluster": "demo"},
  "client_default_listener_resource_name_template": "xdstp://%s/envoy.config.listener.v3.Listener/%%s",
  "authorities": {%q: {"xds_servers": [%s]}}
}
`, server, demoAuthority, demoAuthority, server)
	bootstrapPath := filepath.Join(dir, "grpc-bootstrap.json")
	if err := os.WriteFile(bootstrapPath, []byte(bootstrap), 0o644); err != nil {
		return fmt.Errorf("demo: write grpc-go bootstrap: %w", err)
	}
	host, port := listen, ""
	if i := strings.LastIndexByte(listen, ':'); i >= 0 {
		host, port = listen[:i], listen[i+1:]
	}
	resources := filepath.Join(dir, "config", "demo", "resources")
	return demoGuide.Execute(w, map[string]string{
		"Authority":  demoAuthority,
		"Resources":  resources,
		"Endpoints":  filepath.Join(resources, "endpoints.yaml"),
		"Listen":     listen,
		"ListenHost": host,
		"ListenPort": port,
		"Admin":      admin,
		"REST":       rest,
		"Bootstrap":  bootstrapPath,
		"Config":     filepath.Join(dir, "config", "demo", "relay.yaml"),
	})
}
