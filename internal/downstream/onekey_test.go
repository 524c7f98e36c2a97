package downstream

import (
	"context"
	"testing"

	clusterv3s "github.com/envoyproxy/go-control-plane/envoy/service/cluster/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"

	"github.com/xds-relay/xds-relay/internal/cache"
)

// restrictedLink is where legacyMatcher puts "restricted/" names.
var restrictedLink = cache.LinkID{Authority: "restricted.example", Group: "r"}

// TestOneKeyAlias: a name the client subscribes to is fed by its own key
// only. Here "restricted/vh" resolves to restricted.example's link; the
// legacy link's origin answers the alias "rc/dom" with a resource it also
// names "restricted/vh". The client, subscribed to both, holds
// restricted.example's copy; the alias answer is left pending, through
// the legacy origin's changes.
func TestOneKeyAlias(t *testing.T) {
	e := newEnv(t, 0)
	const own, alias = "restricted/vh", "rc/dom"
	home := fieldsRes(vhType, own, "2", nil, nil, nil)
	e.cache.set(cache.Key{Link: restrictedLink, TypeURL: vhType, Name: own}, home)
	e.cache.set(cache.Key{Link: legacyStream, TypeURL: vhType, Name: own}, fieldsRes(vhType, own, "666", []string{alias}, nil, nil))

	c := e.delta()
	c.Send(&discoveryv3.DeltaDiscoveryRequest{Node: testNode, TypeUrl: vhType, ResourceNamesSubscribe: []string{own}})
	got := c.Recv()
	checkDelta(t, deltaResp(vhType, nil, dfres(own, home)), got)
	c.Send(ack(vhType, got))
	c.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: vhType, ResourceNamesSubscribe: []string{alias}})
	e.syncDelta(c) // the next response is the sync's: the alias led to another copy of own
	e.cache.set(cache.Key{Link: legacyStream, TypeURL: vhType, Name: own}, fieldsRes(vhType, own, "667", []string{alias}, nil, nil))
	e.syncDelta(c)
}

// TestOneKeyFetch: a unary Fetch of the wildcard and of a name the rules
// give to another link lists that name once, from its own key, even when
// the wildcard's origin lists it too (whatever the order asked).
func TestOneKeyFetch(t *testing.T) {
	e := newEnv(t, 0)
	const named = "restricted/x"
	wild := cache.Key{Link: legacyStream, TypeURL: cdsType, Name: cache.Wildcard}
	e.cache.Watch(&quietWatcher{}, nil, wild) // the wildcard subscribed, so its answer is kept
	open := res(cdsType, "open", "1")
	e.cache.Apply(cache.Update{Link: legacyStream, TypeURL: cdsType, Complete: []string{cache.Wildcard},
		Resources: []*cache.Resource{open, res(cdsType, named, "666")}})
	home := res(cdsType, named, "2")
	e.cache.set(cache.Key{Link: restrictedLink, TypeURL: cdsType, Name: named}, home)

	for _, names := range [][]string{{"*", named}, {named, "*"}} {
		got, err := clusterv3s.NewClusterDiscoveryServiceClient(e.conn).FetchClusters(context.Background(),
			&discoveryv3.DiscoveryRequest{Node: testNode, ResourceNames: names})
		if err != nil {
			t.Fatal(err)
		}
		checkSotW(t, sotwResp(cdsType, got.GetVersionInfo(), open.Body, home.Body), got)
	}
}

// quietWatcher is a watcher that ignores what it is told.
type quietWatcher struct{}

func (*quietWatcher) Notify(cache.Key)       {}
func (*quietWatcher) Flush(*cache.ChangeSet) {}
