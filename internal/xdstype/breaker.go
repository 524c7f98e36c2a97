package xdstype

import (
	"strconv"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	statuspb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/protobuf/types/known/anypb"
)

// A relay's NACK-breaker NACK, as relays above recognise it. When a
// relay's NACK breaker holds versions (delivery.nack_breaker), it NACKs
// its origin with an error_detail whose details carry a
// google.rpc.ErrorInfo of BreakerDomain and BreakerReason: its metadata
// maps each held resource's name (as the relay asked its origin for it)
// to the held version (the relay's content version, the same on every
// relay), and BreakerClientsKey to how many distinct clients NACKed. A
// relay above that serves it counts that NACK as enough to trip its own
// breaker on those versions, so the top of a tree, and its origin, hear
// of it.
const (
	BreakerDomain     = "xds-relay"
	BreakerReason     = "NACK_BREAKER_TRIPPED"
	BreakerClientsKey = "xds-relay/clients"
	// MaxBreakerVersions bounds the versions one breaker detail names.
	MaxBreakerVersions = 16
)

// BreakerDetail returns st with the breaker's ErrorInfo added to its
// details: versions (name → version, at most MaxBreakerVersions kept) and
// the number of clients that NACKed.
func BreakerDetail(st *statuspb.Status, versions map[string]string, clients int) *statuspb.Status {
	md := make(map[string]string, min(len(versions), MaxBreakerVersions)+1)
	for n, v := range versions {
		if len(md) == MaxBreakerVersions {
			break
		}
		md[n] = v
	}
	md[BreakerClientsKey] = strconv.Itoa(clients)
	info, err := anypb.New(&errdetails.ErrorInfo{Reason: BreakerReason, Domain: BreakerDomain, Metadata: md})
	if err != nil {
		return st // an ErrorInfo always marshals
	}
	st.Details = append(st.Details, info)
	return st
}

// BreakerVersions returns the versions a relay's breaker NACK carries
// (name → version), and whether st is one.
func BreakerVersions(st *statuspb.Status) (map[string]string, bool) {
	for _, d := range st.GetDetails() {
		var info errdetails.ErrorInfo
		if d.MessageIs(&info) && d.UnmarshalTo(&info) == nil && info.GetDomain() == BreakerDomain && info.GetReason() == BreakerReason {
			out := make(map[string]string, len(info.GetMetadata()))
			for n, v := range info.GetMetadata() {
				if n != BreakerClientsKey && len(out) < MaxBreakerVersions {
					out[n] = v
				}
			}
			return out, true
		}
	}
	return nil, false
}
