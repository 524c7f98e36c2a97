package upstream

import (
	"errors"
	"testing"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/xds-relay/xds-relay/internal/cache"
)

// TestRefusedSubscription: an attempt's error that names a subscribed type
// refuses the type; one that names no type but a subscribed name (as a word
// of its own, long enough) refuses that name. A refused name is no longer
// asked of the origin and is answered as absent; other names carry on.
func TestRefusedSubscription(t *testing.T) {
	const eds = resourcev3.EndpointType
	bad := "xdstp://a/envoy.config.endpoint.v3.ClusterLoadAssignment/bad"
	good := "xdstp://a/envoy.config.endpoint.v3.ClusterLoadAssignment/bad2"
	l := testLink(false)
	l.update(nil, eds, []string{bad, good, "ab"}, true)

	for _, tc := range []struct {
		msg          string
		wantType     string
		wantT, wantN string
	}{
		{msg: "rpc error: no cache defined for type_url " + eds, wantType: eds},
		{msg: `rpc error: resource "` + bad + `" is invalid`, wantT: eds, wantN: bad},
		{msg: "rpc error: resource " + good + ": too big", wantT: eds, wantN: good},
		{msg: "rpc error: connection reset (ab)"}, // too short to match by chance
		{msg: "rpc error: unrelated"},
	} {
		if got := l.refusedType(errors.New(tc.msg)); got != tc.wantType {
			t.Errorf("%q: refused type %q, want %q", tc.msg, got, tc.wantType)
		}
		if tc.wantType != "" {
			continue
		}
		if gt, gn := l.refusedName(errors.New(tc.msg)); gt != tc.wantT || gn != tc.wantN {
			t.Errorf("%q: refused name %q %q, want %q %q", tc.msg, gt, gn, tc.wantT, tc.wantN)
		}
	}

	w := &watcherOf{}
	l.mgr.cache.Watch(w, nil, cache.Key{Link: l.id, TypeURL: eds, Name: bad})
	l.refuse(eds, bad, errors.New("refused"))
	ads := &fakeADS[discoveryv3.DeltaDiscoveryRequest, discoveryv3.DeltaDiscoveryResponse]{}
	st := newDeltaState()
	if err := l.deltaSync(ads, st); err != nil {
		t.Fatal(err)
	}
	want := []*discoveryv3.DeltaDiscoveryRequest{{TypeUrl: eds, ResourceNamesSubscribe: []string{"ab", good}}}
	if diff := cmp.Diff(want, ads.sent, protocmp.Transform(), protocmp.IgnoreFields(&discoveryv3.DeltaDiscoveryRequest{}, "node", "initial_resource_versions")); diff != "" {
		t.Errorf("requests with %s refused (-want +got):\n%s", bad, diff)
	}
	if st := l.mgr.cache.Lookup(nil, cache.Key{Link: l.id, TypeURL: eds, Name: bad}).State; st != cache.StateAbsent {
		t.Errorf("refused name reads %v, want absent", st)
	}
}

// watcherOf is a watcher that ignores what it is told.
type watcherOf struct{ _ int }

func (*watcherOf) Notify(cache.Key)       {}
func (*watcherOf) Flush(*cache.ChangeSet) {}
