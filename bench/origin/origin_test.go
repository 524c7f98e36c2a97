package main

import (
	"context"
	"testing"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"

	"github.com/xds-relay/xds-relay/internal/loadgen"
)

func TestBuildCLA(t *testing.T) {
	pushed := time.Unix(1700000000, 42)
	tests := []struct {
		name      string
		size      int
		pushed    time.Time
		wantStamp bool
	}{
		{name: "initial 1 KiB", size: 1024},
		{name: "pushed 1 KiB", size: 1024, pushed: pushed, wantStamp: true},
		{name: "pushed 8 KiB", size: 8192, pushed: pushed, wantStamp: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b, err := proto.Marshal(buildCLA("xdstp://a/t/n", tc.size, 3, tc.pushed))
			if err != nil {
				t.Fatal(err)
			}
			if len(b) < tc.size || len(b) > tc.size+256 {
				t.Errorf("size %d, want about %d", len(b), tc.size)
			}
			got, ok := loadgen.ParseStamp(b)
			if ok != tc.wantStamp || (ok && !got.Equal(tc.pushed)) {
				t.Errorf("ParseStamp = %v, %v; want %v, %v", got, ok, tc.pushed, tc.wantStamp)
			}
		})
	}
}

func TestRecorderCountsStreamsAndSubscriptions(t *testing.T) {
	r := newRecorder()
	cb := r.callbacks()
	ctx := context.Background()
	_ = cb.OnStreamOpen(ctx, 1, "")
	_ = cb.OnStreamRequest(1, &discoveryv3.DiscoveryRequest{ResourceNames: []string{"a", "b"}})
	_ = cb.OnStreamRequest(1, &discoveryv3.DiscoveryRequest{ResourceNames: []string{"a", "b", "c"}})
	_ = cb.OnDeltaStreamOpen(ctx, 2, "")
	_ = cb.OnStreamDeltaRequest(2, &discoveryv3.DeltaDiscoveryRequest{ResourceNamesSubscribe: []string{"a", "b"}})
	_ = cb.OnStreamDeltaRequest(2, &discoveryv3.DeltaDiscoveryRequest{ResourceNamesUnsubscribe: []string{"a"}})
	_ = cb.OnDeltaStreamOpen(ctx, 3, "")
	_ = cb.OnStreamRequest(3, &discoveryv3.DiscoveryRequest{}) // wildcard
	cb.OnStreamDeltaResponse(2, nil, &discoveryv3.DeltaDiscoveryResponse{Resources: []*discoveryv3.Resource{{Name: "b"}}})
	cb.OnStreamClosed(3, nil)

	got := r.snapshot()
	want := Stats{StreamsOpen: 2, Subscriptions: 4, StreamsOpened: 3, Requests: 5, Responses: 1, ResourcesSent: 1,
		BytesSent: int64(proto.Size(&discoveryv3.DeltaDiscoveryResponse{Resources: []*discoveryv3.Resource{{Name: "b"}}}))}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("stats (-want +got):\n%s", diff)
	}
}
