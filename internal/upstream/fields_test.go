package upstream

import (
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/xds-relay/xds-relay/internal/cache"
)

// TestUpdateKeepsResourceFields: the origin's aliases, metadata and
// cache_control reach the cache with the revision, from a delta Resource
// and from a SotW Resource wrapper alike (before, only name, version and
// TTL were kept).
func TestUpdateKeepsResourceFields(t *testing.T) {
	c1 := anyOf(t, &clusterv3.Cluster{Name: "c1"})
	md := &corev3.Metadata{FilterMetadata: map[string]*structpb.Struct{
		"trace": {Fields: map[string]*structpb.Value{"id": structpb.NewStringValue("abc")}},
	}}
	cc := &discoveryv3.Resource_CacheControl{DoNotCache: true}
	wrapper := &discoveryv3.Resource{Name: "c1", Version: "7", Resource: c1, Aliases: []string{"alias-a", "alias-b"}, Metadata: md, CacheControl: cc}
	want := &cache.Resource{Name: "c1", Body: c1, Aliases: []string{"alias-a", "alias-b"}, Metadata: md, CacheControl: cc}
	for _, tc := range []struct {
		name   string
		update func() (cache.Update, error)
	}{
		{name: "delta", update: func() (cache.Update, error) {
			return deltaUpdate(cache.LinkID{Authority: "a"}, &discoveryv3.DeltaDiscoveryResponse{
				TypeUrl: resource.ClusterType, Resources: []*discoveryv3.Resource{wrapper},
			}, time.Now())
		}},
		{name: "sotw wrapper", update: func() (cache.Update, error) {
			return sotwUpdate(cache.LinkID{Authority: "a"}, &discoveryv3.DiscoveryResponse{
				TypeUrl: resource.ClusterType, VersionInfo: "v1", Resources: []*anypb.Any{anyOf(t, wrapper)},
			}, time.Now())
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u, err := tc.update()
			if err != nil {
				t.Fatal(err)
			}
			if len(u.Resources) != 1 {
				t.Fatalf("%d resources, want 1", len(u.Resources))
			}
			got := u.Resources[0]
			if diff := cmp.Diff(want, got, protocmp.Transform(),
				cmpIgnore("Version", "OriginVersion", "Arrived", "TTL")); diff != "" {
				t.Errorf("revision (-want +got):\n%s", diff)
			}
			if !got.DoNotCache() || !got.HasFields() {
				t.Errorf("DoNotCache %v HasFields %v, want both", got.DoNotCache(), got.HasFields())
			}
		})
	}
}

func cmpIgnore(fields ...string) cmp.Option {
	return cmp.FilterPath(func(p cmp.Path) bool {
		if sf, ok := p.Last().(cmp.StructField); ok {
			for _, f := range fields {
				if sf.Name() == f {
					return true
				}
			}
		}
		return false
	}, cmp.Ignore())
}
