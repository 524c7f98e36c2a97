package downstream

import (
	"context"
	"fmt"
	"testing"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/xds-relay/xds-relay/internal/xdstest"
)

// EndStream ends an idle stream, its handler waiting in Recv, with the
// status it is given (as the relay drains): the client gets that status,
// not the CANCELLED of a context ended under Recv, and the session ends.
func TestEndStream(t *testing.T) {
	ctxs := make(chan context.Context, 1)
	e := newEnv(t, 0, grpc.ChainStreamInterceptor(func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
		ctxs <- ss.Context()
		return h(srv, ss)
	}))
	name := xdstp(edsType, "e")
	r := e.put(edsType, name, "1")
	c := e.delta()
	c.Send(&discoveryv3.DeltaDiscoveryRequest{Node: testNode, TypeUrl: edsType, ResourceNamesSubscribe: []string{name}})
	checkDelta(t, deltaResp(edsType, nil, dres(name, r)), c.Recv())

	if !EndStream(<-ctxs, status.New(codes.Unavailable, "going away")) {
		t.Fatal("EndStream found no gRPC stream in its handler's context")
	}
	if st := c.Err(); st.Code() != codes.Unavailable || st.Message() != "going away" {
		t.Errorf("stream ended with %v, want Unavailable: going away", st)
	}
	xdstest.Poll(t, "session ended", func() error {
		if n := len(e.srv.listSessions()); n != 0 {
			return fmt.Errorf("%d sessions", n)
		}
		return nil
	})
	if EndStream(context.Background(), status.New(codes.Unavailable, "")) {
		t.Error("EndStream ended a stream from a context that has none")
	}
}
