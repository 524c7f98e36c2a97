package xdstype

// The resource types, and the extensions resources commonly nest, are
// registered in protoregistry.GlobalTypes by importing their packages. The
// relay never decodes a resource to serve it, but three places need the
// registry: upstream validates what an origin sends (a type it does not
// know is not validated), a file source parses protojson with "@type", and
// REST-JSON polling renders Anys as JSON. They all import this package, so
// all three know the same set of types.
import (
	_ "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/service/runtime/v3"
)
