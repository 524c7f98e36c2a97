package integration

import (
	"context"
	"crypto/tls"
	"path/filepath"
	"testing"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"

	"github.com/xds-relay/xds-relay/config"
	"github.com/xds-relay/xds-relay/internal/xdstest"
)

// TestDownstreamClientCARotation: the relay's listener requires client
// certificates of downstream.tls.ca_file. The file is replaced (by rename)
// with another CA while a client is connected: that client's stream is
// kept and keeps receiving updates; a new client with a certificate of the
// new CA is served, and a new one with a certificate of the old CA is
// refused, without a restart.
func TestDownstreamClientCARotation(t *testing.T) {
	serving, caA, caB := xdstest.NewCA(t, "serving-ca"), xdstest.NewCA(t, "clients-a"), xdstest.NewCA(t, "clients-b")
	dir := t.TempDir()
	certFile, keyFile, caFile := filepath.Join(dir, "relay.pem"), filepath.Join(dir, "relay-key.pem"), filepath.Join(dir, "clients.PEM")
	srv := serving.Server("relay")
	writeFileAtomic(t, certFile, srv.CertPEM)
	writeFileAtomic(t, keyFile, srv.KeyPEM)
	writeFileAtomic(t, caFile, caA.PEM)

	o := newGCPOrigin(t)
	c := dsCluster("mtls")
	o.set(resource.ClusterType, c, cluster(c, 1))
	r := startRelay(t, func(cfg *config.Config) {
		cfg.Log.Level = config.LogInfo
		cfg.Downstream.TLS = config.ServerTLS{CertFile: certFile, KeyFile: keyFile, CAFile: caFile}
	}, o.addr)
	client := func(cert xdstest.Leaf) grpc.DialOption {
		return grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: serving.Pool(), Certificates: []tls.Certificate{cert.TLS}}))
	}

	first := openDelta(t, dial(t, r.XDSAddr(), client(caA.Client("a-1"))))
	v := subscribeClusters(t, first, c)

	writeFileAtomic(t, caFile, caB.PEM)
	subscribeClusters(t, openDelta(t, dial(t, r.XDSAddr(), client(caB.Client("b-1")))), c)

	// The refusal ends the connection: the stream fails to open, to send
	// or on its first receive, never answered.
	ctx, cancel := context.WithTimeout(context.Background(), xdstest.WaitTimeout)
	defer cancel()
	ads := discoveryv3.NewAggregatedDiscoveryServiceClient(dial(t, r.XDSAddr(), client(caA.Client("a-2"))))
	st, err := ads.DeltaAggregatedResources(ctx)
	if err == nil {
		if err = st.Send(&discoveryv3.DeltaDiscoveryRequest{Node: testNodeDS, TypeUrl: resource.ClusterType, ResourceNamesSubscribe: []string{c}}); err == nil {
			var resp *discoveryv3.DeltaDiscoveryResponse
			if resp, err = st.Recv(); err == nil {
				t.Fatalf("client of the old CA served after the rotation: %v", resp)
			}
		}
	}
	// With TLS 1.3 the client learns of the refusal after its side of the
	// handshake: as the server's alert or as the connection closing.
	if ctx.Err() != nil || grpcCode(err) != codes.Unavailable {
		t.Errorf("client of the old CA: %v; want the connection refused (Unavailable)", err)
	}
	cancel()

	o.set(resource.ClusterType, c, cluster(c, 2))
	waitClusterTimeout(t, first, v, c, 2)
}
