package integration

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	statusv3 "github.com/envoyproxy/go-control-plane/envoy/service/status/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/xds-relay/xds-relay/config"
	relayproc "github.com/xds-relay/xds-relay/internal/relay"
	"github.com/xds-relay/xds-relay/internal/xdstest"
)

// csdsStreamsBound is csds_max_streams_per_caller at its default.
const csdsStreamsBound = config.DefaultCSDSMaxStreamsPerCaller

// openCSDSStream opens a StreamClientStatus stream on conn, ended at
// cleanup.
func openCSDSStream(t *testing.T, conn *grpc.ClientConn) statusv3.ClientStatusDiscoveryService_StreamClientStatusClient {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	st, err := statusv3.NewClientStatusDiscoveryServiceClient(conn).StreamClientStatus(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// csdsAsk sends a request on st and returns its answer.
func csdsAsk(t *testing.T, st statusv3.ClientStatusDiscoveryService_StreamClientStatusClient) (*statusv3.ClientStatusResponse, error) {
	t.Helper()
	if err := st.Send(&statusv3.ClientStatusRequest{}); err != nil && !errors.Is(err, io.EOF) {
		t.Fatal(err)
	}
	return st.Recv()
}

// TestCSDSStreamsPerCaller: one caller (an IP address here; a client
// certificate's SAN with mutual TLS) holds at most
// csds_max_streams_per_caller client status streams: one more is refused
// with ResourceExhausted and counted, while another caller (another
// address) is served, and a stream that ends gives its place back.
// Before, nothing bounded a caller's streams: 100 that read nothing pinned
// 621 MiB of reports.
func TestCSDSStreamsPerCaller(t *testing.T) {
	o := newGCPOrigin(t)
	r := startRelay(t, func(c *config.Config) { c.CSDSListen = "127.0.0.1:0" }, o.addr)
	conn := dial(t, r.CSDSAddr())
	var open []statusv3.ClientStatusDiscoveryService_StreamClientStatusClient
	for i := range csdsStreamsBound {
		st := openCSDSStream(t, conn)
		if _, err := csdsAsk(t, st); err != nil {
			t.Fatalf("stream %d of %d: %v", i+1, csdsStreamsBound, err)
		}
		open = append(open, st)
	}
	_, err := csdsAsk(t, openCSDSStream(t, conn))
	if status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "csds_max_streams_per_caller") {
		t.Errorf("stream %d of one caller: %v, want ResourceExhausted naming csds_max_streams_per_caller", csdsStreamsBound+1, err)
	}
	if n := relayMetric(t, r, "xds_relay_csds_streams_refused_total"); n != 1 {
		t.Errorf("streams_refused_total = %v, want 1", n)
	}

	// Another caller: a connection from 127.0.0.2 (loopback on Linux).
	other := dial(t, r.CSDSAddr(), grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}
		return d.DialContext(ctx, "tcp", addr)
	}))
	if _, err := csdsAsk(t, openCSDSStream(t, other)); err != nil {
		t.Errorf("another caller's stream: %v, want served", err)
	}

	// A stream that ends gives its place back.
	if err := open[0].CloseSend(); err != nil {
		t.Fatal(err)
	}
	if _, err := open[0].Recv(); !errors.Is(err, io.EOF) {
		t.Fatalf("stream after CloseSend: %v, want its end", err)
	}
	xdstest.Poll(t, "a place given back", func() error {
		_, err := csdsAsk(t, openCSDSStream(t, conn))
		return err
	})
}

// csdsSlowRequests is how many requests TestCSDSSlowReader sends on each
// stream without reading.
const csdsSlowRequests = 50

