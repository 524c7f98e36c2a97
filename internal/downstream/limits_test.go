package downstream

import (
	"context"
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	endpointv3s "github.com/envoyproxy/go-control-plane/envoy/service/endpoint/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
	rpcstatus "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/xds-relay/xds-relay/internal/xdstest"
)

// TestLimits: a client going past a limit gets a status that names the
// limit, is counted, and nobody else notices; a stream that ends gives its
// place back.
func TestLimits(t *testing.T) {
	e := newEnv(t, 0)
	if err := e.srv.SetLimits(Limits{MaxStreams: 3, MaxNamesPerStream: 3, MaxNameLength: 200, MaxTypesPerStream: 2, MaxVersionLength: 16,
		MaxGroupsPerAuthority: 1, MaxNewGroupsPerStream: 1}); err != nil {
		t.Fatal(err)
	}
	goodName := xdstp(edsType, "good")
	r := e.put(edsType, goodName, "1")
	good := e.delta()
	good.Send(&discoveryv3.DeltaDiscoveryRequest{Node: testNode, TypeUrl: edsType, ResourceNamesSubscribe: []string{goodName}})
	checkDelta(t, deltaResp(edsType, nil, dres(goodName, r)), good.Recv())
	rev := 1
	goodStillServed := func(t *testing.T) {
		t.Helper()
		rev++
		r := e.put(edsType, goodName, string(rune('0'+rev)))
		got := good.Recv()
		checkDelta(t, deltaResp(edsType, nil, dres(goodName, r)), got)
		good.Send(ack(edsType, got))
	}
	names := func(n int) []string {
		var out []string
		for i := range n {
			out = append(out, xdstp(edsType, "n"+string(rune('a'+i))))
		}
		return out
	}
	counted := func(limit string) float64 {
		return testutil.ToFloat64(e.srv.m.limitRejections.WithLabelValues(limit))
	}
	for _, tc := range []struct {
		name string
		run  func(t *testing.T) interface {
			Code() codes.Code
			Message() string
		}
		code     codes.Code
		contains string
		limit    string
	}{
		{
			name: "name too long", limit: limitNameLength, code: codes.InvalidArgument, contains: "max_name_length",
			run: func(t *testing.T) interface {
				Code() codes.Code
				Message() string
			} {
				c := e.delta()
				c.Send(&discoveryv3.DeltaDiscoveryRequest{Node: testNode, TypeUrl: edsType, ResourceNamesSubscribe: []string{xdstp(edsType, strings.Repeat("x", 300))}})
				return c.Err()
			},
		},
		{
			name: "delta names over two requests", limit: limitNames, code: codes.ResourceExhausted, contains: "max_names_per_stream",
			run: func(t *testing.T) interface {
				Code() codes.Code
				Message() string
			} {
				c := e.delta()
				c.Send(&discoveryv3.DeltaDiscoveryRequest{Node: testNode, TypeUrl: edsType, ResourceNamesSubscribe: names(2)})
				c.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: edsType, ResourceNamesSubscribe: names(4)[2:]})
				return c.Err()
			},
		},
		{
			name: "sotw list", limit: limitNames, code: codes.ResourceExhausted, contains: "max_names_per_stream",
			run: func(t *testing.T) interface {
				Code() codes.Code
				Message() string
			} {
				c := e.sotw()
				c.Send(&discoveryv3.DiscoveryRequest{Node: testNode, TypeUrl: edsType, ResourceNames: names(4)})
				return c.Err()
			},
		},
		{
			name: "types on one ADS stream", limit: limitTypes, code: codes.ResourceExhausted, contains: "max_types_per_stream",
			run: func(t *testing.T) interface {
				Code() codes.Code
				Message() string
			} {
				c := e.delta()
				for _, typ := range []string{edsType, ldsType, resourcev3.ClusterType} {
					c.Send(&discoveryv3.DeltaDiscoveryRequest{Node: testNode, TypeUrl: typ, ResourceNamesSubscribe: []string{"legacy-x"}})
				}
				return c.Err()
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := counted(tc.limit)
			got := tc.run(t)
			if got.Code() != tc.code || !strings.Contains(got.Message(), tc.contains) {
				t.Fatalf("status = %v %q, want %v naming %s", got.Code(), got.Message(), tc.code, tc.contains)
			}
			if n := counted(tc.limit) - before; n != 1 {
				t.Errorf("limit_rejections_total{limit=%q} grew by %v, want 1", tc.limit, n)
			}
			goodStillServed(t)
		})
	}

	t.Run("streams", func(t *testing.T) {
		// The good client holds one place; two more fill the limit of 3.
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		ads := discoveryv3.NewAggregatedDiscoveryServiceClient(e.conn)
		var held []context.CancelFunc
		for range 2 {
			sctx, scancel := context.WithCancel(ctx)
			held = append(held, scancel)
			st, err := ads.DeltaAggregatedResources(sctx)
			if err != nil {
				t.Fatal(err)
			}
			if err := st.Send(&discoveryv3.DeltaDiscoveryRequest{Node: testNode, TypeUrl: edsType, ResourceNamesSubscribe: []string{goodName}}); err != nil {
				t.Fatal(err)
			}
			if _, err := st.Recv(); err != nil {
				t.Fatal(err)
			}
		}
		// try opens one more stream and returns how it ended (nil: served).
		// The server may refuse it before reading: Send can then see EOF,
		// and the status comes from Recv.
		try := func() error {
			st, err := ads.DeltaAggregatedResources(ctx)
			if err != nil {
				return err
			}
			_ = st.Send(&discoveryv3.DeltaDiscoveryRequest{Node: testNode, TypeUrl: edsType, ResourceNamesSubscribe: []string{goodName}})
			_, err = st.Recv()
			return err
		}
		before := counted(limitStreams)
		if st := status.Convert(try()); st.Code() != codes.ResourceExhausted || !strings.Contains(st.Message(), "max_streams") {
			t.Fatalf("stream over the limit: %v %q, want ResourceExhausted naming max_streams", st.Code(), st.Message())
		}
		if n := counted(limitStreams) - before; n != 1 {
			t.Errorf("limit_rejections_total{limit=streams} grew by %v, want 1", n)
		}
		goodStillServed(t)
		// A stream that ends gives its place back (once its handler has
		// returned: until then a new one may still be refused).
		held[0]()
		xdstest.Poll(t, "a stream admitted after one ended", func() error {
			err := try()
			if err != nil && !strings.Contains(err.Error(), "max_streams") {
				t.Fatalf("after a stream ended: %v", err)
			}
			return err
		})
	})
}

