package integration

import (
	"maps"
	"slices"
	"testing"

	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"

	"github.com/xds-relay/xds-relay/config"
	"github.com/xds-relay/xds-relay/internal/xdstype"
)

// sotwUpstream makes the relay speak SotW to dsAuthority's origins.
func sotwUpstream(cfg *config.Config) { cfg.Authorities[0].Transport = xdstype.TransportSotW }

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

// TestContentVersionsRelayRestart: a delta client that held resources
// through one relay resumes on a fresh relay (same config, same SotW
// origin) with initial_resource_versions and is resent nothing it holds;
// then a change of one resource costs it that one. In same-snapshot the
// fresh relay's upstream gets the very version_info the first one had; in
// republished-while-down the origin moved to a new snapshot version of the
// same content while no relay ran, so only content can tell that nothing
// changed.
func TestContentVersionsRelayRestart(t *testing.T) {
	for _, tc := range []struct {
		name      string
		republish bool // the origin moves to a new snapshot version of the same content while no relay runs
	}{
		{name: "same-snapshot"},
		{name: "republished-while-down", republish: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := newSnapshotOrigin(t)
			names := endpointNames("restart", 10)
			revs := revisions(names, 1)
			o.setSnapshot("v1", edsSnapshot(revs))

			a := startRelay(t, sotwUpstream, o.addr)
			before := newFleet(t, a.XDSAddr(), "delta", 1, 1)
			before.subscribe(resource.EndpointType, names...)
			before.waitHolds(resource.EndpointType, names...)
			before.settle()
			held := before.clients[0].versions(resource.EndpointType)
			if err := a.Close(); err != nil {
				t.Fatalf("relay A close: %v", err)
			}

			version := "v1"
			if tc.republish {
				version = "v2"
				o.setSnapshot(version, edsSnapshot(revs))
			}
			from := o.sotwRequests()
			b := startRelay(t, sotwUpstream, o.addr)
			after := newFleet(t, b.XDSAddr(), "delta", 1, 1)
			after.clients[0].resume(resource.EndpointType, held, names...)
			o.waitSotWACK(from, resource.EndpointType, version, names)
			after.wantNothingResent(after.settle(), "on a new relay")

			revs[names[3]] = 2
			o.setSnapshot("v3", edsSnapshot(revs))
			after.wantOneResponse(after.recvChange(), resource.EndpointType, map[string]uint32{names[3]: 2})
		})
	}
}

// TestContentVersionsFailover: two origins hold the same resources (SotW:
// under snapshot versions "a1" and "b7"); when the relay fails over from
// the first to the second, clients are resent nothing, and a change of
// one resource at the second costs each client that one. Both upstream
// transports.
func TestContentVersionsFailover(t *testing.T) {
	const clients = 20
	for _, tc := range []struct {
		name      string
		transport string
		origin    func(t *testing.T, version string, revs map[string]uint32) *gcpOrigin
		set       func(o *gcpOrigin, version string, revs map[string]uint32)
		synced    func(o *gcpOrigin, version string, names []string) // the relay's stream to o is up and has its answer
	}{
		{
			name: "delta", transport: xdstype.TransportDelta,
			// LinearCache origins: their delta versions are hashes of the
			// bytes, so equal on both (version is unused).
			origin: func(t *testing.T, version string, revs map[string]uint32) *gcpOrigin {
				o := newGCPOrigin(t)
				o.setAll(resource.EndpointType, clas(revs))
				return o
			},
			set: func(o *gcpOrigin, _ string, revs map[string]uint32) { o.setAll(resource.EndpointType, clas(revs)) },
			synced: func(o *gcpOrigin, _ string, names []string) {
				o.waitDeltaSubscribed(0, resource.EndpointType, names)
			},
		},
		{
			name: "sotw", transport: xdstype.TransportSotW,
			origin: func(t *testing.T, version string, revs map[string]uint32) *gcpOrigin {
				o := newSnapshotOrigin(t)
				o.setSnapshot(version, edsSnapshot(revs))
				return o
			},
			set: func(o *gcpOrigin, version string, revs map[string]uint32) { o.setSnapshot(version, edsSnapshot(revs)) },
			synced: func(o *gcpOrigin, version string, names []string) {
				o.waitSotWACK(0, resource.EndpointType, version, names)
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			names := endpointNames("failover", 10)
			revs := revisions(names, 1)
			first, second := tc.origin(t, "a1", revs), tc.origin(t, "b7", revs)
			r := startRelay(t, func(cfg *config.Config) { cfg.Authorities[0].Transport = tc.transport }, first.addr, second.addr)
			f := newFleet(t, r.XDSAddr(), "delta", clients, 2)
			f.subscribe(resource.EndpointType, names...)
			f.waitHolds(resource.EndpointType, names...)
			f.settle()

			first.stop()
			tc.synced(second, "b7", names)
			f.wantNothingResent(f.settle(), "after failover to the second origin")

			revs[names[4]] = 2
			tc.set(second, "b8", revs)
			f.wantOneResponse(f.recvChange(), resource.EndpointType, map[string]uint32{names[4]: 2})
		})
	}
}