// TestCSDSSlowReader: a caller opens its streams, sends many requests on
// each and reads nothing. The relay builds a report only once the previous
// answer's Send returned, from the newest request, and a request arriving
// meanwhile replaces the one waiting: reports built
// (xds_relay_csds_requests_total{method="stream"}) stay at most two per
// stream, whatever the number of requests, and once the caller reads it
// gets at most one more answer per stream. Before, every request was
// queued and answered: 50 reports per stream.
func TestCSDSSlowReader(t *testing.T) {
	o := newGCPOrigin(t)
	r := startRelay(t, func(c *config.Config) { c.CSDSListen = "127.0.0.1:0" }, o.addr)
	csdsLargeReport(t, r)
	// Fixed HTTP/2 windows (64 KiB, no BDP growth): the caller's side
	// takes no more than it reads, so the relay's Send blocks as soon as
	// gRPC's own per-stream buffer is full (one report of ~300 KB).
	conn := dial(t, r.CSDSAddr(), grpc.WithInitialWindowSize(64<<10), grpc.WithInitialConnWindowSize(64<<10))
	var streams []statusv3.ClientStatusDiscoveryService_StreamClientStatusClient
	for range csdsStreamsBound {
		st := openCSDSStream(t, conn)
		for range csdsSlowRequests {
			if err := st.Send(&statusv3.ClientStatusRequest{}); err != nil {
				t.Fatal(err)
			}
		}
		streams = append(streams, st)
	}
	// Every request read: replaced, answered (at most two per stream: one
	// taken by gRPC, one waiting in Send), or the newest, waiting.
	built := func() float64 { return relayMetric(t, r, "xds_relay_csds_requests_total", "method", "stream") }
	waitRelayMetric(t, r, "the requests read and replaced", func(v float64) bool {
		return v+built() >= float64(csdsStreamsBound*(csdsSlowRequests-1))
	}, "xds_relay_csds_requests_replaced_total")
	if n := built(); n > 2*csdsStreamsBound {
		t.Errorf("reports built while nothing was read = %v, want at most %d (two per stream) for %d requests", n, 2*csdsStreamsBound, csdsStreamsBound*csdsSlowRequests)
	}

	// The caller reads at last: each stream's answers so far, then the
	// one to its newest request, then its end.
	for i, st := range streams {
		if err := st.CloseSend(); err != nil {
			t.Fatal(err)
		}
		answers := 0
		for {
			_, err := st.Recv()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("stream %d: %v", i, err)
			}
			answers++
		}
		if answers < 1 || answers > 3 {
			t.Errorf("stream %d: %d answers to %d requests, want 1 to 3 (the newest answered, the rest replaced)", i, answers, csdsSlowRequests)
		}
	}
	if n := built(); n > 3*csdsStreamsBound {
		t.Errorf("reports built = %v, want at most %d", n, 3*csdsStreamsBound)
	}
}

// csdsLargeReport connects a delta client subscribing 200 names of 1.5 KB
// (the origin has none: each is a REQUESTED entry), so that a client
// status report is about 300 KB, more than gRPC buffers per stream.
func csdsLargeReport(t *testing.T, r *relayproc.Relay) {
	t.Helper()
	names := make([]string, 200)
	for i := range names {
		names[i] = dsCluster(fmt.Sprintf("%04d-%s", i, strings.Repeat("x", 1500)))
	}
	d := openDelta(t, dial(t, r.XDSAddr()))
	d.Send(&discoveryv3.DeltaDiscoveryRequest{Node: testNodeDS, TypeUrl: resource.ClusterType, ResourceNamesSubscribe: names})
	c := statusv3.NewClientStatusDiscoveryServiceClient(dial(t, r.CSDSAddr()))
	waitCSDS(t, c, "the large report", &statusv3.ClientStatusRequest{}, func(resp *statusv3.ClientStatusResponse) string {
		if n := len(resp.GetConfig()); n != 1 || len(resp.GetConfig()[0].GetGenericXdsConfigs()) != len(names) {
			return fmt.Sprintf("%d clients, want 1 with %d entries", n, len(names))
		}
		return ""
	})
}
