package downstream

import (
	"sort"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	statuspb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"

	"github.com/xds-relay/xds-relay/internal/cache"
	"github.com/xds-relay/xds-relay/internal/xdstype"
)

// Resource errors (xRFC TP3 resource_errors) as clients are sent them.
//
// A client is sent an error for a name it asked for, under the name as it
// spelled it: a name subscribed directly, a collection (a glob, the
// wildcard: "*" or, for the legacy wildcard, ""), or a member of one of
// its collections that it has. An error is part of the response of the
// change that brought it (diff.go), never a response of its own, and goes
// out once: the client remembers it until it is sent the resource (TP3),
// which the relay does as soon as the error is gone from the cache, even
// when the bytes did not change.
//
// What is sent:
//   - the origin's errors, from the cache (cache.Lookup), whatever their
//     code; a transient one beside the cached revision;
//   - the relay's UNAVAILABLE for a pending name while no origin of its
//     authority answers (cache.SetLinkError);
//   - NOT_FOUND for a name the client asked for that does not exist: the
//     origin's status when it sent one, otherwise, over SotW (which has no
//     removed_resources), the relay's own (relayNotFound). Over delta
//     removed_resources says it, which TP3 makes the same as NOT_FOUND.
//   - NOT_FOUND saying why the relay cannot serve a name (unknownAuthority,
//     typeNotCarried), over both variants (delta: beside removed_resources).

// The relay's own statuses: shared by every client, never modified.
var (
	relayNotFound = &statuspb.Status{Code: int32(codes.NotFound),
		Message: "xds-relay: the resource does not exist"}
	unknownAuthority = &statuspb.Status{Code: int32(codes.NotFound),
		Message: "xds-relay: no configured authority serves this name"}
	typeNotCarried = &statuspb.Status{Code: int32(codes.NotFound),
		Message: "xds-relay: the name's authority does not carry this type"}
)

// unknownStatus is what a name that cannot be served is told, by why.
func unknownStatus(err error) *statuspb.Status {
	switch {
	case isErr(err, ErrTypeNotCarried):
		return typeNotCarried
	case isErr(err, ErrUnknownAuthority):
		return unknownAuthority
	}
	return relayNotFound // denied: as if it did not exist
}

// resErr is one resource error for a client.
type resErr struct {
	name   string // as the client knows it
	detail *statuspb.Status
}

// isNotFound reports whether st is a NOT_FOUND.
func isNotFound(st *statuspb.Status) bool { return codes.Code(st.GetCode()) == codes.NotFound }

// notFoundLocked is the status a name the client asked for is told it
// does not exist with: the origin's NOT_FOUND when the cache has one;
// otherwise relay over SotW, nil over delta (see above).
func (d *diff) notFoundLocked(origin, relay *statuspb.Status) *statuspb.Status {
	if origin != nil && isNotFound(origin) {
		return origin
	}
	if d.variant == xdstype.SotW {
		return relay
	}
	return nil
}

// errorLocked tells the client err for name (wire: the name it is sent
// under), unless it was told that very error last.
func (d *diff) errorLocked(name, wire string, err *statuspb.Status) {
	h, ok := d.ts.sent.get(name)
	if ok && h.err == err {
		return
	}
	h.err = err
	d.ts.sent.set(name, h)
	d.errors = append(d.errors, resErr{name: wire, detail: err})
	d.changed = true
}

// sentError reports whether the client has an error for name that the
// cache no longer has (err nil): then the resource is sent again, which
// clears it on the client.
func (d *diff) sentError(name string, err *statuspb.Status) bool {
	h, ok := d.ts.sent.get(name)
	return ok && h.err != nil && err == nil
}

// collectionWire is the name a collection's error is sent under: as the
// client asked, "" for the legacy wildcard (asked for by no name).
func collectionWire(ts *typeState, name string) string {
	if name == cache.Wildcard && !ts.explicit {
		return ""
	}
	return name
}

// wireErrors builds the resource_errors of a response, sorted by name.
func wireErrors(errs []resErr) []*discoveryv3.ResourceError {
	if len(errs) == 0 {
		return nil
	}
	sort.Slice(errs, func(i, j int) bool { return errs[i].name < errs[j].name })
	out := make([]*discoveryv3.ResourceError, len(errs))
	for i, e := range errs {
		out[i] = &discoveryv3.ResourceError{
			ResourceName: &discoveryv3.ResourceName{Name: e.name},
			ErrorDetail:  e.detail,
		}
	}
	return out
}

// countErrors counts the resource errors of a response sent.
func (m *metrics) countErrors(typeURL string, errs []*discoveryv3.ResourceError) {
	for _, e := range errs {
		m.resourceErrors.WithLabelValues(typeLabel(typeURL), cache.CodeLabel(e.GetErrorDetail())).Inc()
	}
}
