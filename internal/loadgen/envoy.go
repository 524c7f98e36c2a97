package loadgen

import (
	"slices"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

// An Envoy fleet (Config.Envoy): each client asks over ADS what an Envoy
// asks when it bootstraps with lds_config and cds_config over ADS: the
// wildcard of CDS and of LDS; then EDS for each cluster of type EDS (its
// eds_cluster_config.service_name, else its name) and RDS for each route
// configuration a listener's HTTP connection manager names
// (rds.route_config_name, in any filter chain or the API listener). It
// follows every change: a name that no resource names any more is
// unsubscribed, a new one subscribed, after the ACK of the response that
// changed them.

// envoyNext maps a type to the type whose names its resources give.
var envoyNext = map[string]string{
	resourcev3.ClusterType:  resourcev3.EndpointType,
	resourcev3.ListenerType: resourcev3.RouteType,
}

// hcmTypeURL is the type URL of the HTTP connection manager's config.
var hcmTypeURL = resourcev3.APITypePrefix + string((&hcmv3.HttpConnectionManager{}).ProtoReflect().Descriptor().FullName())

// envoyTypes is what an Envoy asks for at first, in Envoy's ADS order:
// the wildcard of CDS and LDS; EDS and RDS wait for names.
func envoyTypes() []*typeState {
	cds := newTypeState(resourcev3.ClusterType, nil, true)
	lds := newTypeState(resourcev3.ListenerType, nil, true)
	cds.refs, lds.refs = make(map[string][]string), make(map[string][]string)
	return []*typeState{
		cds, newTypeState(resourcev3.EndpointType, nil, false),
		lds, newTypeState(resourcev3.RouteType, nil, false),
	}
}

// envoyRefs returns the names of the next type a resource of typeURL
// makes an Envoy ask for (nil for a body that does not decode: an Envoy
// would reject it, and ask for nothing more).
func envoyRefs(typeURL string, body []byte) []string {
	switch typeURL {
	case resourcev3.ClusterType:
		var c clusterv3.Cluster
		if proto.Unmarshal(body, &c) != nil || c.GetType() != clusterv3.Cluster_EDS {
			return nil
		}
		if n := c.GetEdsClusterConfig().GetServiceName(); n != "" {
			return []string{n}
		}
		return []string{c.GetName()}
	case resourcev3.ListenerType:
		var l listenerv3.Listener
		if proto.Unmarshal(body, &l) != nil {
			return nil
		}
		return listenerRoutes(&l)
	}
	return nil
}

// listenerRoutes are the route configurations l's HTTP connection
// managers ask RDS for.
func listenerRoutes(l *listenerv3.Listener) []string {
	var out []string
	add := func(a *anypb.Any) {
		var hcm hcmv3.HttpConnectionManager
		if a.GetTypeUrl() != hcmTypeURL || proto.Unmarshal(a.GetValue(), &hcm) != nil {
			return
		}
		if n := hcm.GetRds().GetRouteConfigName(); n != "" {
			out = append(out, n)
		}
	}
	for _, fc := range append(slices.Clone(l.GetFilterChains()), l.GetDefaultFilterChain()) {
		for _, f := range fc.GetFilters() {
			add(f.GetTypedConfig())
		}
	}
	add(l.GetApiListener().GetApiListener())
	return out
}

// followed is a change of the names a client asks for of one type.
type followed struct {
	ts             *typeState
	added, removed []string
}

// follow brings the names an Envoy asks for of the type after ts's (EDS
// after CDS, RDS after LDS) to what ts's resources name now, and returns
// the change; nil when nothing changed or ts names nothing.
func (c *client) follow(ts *typeState) []followed {
	if ts.refs == nil {
		return nil
	}
	next := c.typeOf(envoyNext[ts.typeURL])
	var want []string
	for _, refs := range ts.refs {
		want = append(want, refs...)
	}
	slices.Sort(want)
	want = slices.Compact(want)
	ch := followed{ts: next}
	asked := make(map[string]bool, len(next.names))
	for _, n := range next.names {
		asked[n] = true
		if _, ok := slices.BinarySearch(want, n); !ok {
			ch.removed = append(ch.removed, n)
		}
	}
	for _, n := range want {
		if !asked[n] {
			ch.added = append(ch.added, n)
		}
	}
	if len(ch.added) == 0 && len(ch.removed) == 0 {
		return nil
	}
	dropped := make(map[string]string)
	c.mu.Lock()
	next.names = want
	for _, n := range ch.removed {
		if v, ok := next.have[n]; ok {
			dropped[n] = v
		}
		delete(next.have, n)
		delete(next.why, n)
	}
	c.mu.Unlock()
	for n, v := range dropped {
		c.f.versionDropped(next.typeURL, n, v)
	}
	return []followed{ch}
}
