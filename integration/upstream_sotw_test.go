package integration

import (
	"testing"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/xds-relay/xds-relay/config"
	"github.com/xds-relay/xds-relay/internal/cache"
	"github.com/xds-relay/xds-relay/internal/xdstype"
)

// TestUpstreamSotW: transport sotw speaks SotW ADS to go-control-plane:
// full name lists, ACKs with version and nonce, updates and (CDS is full
// state) deletions.
func TestUpstreamSotW(t *testing.T) {
	o := newGCPOrigin(t)
	o.set(resource.ClusterType, "c1", cluster("c1", 1))
	o.set(resource.ClusterType, "c2", cluster("c2", 1))
	r := newRelay(t, nil, config.Authority{Name: "origin", Origins: []string{o.addr}, Transport: xdstype.TransportSotW})
	ws := []*watcher{newWatcher(), newWatcher()}
	for _, w := range ws {
		r.c.Watch(w, nil, cdsKey("c1"), cdsKey("c2"))
	}
	for _, w := range ws {
		w.waitState(t, r.c, cdsKey("c1"), cache.StatePresent)
		w.waitState(t, r.c, cdsKey("c2"), cache.StatePresent)
	}
	// Every response is ACKed with its version and nonce and the full list.
	o.waitFor("ACK", func() bool {
		if len(o.sotwResps) == 0 {
			return false
		}
		last := o.sotwResps[len(o.sotwResps)-1]
		for _, q := range o.sotwReqs {
			if q.GetResponseNonce() == last.GetNonce() && q.GetVersionInfo() == last.GetVersionInfo() && q.GetErrorDetail() == nil {
				return cmp.Equal([]string{"c1", "c2"}, q.GetResourceNames())
			}
		}
		return false
	})

	o.set(resource.ClusterType, "c1", cluster("c1", 2))
	o.del(resource.ClusterType, "c2")
	for _, w := range ws {
		w.waitState(t, r.c, cdsKey("c2"), cache.StateAbsent)
		w.waitFor(t, "c1 update", func() bool {
			got := r.c.Lookup(nil, cdsKey("c1")).Res
			return got != nil && cmp.Diff(mustAny(t, cluster("c1", 2)), got.Body, protocmp.Transform()) == ""
		})
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.sotwOpens != 1 || o.deltaOpens != 0 {
		t.Errorf("origin saw %d SotW and %d delta streams, want 1 and 0", o.sotwOpens, o.deltaOpens)
	}
	var firstCDS *discoveryv3.DiscoveryRequest
	for _, q := range o.sotwReqs {
		if q.GetTypeUrl() == resource.ClusterType {
			firstCDS = q
			break
		}
	}
	if diff := cmp.Diff(&discoveryv3.DiscoveryRequest{TypeUrl: resource.ClusterType, ResourceNames: []string{"c1", "c2"}}, firstCDS,
		protocmp.Transform(), protocmp.IgnoreFields(&discoveryv3.DiscoveryRequest{}, "node")); diff != "" {
		t.Errorf("first CDS request (-want +got):\n%s", diff)
	}
}

// TestUpstreamSotWReconnect: after the origin restarts, the SotW stream's
// first request resends the last accepted version_info and the full names.
func TestUpstreamSotWReconnect(t *testing.T) {
	o := newGCPOrigin(t)
	o.set(resource.ClusterType, "c1", cluster("c1", 1))
	r := newRelay(t, nil, config.Authority{Name: "origin", Origins: []string{o.addr}, Transport: xdstype.TransportSotW})
	w := newWatcher()
	r.c.Watch(w, nil, cdsKey("c1"))
	w.waitState(t, r.c, cdsKey("c1"), cache.StatePresent)
	var version string
	o.waitFor("ACK", func() bool {
		for _, q := range o.sotwReqs {
			if q.GetResponseNonce() != "" && q.GetErrorDetail() == nil {
				version = q.GetVersionInfo()
				return true
			}
		}
		return false
	})
	o.stop()
	o.mu.Lock()
	before := len(o.sotwReqs)
	o.mu.Unlock()
	o.restart()
	var first *discoveryv3.DiscoveryRequest
	o.waitFor("reconnect request", func() bool {
		if len(o.sotwReqs) > before {
			first = o.sotwReqs[before]
			return true
		}
		return false
	})
	want := &discoveryv3.DiscoveryRequest{TypeUrl: resource.ClusterType, ResourceNames: []string{"c1"}, VersionInfo: version}
	if diff := cmp.Diff(want, first, protocmp.Transform(), protocmp.IgnoreFields(&discoveryv3.DiscoveryRequest{}, "node")); diff != "" {
		t.Errorf("first request after reconnect (-want +got):\n%s", diff)
	}
}

// TestUpstreamSotWFailoverForgetsVersion: a version_info accepted from one
// origin means nothing to another, so after failover the SotW stream's
// first request to the next origin carries none.
func TestUpstreamSotWFailoverForgetsVersion(t *testing.T) {
	first, second := newGCPOrigin(t), newGCPOrigin(t)
	first.set(resource.ClusterType, "c1", cluster("c1", 1))
	second.set(resource.ClusterType, "c1", cluster("c1", 2))
	r := newRelay(t, nil, config.Authority{Name: "origin", Origins: []string{first.addr, second.addr}, Transport: xdstype.TransportSotW})
	w := newWatcher()
	r.c.Watch(w, nil, cdsKey("c1"))
	w.waitState(t, r.c, cdsKey("c1"), cache.StatePresent)
	first.waitFor("ACK with a version", func() bool {
		for _, q := range first.sotwReqs {
			if q.GetResponseNonce() != "" && q.GetVersionInfo() != "" {
				return true
			}
		}
		return false
	})
	first.stop()
	var req *discoveryv3.DiscoveryRequest
	second.waitFor("first request", func() bool {
		if len(second.sotwReqs) > 0 {
			req = second.sotwReqs[0]
			return true
		}
		return false
	})
	want := &discoveryv3.DiscoveryRequest{TypeUrl: resource.ClusterType, ResourceNames: []string{"c1"}}
	if diff := cmp.Diff(want, req, protocmp.Transform(), protocmp.IgnoreFields(&discoveryv3.DiscoveryRequest{}, "node")); diff != "" {
		t.Errorf("first request to the second origin (-want +got):\n%s", diff)
	}
}
