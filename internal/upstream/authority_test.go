package upstream

import (
	"errors"
	"strings"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
	statuspb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/xds-relay/xds-relay/internal/cache"
)

// TestLinkOwnsOnlyItsAuthority: a link takes plain names and its own
// authority's xdstp names, on its xdstp link and on a plain-name group
// alike; a resource, removal, alias or resource error naming another
// authority is refused (errOtherAuthority) over both transports, with a
// reason naming the name and both authorities.
func TestLinkOwnsOnlyItsAuthority(t *testing.T) {
	const own, other = "xdstp://a.example/envoy.config.cluster.v3.Cluster/c", "xdstp://b.example/envoy.config.cluster.v3.Cluster/c"
	body := func(name string) *anypb.Any { return anyOf(t, &clusterv3.Cluster{Name: name}) }
	notFound := func(name string) []*discoveryv3.ResourceError {
		return []*discoveryv3.ResourceError{{ResourceName: &discoveryv3.ResourceName{Name: name}, ErrorDetail: &statuspb.Status{Code: int32(codes.NotFound)}}}
	}
	for _, tc := range []struct {
		name    string
		res     *discoveryv3.Resource // sent as a delta resource and in the SotW wrapper
		removed []string              // delta only
		errs    []*discoveryv3.ResourceError
		refused string // the name the refusal quotes; "": accepted
	}{
		{name: "own xdstp", res: &discoveryv3.Resource{Name: own, Resource: body(own)}},
		{name: "plain", res: &discoveryv3.Resource{Name: "c", Resource: body("c"), Aliases: []string{"d"}}},
		{name: "own alias", res: &discoveryv3.Resource{Name: own, Resource: body(own), Aliases: []string{own + "2"}}},
		{name: "other resource", res: &discoveryv3.Resource{Name: other, Resource: body(other)}, refused: other},
		{name: "other heartbeat", res: &discoveryv3.Resource{Name: other}, refused: other},
		{name: "other alias", res: &discoveryv3.Resource{Name: own, Resource: body(own), Aliases: []string{other}}, refused: other},
		{name: "other alias of plain", res: &discoveryv3.Resource{Name: "c", Resource: body("c"), Aliases: []string{other}}, refused: other},
		{name: "other removal", removed: []string{other}, refused: other},
		{name: "other error", errs: notFound(other), refused: other},
		{name: "own error", errs: notFound(own)},
	} {
		for _, link := range []cache.LinkID{{Authority: "a.example"}, {Authority: "a.example", Group: "g"}} {
			t.Run(tc.name+"/"+link.Group, func(t *testing.T) {
				dr := &discoveryv3.DeltaDiscoveryResponse{TypeUrl: resource.ClusterType, RemovedResources: tc.removed, ResourceErrors: tc.errs}
				sr := &discoveryv3.DiscoveryResponse{TypeUrl: resource.ClusterType, ResourceErrors: tc.errs}
				if tc.res != nil {
					dr.Resources = []*discoveryv3.Resource{tc.res}
					sr.Resources = []*anypb.Any{anyOf(t, tc.res)}
				}
				_, derr := deltaUpdate(link, dr, time.Now())
				checkOwned(t, "delta", derr, tc.refused)
				if tc.removed == nil {
					_, serr := sotwUpdate(link, sr, time.Now())
					checkOwned(t, "SotW", serr, tc.refused)
				}
			})
		}
	}
}

func checkOwned(t *testing.T, transport string, err error, refused string) {
	t.Helper()
	if refused == "" {
		if err != nil {
			t.Errorf("%s: refused: %v", transport, err)
		}
		return
	}
	if !errors.Is(err, errRejected) || !errors.Is(err, errOtherAuthority) {
		t.Fatalf("%s: %v, want a refusal of another authority's name", transport, err)
	}
	for _, want := range []string{`"` + refused + `"`, `"b.example"`, `"a.example"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%s: reason %q does not name %s", transport, err, want)
		}
	}
}

// TestOtherAuthorityLoggedOncePerOrigin: a refusal of another authority's
// name is logged at Warn once per origin (such an origin repeats itself
// with every response), then at Debug; other NACKs at Warn each time.
func TestOtherAuthorityLoggedOncePerOrigin(t *testing.T) {
	core, logs := observer.New(zap.DebugLevel)
	l := &link{id: cache.LinkID{Authority: "a.example"}, lg: zap.New(core)}
	refusal := ownedName(l.id, "resource", "xdstp://b.example/envoy.config.cluster.v3.Cluster/c")
	for _, origin := range []string{"o1:1", "o1:1", "o1:1", "o2:1", "o2:1"} {
		l.setState(origin, "serving")
		l.logRejected(resource.ClusterType, "n", refusal, true)
	}
	l.logRejected(resource.ClusterType, "n", rejectf("duplicate"), false)
	l.logRejected(resource.ClusterType, "n", rejectf("duplicate"), false)
	if got := logs.FilterLevelExact(zap.WarnLevel).Len(); got != 4 {
		t.Errorf("%d Warn lines, want 4: one per origin (2), one per other NACK (2)", got)
	}
	if got := logs.FilterLevelExact(zap.DebugLevel).Len(); got != 3 {
		t.Errorf("%d Debug lines, want 3 (the repeats)", got)
	}
}
