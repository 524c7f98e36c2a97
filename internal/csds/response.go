package csds

import (
	adminv3 "github.com/envoyproxy/go-control-plane/envoy/admin/v3"
	statusv3 "github.com/envoyproxy/go-control-plane/envoy/service/status/v3"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/xds-relay/xds-relay/internal/downstream"
)

// response turns a report into a ClientStatusResponse: one ClientConfig
// per connected client stream (a client with two streams, e.g. SotW
// per-type ones, has two), with the node the relay keeps of it and one
// generic_xds_config per resource. Resource contents (xds_config) are
// never included: see the package doc.
func response(rep downstream.StatusReport) *statusv3.ClientStatusResponse {
	out := &statusv3.ClientStatusResponse{Config: make([]*statusv3.ClientConfig, 0, len(rep.Clients))}
	for _, c := range rep.Clients {
		cc := &statusv3.ClientConfig{
			// Shared with the session, never modified: marshaling reads it.
			Node:              c.Node,
			GenericXdsConfigs: make([]*statusv3.ClientConfig_GenericXdsConfig, 0, len(c.Resources)),
		}
		for i := range c.Resources {
			cc.GenericXdsConfigs = append(cc.GenericXdsConfigs, genericConfig(&c.Resources[i]))
		}
		out.Config = append(out.Config, cc)
	}
	return out
}

// genericConfig is one resource's entry.
func genericConfig(r *downstream.ResourceStatus) *statusv3.ClientConfig_GenericXdsConfig {
	g := &statusv3.ClientConfig_GenericXdsConfig{TypeUrl: r.TypeURL, Name: r.Name, VersionInfo: r.Version}
	if !r.Updated.IsZero() {
		g.LastUpdated = timestamppb.New(r.Updated)
	}
	g.ConfigStatus, g.ClientStatus = statuses(r)
	if r.State == downstream.ResourceNacked && r.Nack != nil {
		g.ErrorState = &adminv3.UpdateFailureState{
			LastUpdateAttempt: timestamppb.New(r.Nack.At),
			Details:           r.Nack.Message,
			VersionInfo:       r.Version,
		}
	}
	return g
}

// statuses maps where a resource stands to the two CSDS enums:
//
//	requested, nothing sent     NOT_SENT  REQUESTED
//	sent, not answered yet      STALE     UNKNOWN
//	ACKed                       SYNCED    ACKED (DOES_NOT_EXIST when it was told so)
//	ACKed, newer state owed     STALE     ACKED (DOES_NOT_EXIST)
//	NACKed                      ERROR     NACKED
func statuses(r *downstream.ResourceStatus) (statusv3.ConfigStatus, adminv3.ClientResourceStatus) {
	switch r.State {
	case downstream.ResourceRequested:
		return statusv3.ConfigStatus_NOT_SENT, adminv3.ClientResourceStatus_REQUESTED
	case downstream.ResourceSent:
		return statusv3.ConfigStatus_STALE, adminv3.ClientResourceStatus_UNKNOWN
	case downstream.ResourceNacked:
		return statusv3.ConfigStatus_ERROR, adminv3.ClientResourceStatus_NACKED
	case downstream.ResourceAcked:
		cs := adminv3.ClientResourceStatus_ACKED
		if r.Absent {
			cs = adminv3.ClientResourceStatus_DOES_NOT_EXIST
		}
		if r.Pending {
			return statusv3.ConfigStatus_STALE, cs
		}
		return statusv3.ConfigStatus_SYNCED, cs
	}
	return statusv3.ConfigStatus_UNKNOWN, adminv3.ClientResourceStatus_UNKNOWN
}
