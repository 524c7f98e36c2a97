package upstream

import (
	"time"

	"testing"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/google/go-cmp/cmp"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/xds-relay/xds-relay/internal/cache"
)

// fakeADS records the requests an attempt sends (a fake below gRPC: the
// sync logic is what is tested; integration/ runs real origins).
type fakeADS[Req, Resp any] struct {
	grpc.BidiStreamingClient[Req, Resp]
	sent []*Req
}

func (f *fakeADS[Req, Resp]) Send(r *Req) error {
	f.sent = append(f.sent, r)
	return nil
}

func testLink(emulated bool) *link {
	m := &Manager{lg: zap.NewNop(), metrics: newMetrics(nil), cache: cache.New(cache.Options{}), maxRequest: 1 << 20, failback: time.Minute}
	return newLink(m, cache.LinkID{Authority: "a"}, &authority{name: "a", origins: []string{"o"}, emulated: emulated})
}

// TestResubscribe: a name the cache unsubscribed (it evicted it) and
// subscribed again before the link synced leaves the desired set as it
// was; the origin must still be made to send it again: delta unsubscribes
// and subscribes it again, SotW asks again without a version. A sync
// without such a pair sends nothing.
func TestResubscribe(t *testing.T) {
	const eds = resourcev3.EndpointType
	x := "xdstp://a/envoy.config.endpoint.v3.ClusterLoadAssignment/x"
	g := "xdstp://a/envoy.config.endpoint.v3.ClusterLoadAssignment/dir/*"

	t.Run("delta", func(t *testing.T) {
		l := testLink(true)
		ads := &fakeADS[discoveryv3.DeltaDiscoveryRequest, discoveryv3.DeltaDiscoveryResponse]{}
		st := newDeltaState()
		l.update(nil, eds, []string{x, g}, true)
		if err := l.deltaSync(ads, st); err != nil {
			t.Fatal(err)
		}
		ads.sent = nil
		l.update(nil, eds, []string{x, g}, false)
		l.update(nil, eds, []string{x, g}, true)
		if err := l.deltaSync(ads, st); err != nil {
			t.Fatal(err)
		}
		want := []*discoveryv3.DeltaDiscoveryRequest{
			{TypeUrl: eds, ResourceNamesUnsubscribe: []string{cache.Wildcard, x}},
			{TypeUrl: eds, ResourceNamesSubscribe: []string{cache.Wildcard, x}},
		}
		if diff := cmp.Diff(want, ads.sent, protocmp.Transform()); diff != "" {
			t.Errorf("requests after unsubscribe+subscribe (-want +got):\n%s", diff)
		}
		ads.sent = nil
		if err := l.deltaSync(ads, st); err != nil {
			t.Fatal(err)
		}
		if len(ads.sent) != 0 {
			t.Errorf("a sync with nothing new sent %v", ads.sent)
		}
	})
	t.Run("sotw", func(t *testing.T) {
		l := testLink(true)
		ads := &fakeADS[discoveryv3.DiscoveryRequest, discoveryv3.DiscoveryResponse]{}
		types := map[string]*sotwType{}
		nodeSent := false
		l.update(nil, eds, []string{x}, true)
		if err := l.sotwSync(ads, types, &nodeSent); err != nil {
			t.Fatal(err)
		}
		types[eds].nonce = "n1"
		l.sotwVersions[eds] = "v1"
		ads.sent = nil
		l.update(nil, eds, []string{x}, false)
		l.update(nil, eds, []string{x}, true)
		if err := l.sotwSync(ads, types, &nodeSent); err != nil {
			t.Fatal(err)
		}
		want := []*discoveryv3.DiscoveryRequest{{TypeUrl: eds, ResourceNames: []string{x}, ResponseNonce: "n1"}}
		if diff := cmp.Diff(want, ads.sent, protocmp.Transform()); diff != "" {
			t.Errorf("requests after unsubscribe+subscribe (-want +got):\n%s", diff)
		}
		ads.sent = nil
		if err := l.sotwSync(ads, types, &nodeSent); err != nil {
			t.Fatal(err)
		}
		if len(ads.sent) != 0 {
			t.Errorf("a sync with nothing new sent %v", ads.sent)
		}
	})
}
