package integration

import (
	"fmt"
	"testing"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/grpc"

	"github.com/xds-relay/xds-relay/config"
	"github.com/xds-relay/xds-relay/internal/xdstest"
)

// TestMaxBytesCountsMetadata: cache.max_bytes counts every byte a
// resource holds. An origin sends 150 clusters of 144-byte bodies with
// 256 KiB of metadata each (in the Resource wrapper); a client subscribes
// to them all, gets them and leaves, so nobody watches them. Under
// max_bytes 4 MiB the LRU evicts by their true size: it keeps what fits,
// xds_relay_cache_bytes stays within max_bytes, and the process's live heap
// grows by about that, not by the 38 MiB the 150 hold. (Before: the
// bound counted 21,600 bytes, kept all 150, 39-80 MiB live.)
func TestMaxBytesCountsMetadata(t *testing.T) {
	const maxBytes, n = 4 << 20, 150
	o := newScriptedOrigin(t)
	r := startRelay(t, func(c *config.Config) {
		c.Cache.MaxBytes = maxBytes
		c.Log.Level = config.LogInfo // the test's log stays small
	}, o.addr)
	conn := dial(t, r.XDSAddr(), grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20)))
	names := make([]string, n)
	for i := range names {
		names[i] = dsCluster(fmt.Sprintf("heavy-%03d", i))
	}
	base := int64(xdstest.LiveHeap())

	d, leave := xdstest.Start(t, xdstest.DeltaOpener(conn))
	d.Send(&discoveryv3.DeltaDiscoveryRequest{Node: testNodeDS, TypeUrl: resource.ClusterType, ResourceNamesSubscribe: names})
	o.next("subscription to the 150", subscribes(resource.ClusterType, names[n-1]))
	for i := 0; i < n; i += 10 {
		resp := &discoveryv3.DeltaDiscoveryResponse{TypeUrl: resource.ClusterType, Nonce: fmt.Sprint("n", i)}
		for _, name := range names[i : i+10] {
			resp.Resources = append(resp.Resources, &discoveryv3.Resource{Name: name, Version: "1",
				Resource: mustAny(t, cluster(name, 1)), Metadata: xdstest.Annotations(256 << 10)})
		}
		o.send(resp)
		o.next("ACK of "+resp.Nonce, answers(resp.Nonce))
	}
	got := map[string]bool{} // names only: the client keeps nothing of the bodies
	for len(got) < n {
		for _, res := range d.Recv().GetResources() {
			got[res.GetName()] = true
		}
	}
	leave()
	waitStreamsGone(t, r) // its session (what it was sent) is gone too
	waitRelayMetric(t, r, "the 150 unwatched and evicted to max_bytes", func(v float64) bool { return v <= 15 }, "xds_relay_cache_resources")

	kept := relayMetric(t, r, "xds_relay_cache_resources")
	bytes := relayMetric(t, r, "xds_relay_cache_bytes")
	evicted := relayMetric(t, r, "xds_relay_cache_evictions_total")
	if bytes > maxBytes || bytes < maxBytes/2 || kept == 0 {
		t.Errorf("xds_relay_cache_bytes = %v with %v kept, want what fits in max_bytes %d", bytes, kept, maxBytes)
	}
	if evicted < n-15 {
		t.Errorf("evictions = %v, want at least %d", evicted, n-15)
	}
	// What the ended stream's last round held is released shortly after it
	// ends (measured: within 0.3 s); the cache's part stays.
	var grew int64
	xdstest.Poll(t, "the live heap down to what max_bytes keeps", func() error {
		if grew = int64(xdstest.LiveHeap()) - base; grew > 3*maxBytes {
			return fmt.Errorf("live heap +%d bytes with nobody watching, more than 3 × max_bytes", grew)
		}
		return nil
	})
	t.Logf("150 × (144-byte body, 256 KiB metadata), max_bytes %d: kept %v, xds_relay_cache_bytes %v, evicted %v; live heap +%d bytes", maxBytes, kept, bytes, evicted, grew)
}
