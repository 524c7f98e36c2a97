package downstream

import (
	"context"
	"encoding/binary"
	"testing"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/xds-relay/xds-relay/internal/cache"
	"github.com/xds-relay/xds-relay/internal/xdstest"
)

// A client that does not read is cut off with ResourceExhausted once a
// Send has waited sendTimeout; a concurrent client is not delayed.
func TestSlowClientDisconnected(t *testing.T) {
	const sendTimeout = 100 * time.Millisecond
	e := newEnv(t, sendTimeout)
	cut := make(chan struct{})
	e.srv.slowHook = func() { close(cut) }

	big := xdstp(edsType, "big")
	// bigBody is a new revision of the big resource: new bytes.
	bigBody := func(v int) *anypb.Any {
		b := make([]byte, 4<<20-1024)
		binary.BigEndian.PutUint64(b, uint64(v))
		return &anypb.Any{TypeUrl: edsType, Value: b}
	}
	e.cache.set(key(edsType, big), &cache.Resource{Name: big, Body: bigBody(1)})
	small := xdstp(edsType, "small")
	r := e.put(edsType, small, "1")

	// The slow client: smallest flow-control windows, and it never reads.
	conn, err := grpc.NewClient(e.conn.Target(), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithInitialWindowSize(64<<10), grpc.WithInitialConnWindowSize(64<<10))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	slow, err := discoveryv3.NewAggregatedDiscoveryServiceClient(conn).DeltaAggregatedResources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := slow.Send(&discoveryv3.DeltaDiscoveryRequest{Node: testNode, TypeUrl: edsType, ResourceNamesSubscribe: []string{big}}); err != nil {
		t.Fatal(err)
	}

	fast := e.delta()
	fast.Send(&discoveryv3.DeltaDiscoveryRequest{Node: testNode, TypeUrl: edsType, ResourceNamesSubscribe: []string{small}})
	checkDelta(t, deltaResp(edsType, nil, dres(small, r)), fast.Recv())
	// One response is queued whatever its size; the next one waits for
	// flow control that the slow client never grants. The session
	// coalesces (newest state wins), so a single new version may reach the
	// writer before the first was built and yield one send only: publish
	// new versions until the cut-off happens.
	deadline := time.NewTimer(xdstest.WaitTimeout)
	defer deadline.Stop()
	for v := 2; ; v++ {
		e.cache.set(key(edsType, big), &cache.Resource{Name: big, Body: bigBody(v)})
		select {
		case <-cut:
		case <-time.After(sendTimeout): // not a wait for the outcome: the next stimulus
			continue
		case <-deadline.C:
			t.Fatalf("slow client not cut off within %v", xdstest.WaitTimeout)
		}
		break
	}
	r2 := e.put(edsType, small, "2")
	checkDelta(t, deltaResp(edsType, nil, dres(small, r2)), fast.Recv())

	// Draining the slow stream now ends in ResourceExhausted.
	if err := xdstest.Drain(t, slow.Recv); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("slow client ended with %v, want ResourceExhausted", err)
	}
	if got := testutil.ToFloat64(e.srv.m.slowDisconnects); got != 1 {
		t.Errorf("slow_disconnects_total = %v, want 1", got)
	}
}
