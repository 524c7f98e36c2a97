package downstream

import (
	"bytes"
	"context"
	"strings"
	"testing"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	listenerv3s "github.com/envoyproxy/go-control-plane/envoy/service/listener/v3"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/xds-relay/xds-relay/internal/xdstest"
)

// Bad requests end only their own stream, with a clear status; another
// client keeps getting updates.
func TestBadRequestsEndOnlyTheirStream(t *testing.T) {
	e := newEnv(t, 0)
	goodName := xdstp(edsType, "good")
	r := e.put(edsType, goodName, "1")
	good := e.delta()
	good.Send(&discoveryv3.DeltaDiscoveryRequest{Node: testNode, TypeUrl: edsType, ResourceNamesSubscribe: []string{goodName}})
	checkDelta(t, deltaResp(edsType, nil, dres(goodName, r)), good.Recv())

	lds := listenerv3s.NewListenerDiscoveryServiceClient(e.conn)
	tests := []struct {
		name     string
		sotw     *discoveryv3.DiscoveryRequest
		delta    *discoveryv3.DeltaDiscoveryRequest
		perType  bool // SotW on the Listener service instead of ADS
		code     codes.Code
		contains string
	}{
		{name: "duplicate names sotw", sotw: &discoveryv3.DiscoveryRequest{TypeUrl: edsType, ResourceNames: []string{"a", "a"}},
			code: codes.InvalidArgument, contains: `"a" twice`},
		{name: "duplicate names delta", delta: &discoveryv3.DeltaDiscoveryRequest{TypeUrl: edsType, ResourceNamesSubscribe: []string{"a", "a"}},
			code: codes.InvalidArgument, contains: `"a" twice`},
		{name: "empty type_url on ADS", sotw: &discoveryv3.DiscoveryRequest{ResourceNames: []string{"a"}},
			code: codes.InvalidArgument, contains: "type_url"},
		{name: "empty type_url on delta ADS", delta: &discoveryv3.DeltaDiscoveryRequest{ResourceNamesSubscribe: []string{"a"}},
			code: codes.InvalidArgument, contains: "type_url"},
		{name: "type the stream is not for", perType: true, sotw: &discoveryv3.DiscoveryRequest{TypeUrl: edsType},
			code: codes.InvalidArgument, contains: "not the stream's type"},
		{name: "malformed xdstp name", sotw: &discoveryv3.DiscoveryRequest{TypeUrl: edsType, ResourceNames: []string{"xdstp://a.example/"}},
			code: codes.InvalidArgument, contains: "malformed"},
		{name: "xdstp name of another type", delta: &discoveryv3.DeltaDiscoveryRequest{TypeUrl: edsType, ResourceNamesSubscribe: []string{xdstp(ldsType, "l")}},
			code: codes.InvalidArgument, contains: "envoy.config.listener.v3.Listener"},
		{name: "invented type URL ending in the name's type", delta: &discoveryv3.DeltaDiscoveryRequest{TypeUrl: "x/" + edsType[len("type.googleapis.com/"):], ResourceNamesSubscribe: []string{goodName}},
			code: codes.InvalidArgument, contains: `requested as "x/envoy.config.endpoint.v3.ClusterLoadAssignment"`},
		{name: "huge malformed name is quoted short", delta: &discoveryv3.DeltaDiscoveryRequest{TypeUrl: edsType, ResourceNamesSubscribe: []string{xdstp(ldsType, strings.Repeat("l", 64<<10))}},
			code: codes.InvalidArgument, contains: "…"},
		{name: "legacy name no rule matches", sotw: &discoveryv3.DiscoveryRequest{TypeUrl: edsType, ResourceNames: []string{"nomatch-1"}},
			code: codes.FailedPrecondition, contains: `node id "node-1" cluster "c1"`},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got interface {
				Code() codes.Code
				Message() string
			}
			switch {
			case tc.delta != nil:
				c := e.delta()
				tc.delta.Node = testNode
				c.Send(tc.delta)
				got = c.Err()
			case tc.perType:
				c := startStream(t, func(ctx context.Context) (grpc.BidiStreamingClient[discoveryv3.DiscoveryRequest, discoveryv3.DiscoveryResponse], error) {
					return lds.StreamListeners(ctx)
				})
				tc.sotw.Node = testNode
				c.Send(tc.sotw)
				got = c.Err()
			default:
				c := e.sotw()
				tc.sotw.Node = testNode
				c.Send(tc.sotw)
				got = c.Err()
			}
			if got.Code() != tc.code || !strings.Contains(got.Message(), tc.contains) {
				t.Fatalf("status = %v %q, want %v containing %q", got.Code(), got.Message(), tc.code, tc.contains)
			}
			if n := len(got.Message()); n > 2048 {
				t.Errorf("status message is %d bytes: a client's input must be quoted short", n)
			}
			r := e.put(edsType, goodName, string(rune('2'+i)))
			checkDelta(t, deltaResp(edsType, nil, dres(goodName, r)), good.Recv())
		})
	}
}

