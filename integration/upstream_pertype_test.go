package integration

import (
	"sort"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/xds-relay/xds-relay/config"
	"github.com/xds-relay/xds-relay/internal/cache"
	"github.com/xds-relay/xds-relay/internal/xdstype"
)

// TestUpstreamPerType: transports delta-per-type and sotw-per-type speak to
// a go-control-plane origin that serves only the per-type services (CDS,
// EDS, LDS, RDS; no ADS): one stream per type of the link, each opened with
// the group's node; resources arrive and updates follow. A type the origin
// has no service for (SDS here) is refused alone: its name is answered
// absent and the other types carry on.
func TestUpstreamPerType(t *testing.T) {
	for _, transport := range []string{xdstype.TransportDeltaPerType, xdstype.TransportSotWPerType} {
		t.Run(transport, func(t *testing.T) {
			o := linearOrigin()
			o.perType = true
			serveOrigin(t, o, nil)
			o.set(resource.ClusterType, "c1", cluster("c1", 1))
			o.set(resource.ListenerType, "l1", listener("l1"))
			o.set(resource.EndpointType, "e1", &endpointv3.ClusterLoadAssignment{ClusterName: "e1"})

			r := newRelay(t, nil, config.Authority{Name: "origin", Origins: []string{o.addr}, Transport: transport})
			key := func(typeURL, name string) cache.Key {
				return cache.Key{Link: legacyStream, TypeURL: typeURL, Name: name}
			}
			node := &corev3.Node{Id: "group-node", Cluster: "g1"}
			w := newWatcher()
			r.c.Watch(w, node, cdsKey("c1"), key(resource.ListenerType, "l1"), key(resource.EndpointType, "e1"))
			w.waitState(t, r.c, cdsKey("c1"), cache.StatePresent)
			w.waitState(t, r.c, key(resource.ListenerType, "l1"), cache.StatePresent)
			w.waitState(t, r.c, key(resource.EndpointType, "e1"), cache.StatePresent)

			// An update reaches the cache over its type's stream.
			o.set(resource.ClusterType, "c1", cluster("c1", 2))
			w.waitFor(t, "c1 update", func() bool {
				got := r.c.Lookup(nil, cdsKey("c1")).Res
				return got != nil && cmp.Diff(mustAny(t, cluster("c1", 2)), got.Body, protocmp.Transform()) == ""
			})

			// The origin restarts: every type's stream starts over and no
			// type is refused for it (its error names none).
			o.stop()
			o.restart()
			o.set(resource.ClusterType, "c1", cluster("c1", 3))
			w.waitFor(t, "c1 update after the restart", func() bool {
				got := r.c.Lookup(nil, cdsKey("c1")).Res
				return got != nil && cmp.Diff(mustAny(t, cluster("c1", 3)), got.Body, protocmp.Transform()) == ""
			})
			for _, typ := range []string{resource.ClusterType, resource.EndpointType, resource.ListenerType} {
				if got := metricValue(t, r, "xds_relay_upstream_refused_types_total", "authority", "origin", "type", xdstype.Label(typ)); got != 0 {
					t.Errorf("%s refused %v times after a restart, want 0", typ, got)
				}
			}

			// A type without a per-type service on the origin: answered
			// absent; the others stay.
			r.c.Watch(w, node, key(resource.SecretType, "s1"))
			w.waitState(t, r.c, key(resource.SecretType, "s1"), cache.StateAbsent)
			o.set(resource.ListenerType, "l2", listener("l2"))
			r.c.Watch(w, node, key(resource.ListenerType, "l2"))
			w.waitState(t, r.c, key(resource.ListenerType, "l2"), cache.StatePresent)
			if got := r.c.Lookup(nil, cdsKey("c1")).Res; got == nil {
				t.Error("c1 lost after the secret stream was refused")
			}
			if got := metricValue(t, r, "xds_relay_upstream_refused_types_total", "authority", "origin", "type", xdstype.Label(resource.SecretType)); got < 1 {
				t.Errorf("secrets refused %v times, want at least 1", got)
			}

			o.mu.Lock()
			defer o.mu.Unlock()
			opens := append([]string(nil), o.typeOpens...)
			sort.Strings(opens)
			// The first attempt's three streams, then (after the refused
			// secret stream ended it) one of each served type again.
			served := []string{resource.ClusterType, resource.EndpointType, resource.ListenerType}
			if len(opens) == 0 || !covers(opens, served) {
				t.Errorf("per-type streams opened %v, want at least %v", opens, served)
			}
			for _, typ := range opens {
				if typ != resource.ClusterType && typ != resource.EndpointType && typ != resource.ListenerType && typ != resource.SecretType {
					t.Errorf("stream of unexpected type %s", typ)
				}
			}
			for id, n := range o.firstNodes {
				if diff := cmp.Diff(node, n, protocmp.Transform(), protocmp.IgnoreFields(&corev3.Node{}, "client_features")); diff != "" {
					t.Errorf("stream %d: first request's node (-want +got):\n%s", id, diff)
				}
			}
			if len(o.firstNodes) < len(served) {
				t.Errorf("%d streams sent a first request, want at least %d", len(o.firstNodes), len(served))
			}
		})
	}
}
