package integration

import (
	"fmt"
	"testing"

	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/proto"

	"github.com/xds-relay/xds-relay/config"
)

// TestUpstreamRequestsSplit: with upstream.max_request_size at 16 KiB, a
// client's 2000 names reach a real origin in several requests, all of them
// answered, and so does the reconnect after the origin restarts (every
// name again, with initial_resource_versions): the relay never sends the
// origin a request over its bound.
func TestUpstreamRequestsSplit(t *testing.T) {
	const n, bound = 2000, 16 << 10
	o := newGCPOrigin(t)
	var names []string
	for i := range n {
		name := dsCluster(fmt.Sprintf("split-%04d", i))
		names = append(names, name)
		o.set(resource.ClusterType, name, cluster(name, 1))
	}
	r := startRelay(t, func(c *config.Config) {
		c.Log.Level = config.LogInfo
		c.Upstream.MaxRequestSize = bound
	}, o.addr)
	d := openDelta(t, dial(t, r.XDSAddr()))
	v := subscribeClusters(t, d, names...)

	o.stop()
	o.restart()
	last := names[n-1]
	o.set(resource.ClusterType, last, cluster(last, 2))
	recvDelta(t, d, v, func() bool { return timeoutOf(v, last) == 2 })

	o.mu.Lock()
	defer o.mu.Unlock()
	subscribeRequests := 0
	for _, req := range o.deltaReqs {
		if len(req.GetResourceNamesSubscribe()) > 0 {
			subscribeRequests++
		}
		if size := proto.Size(req); size > bound {
			t.Errorf("origin received a %d-byte request, over the %d-byte bound", size, bound)
		}
	}
	if subscribeRequests < 4 {
		t.Errorf("%d subscribing requests for %d names before and after a restart, want them split", subscribeRequests, n)
	}
}
