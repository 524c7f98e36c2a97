package integration

import (
	"context"
	"fmt"
	"net"
	"testing"

	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/xds"

	"github.com/xds-relay/xds-relay/internal/xdstest"
)

// startBackend serves the gRPC health service on loopback.
func startBackend(t *testing.T) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	healthpb.RegisterHealthServer(gs, health.NewServer())
	done := make(chan struct{})
	go func() { defer close(done); _ = gs.Serve(lis) }()
	t.Cleanup(func() { gs.Stop(); <-done })
	return lis.Addr().String()
}

// grpcBootstrap is a grpc-go xDS bootstrap whose authority dsAuthority is
// served by the relay at relayAddr, with an xdstp listener template.
func grpcBootstrap(relayAddr, authority string) []byte {
	return grpcBootstrapAs(relayAddr, authority, "grpc-xds-client")
}

// grpcBootstrapAs is grpcBootstrap for a client of node id (each resolver
// built from a bootstrap has an xDS client of its own).
func grpcBootstrapAs(relayAddr, authority, id string) []byte {
	server := fmt.Sprintf(`{"server_uri": %q, "channel_creds": [{"type": "insecure"}], "server_features": ["xds_v3"]}`, relayAddr)
	return fmt.Appendf(nil, `{
  "xds_servers": [%s],
  "node": {"id": %q, "cluster": "grpc-clients"},
  "client_default_listener_resource_name_template": "xdstp://%s/envoy.config.listener.v3.Listener/%%s",
  "authorities": {%q: {"xds_servers": [%s]}}
}`, server, id, authority, authority, server)
}

// A real grpc-go xDS client resolves xds:///backend through the relay
// (LDS → RDS → CDS → EDS under xdstp names, from a go-control-plane origin)
// and makes a successful RPC to the backend.
func TestDownstreamGRPCXDSClient(t *testing.T) {
	o, _ := newChainOrigin(t)
	r := startRelay(t, nil, o.addr)
	grpcXDSCheck(t, grpcBootstrap(r.XDSAddr(), dsAuthority), "xds:///backend")
}

// newChainOrigin starts a backend serving the gRPC health service and a
// go-control-plane origin serving the xdstp chain that leads grpc-go's
// xds:///backend to it (newChain).
func newChainOrigin(t *testing.T) (*gcpOrigin, *chain) {
	t.Helper()
	backend := startBackend(t)
	o := newGCPOrigin(t)
	ch, err := newChain(dsAuthority, "backend", backend)
	if err != nil {
		t.Fatal(err)
	}
	o.set(resource.ListenerType, ch.listenerName, ch.listener)
	o.set(resource.RouteType, ch.routeName, ch.route)
	o.set(resource.ClusterType, ch.clusterName, ch.cluster)
	o.set(resource.EndpointType, ch.claName, ch.cla)
	return o, ch
}

// grpcXDSCheck resolves target with grpc-go's xDS resolver under bootstrap
// and makes a health RPC to the backend it resolves to, which must answer
// SERVING; the client is closed when the test ends (grpcXDSConn).
func grpcXDSCheck(t *testing.T, bootstrap []byte, target string) { grpcXDSConn(t, bootstrap, target) }

// grpcXDSConn is grpcXDSCheck returning the client's connection: it (and
// its xDS client's watches) stays open until the test ends.
func grpcXDSConn(t *testing.T, bootstrap []byte, target string) *grpc.ClientConn {
	t.Helper()
	builder, err := xds.NewXDSResolverWithConfigForTesting(bootstrap)
	if err != nil {
		t.Fatal(err)
	}
	cc, err := grpc.NewClient(target, grpc.WithResolvers(builder), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), xdstest.WaitTimeout)
	defer cancel()
	resp, err := healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{}, grpc.WaitForReady(true))
	if err != nil {
		t.Fatalf("health Check through %s: %v", target, err)
	}
	if resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health status %v, want SERVING", resp.GetStatus())
	}
	return cc
}