// TestClientTextInLogsIsBounded: a NACK with a 1 MiB error_detail, and a
// node id and a nonce as long as the limits let through, make log lines of
// a few KiB, not megabytes.
func TestClientTextInLogsIsBounded(t *testing.T) {
	core, logs := observer.New(zap.DebugLevel)
	e := newEnv(t, 0)
	e.srv.lg = zap.New(core) // before any stream: read-only from here
	n := xdstp(edsType, "n")
	e.put(edsType, n, "1")
	huge := strings.Repeat("x", 1<<20)
	c := e.delta()
	long := strings.Repeat("n", testLimits.MaxNameLength)
	c.Send(&discoveryv3.DeltaDiscoveryRequest{Node: &corev3.Node{Id: long, Cluster: long}, TypeUrl: edsType, ResourceNamesSubscribe: []string{n}})
	got := c.Recv()
	c.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: edsType, ResponseNonce: got.GetNonce(), ErrorDetail: &rpcstatus.Status{Code: 3, Message: huge}})
	c.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: edsType, ResponseNonce: strings.Repeat("v", testLimits.MaxVersionLength),
		ErrorDetail: &rpcstatus.Status{Code: 3, Message: huge}})
	e.syncDelta(c)
	nacks := 0
	for _, entry := range logs.All() {
		size := len(entry.Message)
		for _, f := range entry.Context {
			size += len(f.Key) + len(f.String)
		}
		if size > 4096 {
			t.Errorf("log line %q carries %d bytes of fields", entry.Message, size)
		}
		if entry.Message == "client rejected a response" {
			nacks++
		}
	}
	if nacks != 2 {
		t.Errorf("%d NACK warnings logged, want 2", nacks)
	}
	for _, ci := range e.srv.Clients() {
		if l := len(ci.Subscriptions[edsType].LastNack); l > 4096 {
			t.Errorf("/debug/clients shows a last NACK of %d bytes", l)
		}
	}
}

// TestFetchTakesAStreamPlace: a unary Fetch holds one of max_streams'
// places while it is served, as REST polls do: with the only place taken
// by a stream, a Fetch is refused naming the limit (before, it was served
// uncounted).
func TestFetchTakesAStreamPlace(t *testing.T) {
	e := newEnv(t, 0)
	lim := testLimits
	lim.MaxStreams = 1
	if err := e.srv.SetLimits(lim); err != nil {
		t.Fatal(err)
	}
	n := xdstp(edsType, "fetched")
	e.put(edsType, n, "1")
	s := e.delta()
	s.Send(&discoveryv3.DeltaDiscoveryRequest{Node: testNode, TypeUrl: edsType, ResourceNamesSubscribe: []string{n}})
	s.Recv()
	c := endpointv3s.NewEndpointDiscoveryServiceClient(e.conn)
	_, err := c.FetchEndpoints(context.Background(), &discoveryv3.DiscoveryRequest{Node: testNode, ResourceNames: []string{n}})
	if st := status.Convert(err); st.Code() != codes.ResourceExhausted || !strings.Contains(st.Message(), "max_streams") {
		t.Fatalf("Fetch beside a stream holding the only place: %v, want ResourceExhausted naming max_streams", err)
	}
}