// An xdstp name whose authority has no configuration: a delta client gets
// it in removed_resources, and both a NOT_FOUND resource error saying why
// (TestResourceErrorTypeNotCarriedSotW: once); both are counted and both
// streams carry on.
func TestUnknownAuthority(t *testing.T) {
	e := newEnv(t, 0)
	unknown := "xdstp://nowhere.example/envoy.config.endpoint.v3.ClusterLoadAssignment/x"
	known := xdstp(edsType, "k")
	rk := e.put(edsType, known, "1")

	d := e.delta()
	d.Send(&discoveryv3.DeltaDiscoveryRequest{Node: testNode, TypeUrl: edsType, ResourceNamesSubscribe: []string{unknown, known}})
	checkDelta(t, deltaWithErrors(edsType, []string{unknown}, []*discoveryv3.ResourceError{resourceError(unknown, unknownAuthority)}, dres(known, rk)), d.Recv())

	s := e.sotw()
	s.Send(&discoveryv3.DiscoveryRequest{Node: testNode, TypeUrl: edsType, ResourceNames: []string{unknown, known}})
	want := sotwResp(edsType, "1", rk.Body)
	want.ResourceErrors = []*discoveryv3.ResourceError{resourceError(unknown, unknownAuthority)}
	checkSotW(t, want, s.Recv())

	if got := testutil.ToFloat64(e.srv.m.requestErrors.WithLabelValues(typeLabel(edsType), "unknown_authority")); got != 2 {
		t.Errorf("unknown_authority errors = %v, want 2", got)
	}
	rk2 := e.put(edsType, known, "2")
	checkDelta(t, deltaResp(edsType, nil, dres(known, rk2)), d.Recv())
	checkSotW(t, sotwResp(edsType, "2", rk2.Body), s.Recv())
}

// TestTypesCarried: a name whose authority does not carry its type (its
// configured list, or by default the served types) is answered as not
// existing (delta: removed_resources, with a NOT_FOUND saying why),
// counted, never subscribed; the stream and other names carry on.
func TestTypesCarried(t *testing.T) {
	e := newEnv(t, 0)
	e.srv.currentResolver().(*NameResolver).CarryTypes(map[string][]string{authority: {edsType, ldsType}}) // before any stream
	eds := xdstp(edsType, "e")
	r := e.put(edsType, eds, "1")
	cds := xdstp(cdsType, "c")
	const madeUp = "type.googleapis.com/made.up.Type"
	invented := "xdstp://" + authority + "/made.up.Type/x"

	d := e.delta()
	d.Send(&discoveryv3.DeltaDiscoveryRequest{Node: testNode, TypeUrl: edsType, ResourceNamesSubscribe: []string{eds}})
	checkDelta(t, deltaResp(edsType, nil, dres(eds, r)), d.Recv())
	d.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: cdsType, ResourceNamesSubscribe: []string{cds}})
	checkDelta(t, deltaWithErrors(cdsType, []string{cds}, []*discoveryv3.ResourceError{resourceError(cds, typeNotCarried)}), d.Recv())
	d.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: madeUp, ResourceNamesSubscribe: []string{invented}})
	checkDelta(t, deltaWithErrors(madeUp, []string{invented}, []*discoveryv3.ResourceError{resourceError(invented, typeNotCarried)}), d.Recv())
	if got := testutil.ToFloat64(e.srv.m.requestErrors.WithLabelValues(typeLabel(cdsType), "type_not_carried")); got != 1 {
		t.Errorf("type_not_carried for CDS = %v, want 1", got)
	}
	if got := testutil.ToFloat64(e.srv.m.requestErrors.WithLabelValues("other", "type_not_carried")); got != 1 {
		t.Errorf("type_not_carried for the invented type = %v, want 1", got)
	}
	r2 := e.put(edsType, eds, "2")
	checkDelta(t, deltaResp(edsType, nil, dres(eds, r2)), d.Recv())
}

// A request that is not a discovery request ends its stream with the
// status gRPC's own Recv gives (Internal, "failed to unmarshal"), after
// a request decoded fine on the same stream (the handler decodes what it
// waited for in Recv itself: codec.go, laterRequest).
func TestUndecodableRequest(t *testing.T) {
	e := newEnv(t, 0)
	name := xdstp(edsType, "u")
	r := e.put(edsType, name, "1")
	for _, method := range []string{"DeltaAggregatedResources", "StreamAggregatedResources"} {
		t.Run(method, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), xdstest.WaitTimeout)
			defer cancel()
			st, err := e.conn.NewStream(ctx, &grpc.StreamDesc{ClientStreams: true, ServerStreams: true},
				"/envoy.service.discovery.v3.AggregatedDiscoveryService/"+method, grpc.ForceCodecV2(rawCodec{}))
			if err != nil {
				t.Fatal(err)
			}
			var req proto.Message = &discoveryv3.DeltaDiscoveryRequest{Node: testNode, TypeUrl: edsType, ResourceNamesSubscribe: []string{name}}
			if method == "StreamAggregatedResources" {
				req = &discoveryv3.DiscoveryRequest{Node: testNode, TypeUrl: edsType, ResourceNames: []string{name}}
			}
			good, err := proto.Marshal(req)
			if err != nil {
				t.Fatal(err)
			}
			var resp []byte
			if err := st.SendMsg(&good); err != nil {
				t.Fatal(err)
			}
			if err := st.RecvMsg(&resp); err != nil {
				t.Fatalf("the good request not answered: %v", err)
			}
			if !bytes.Contains(resp, r.Body.GetValue()) {
				t.Fatalf("answer does not carry %s", name)
			}
			bad := []byte{0xff} // field 31, wire type 7: no such wire type
			if err := st.SendMsg(&bad); err != nil {
				t.Fatal(err)
			}
			err = st.RecvMsg(&resp)
			if s := status.Convert(err); s.Code() != codes.Internal || !strings.Contains(s.Message(), "failed to unmarshal") {
				t.Fatalf("after an undecodable request: %v, want Internal, failed to unmarshal", err)
			}
		})
	}
}

// rawCodec sends and receives messages as their bytes (*[]byte).
type rawCodec struct{}

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	return mem.BufferSlice{mem.SliceBuffer(*v.(*[]byte))}, nil
}

func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	*v.(*[]byte) = data.Materialize()
	return nil
}

func (rawCodec) Name() string { return "proto" }
