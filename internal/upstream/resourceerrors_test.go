package upstream

import (
	"strings"
	"testing"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/google/go-cmp/cmp"
	statuspb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/xds-relay/xds-relay/internal/cache"
)

// resource_errors of both transports become cache errors under canonical
// names (globs and the wildcard included); NOT_FOUND is also a removal.
func TestResourceErrorsFromOrigins(t *testing.T) {
	st := func(c codes.Code, msg string) *statuspb.Status { return &statuspb.Status{Code: int32(c), Message: msg} }
	rerr := func(name string, s *statuspb.Status) *discoveryv3.ResourceError {
		return &discoveryv3.ResourceError{ResourceName: &discoveryv3.ResourceName{Name: name}, ErrorDetail: s}
	}
	const urn = "xdstp://a/envoy.config.cluster.v3.Cluster/x?b=2&a=1"
	const canonical = "xdstp://a/envoy.config.cluster.v3.Cluster/x?a=1&b=2"
	const glob = "xdstp://a/envoy.config.cluster.v3.Cluster/dir/*"
	for _, tc := range []struct {
		name        string
		errs        []*discoveryv3.ResourceError
		wantErr     string
		wantErrors  []cache.ResourceError
		wantRemoved []string
	}{
		{
			name: "codes and names",
			errs: []*discoveryv3.ResourceError{
				rerr("c1", st(codes.Unavailable, "down")),
				rerr(urn, st(codes.NotFound, "gone")),
				rerr(glob, st(codes.PermissionDenied, "no")),
				rerr("", st(codes.Internal, "wildcard (SotW spelling)")),
				rerr("*", st(codes.Internal, "wildcard")),
			},
			wantErrors: []cache.ResourceError{
				{Name: "c1", Detail: st(codes.Unavailable, "down")},
				{Name: canonical, Detail: st(codes.NotFound, "gone")},
				{Name: glob, Detail: st(codes.PermissionDenied, "no")},
				{Name: cache.Wildcard, Detail: st(codes.Internal, "wildcard (SotW spelling)")},
				{Name: cache.Wildcard, Detail: st(codes.Internal, "wildcard")},
			},
			wantRemoved: []string{canonical},
		},
		{name: "no detail", errs: []*discoveryv3.ResourceError{rerr("c1", nil)}, wantErr: "has no error_detail"},
		{name: "bad name", errs: []*discoveryv3.ResourceError{rerr("xdstp://", st(codes.NotFound, ""))}, wantErr: "is not valid"},
	} {
		for _, variant := range []string{"delta", "sotw"} {
			t.Run(tc.name+"/"+variant, func(t *testing.T) {
				var u cache.Update
				var err error
				if variant == "delta" {
					u, err = deltaUpdate(cache.LinkID{Authority: "a"}, &discoveryv3.DeltaDiscoveryResponse{
						TypeUrl: resource.ClusterType, ResourceErrors: tc.errs}, time.Now())
				} else {
					u, err = sotwUpdate(cache.LinkID{Authority: "a"}, &discoveryv3.DiscoveryResponse{
						TypeUrl: resource.ClusterType, ResourceErrors: tc.errs}, time.Now())
				}
				if tc.wantErr != "" {
					if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
						t.Errorf("error %v, want one containing %q", err, tc.wantErr)
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(tc.wantErrors, u.Errors, protocmp.Transform()); diff != "" {
					t.Errorf("errors (-want +got):\n%s", diff)
				}
				if diff := cmp.Diff(tc.wantRemoved, u.Removed); diff != "" {
					t.Errorf("removed (-want +got):\n%s", diff)
				}
			})
		}
	}
}

// A delta response that carries only errors is not the empty answer to a
// wildcard; one whose NOT_FOUND names a glob answers it as known empty.
func TestResourceErrorsAnswer(t *testing.T) {
	const glob = "xdstp://a/envoy.config.cluster.v3.Cluster/dir/*"
	awaiting := map[string]int{cache.Wildcard: 1, glob: 1}
	sent := map[string]int{cache.Wildcard: 1, glob: 1, "c1": 1}
	onlyErr := cache.Update{Errors: []cache.ResourceError{{Name: "c1", Detail: &statuspb.Status{Code: int32(codes.Unavailable)}}}}
	if got := deltaAnswers(onlyErr, sent, nil, awaiting); len(got) != 0 {
		t.Errorf("an UNAVAILABLE for a name answered %v, want nothing", got)
	}
	u, err := deltaUpdate(cache.LinkID{Authority: "a"}, &discoveryv3.DeltaDiscoveryResponse{
		TypeUrl: resource.ClusterType, ResourceErrors: []*discoveryv3.ResourceError{{
			ResourceName: &discoveryv3.ResourceName{Name: glob}, ErrorDetail: &statuspb.Status{Code: int32(codes.NotFound)}}}}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{glob}, deltaAnswers(u, sent, nil, awaiting)); diff != "" {
		t.Errorf("answered (-want +got):\n%s", diff)
	}
}
