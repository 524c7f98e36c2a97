package integration

import (
	"maps"
	"slices"
	"testing"

	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"

	"github.com/xds-relay/xds-relay/config"
)

// sotwUpstream makes the relay speak SotW to dsAuthority's origins.
func sotwUpstream(cfg *config.Config) { cfg.Authorities[0].Transport = config.TransportSotW }

// edsSnapshot is a snapshot of the ClusterLoadAssignments revs.
func edsSnapshot(revs map[string]uint32) map[resource.Type][]types.Resource {
	return map[resource.Type][]types.Resource{resource.EndpointType: slices.Collect(maps.Values(clas(revs)))}
}

// TestContentVersionsSnapshotRepublish: an origin that republishes its
// whole SotW snapshot under a new version with one resource changed costs
// each client that one resource, delta and SotW clients alike (EDS is not
// a full-state type): a resource changes when its bytes do, not when the
// response's version_info does.
func TestContentVersionsSnapshotRepublish(t *testing.T) {
	const clients, resources = 3, 50
	for _, variant := range []string{"delta", "sotw"} {
		t.Run(variant+"-client", func(t *testing.T) {
			o := newSnapshotOrigin(t)
			names := endpointNames("republish", resources)
			revs := revisions(names, 1)
			o.setSnapshot("v1", edsSnapshot(revs))
			r := startRelay(t, sotwUpstream, o.addr)
			f := newFleet(t, r.XDSAddr(), variant, clients, 1)
			f.subscribe(resource.EndpointType, names...)
			f.waitHolds(resource.EndpointType, names...)
			f.settle()

			revs[names[7]] = 2
			o.setSnapshot("v2", edsSnapshot(revs))
			f.wantOneResponse(f.recvChange(), resource.EndpointType, map[string]uint32{names[7]: 2})
		})
	}
}
