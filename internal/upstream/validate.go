package upstream

import (
	"errors"
	"fmt"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	statuspb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/xds-relay/xds-relay/internal/cache"
	"github.com/xds-relay/xds-relay/internal/xdstype"
)

// rejectf builds a NACK reason.
func rejectf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{errRejected}, args...)...)
}

// The reason label values of xds_relay_upstream_nacks_total.
const (
	nackInvalid        = "invalid"         // duplicate names, wrong type, undecodable, bad names; resources refused (nack.go)
	nackOtherAuthority = "other_authority" // names another authority (authority.go)
)

// rejected counts and logs NACK reason err of a response of type t, and
// returns the error_detail to send the origin.
func (l *link) rejected(t, nonce string, err error) *statuspb.Status {
	other := errors.Is(err, errOtherAuthority)
	reason := nackInvalid
	if other {
		reason = nackOtherAuthority
	}
	l.mgr.metrics.nacks.WithLabelValues(xdstype.Label(t), reason).Inc()
	l.logRejected(t, nonce, err, other)
	return &statuspb.Status{Code: int32(codes.InvalidArgument), Message: err.Error()}
}

// decode unmarshals a once to validate it. A type the process does not
// know (xdstype registers the resource types) is not validated: it returns
// (nil, nil).
func decode(a *anypb.Any) (proto.Message, error) {
	mt, err := protoregistry.GlobalTypes.FindMessageByURL(a.GetTypeUrl())
	if err != nil {
		return nil, nil
	}
	msg := mt.New().Interface()
	if err := proto.Unmarshal(a.GetValue(), msg); err != nil {
		return nil, err
	}
	return msg, nil
}

// names tracks canonical names in one response to reject duplicates.
type names map[string]string

func (n names) add(name string) (string, error) {
	c, err := cache.CanonicalName(name)
	if err != nil {
		return "", rejectf("resource name %q is not valid: %v", name, err)
	}
	if prev, dup := n[c]; dup {
		if prev == name {
			return "", rejectf("resource %q appears more than once", name)
		}
		return "", rejectf("resources %q and %q are the same resource", prev, name)
	}
	n[c] = name
	return c, nil
}

// deltaUpdate validates a delta response and turns it into a cache update.
func deltaUpdate(id cache.LinkID, r *discoveryv3.DeltaDiscoveryResponse, now time.Time) (cache.Update, error) {
	u := cache.Update{Link: id, TypeURL: r.GetTypeUrl(), Arrived: now}
	seen := names{}
	for i, res := range r.GetResources() {
		if res.GetName() == "" {
			return u, rejectf("resources[%d] has no name", i)
		}
		if _, err := seen.add(res.GetName()); err != nil {
			return u, err
		}
		if err := ownedResource(id, res.GetName(), res.GetAliases()); err != nil {
			return u, err
		}
		cr := &cache.Resource{Name: res.GetName(), OriginVersion: res.GetVersion(), TTL: res.GetTtl(), Arrived: now}
		keepFields(cr, res)
		if res.GetResource() == nil {
			cr.Heartbeat = true
			u.Resources = append(u.Resources, cr)
			continue
		}
		if got := res.GetResource().GetTypeUrl(); got != r.GetTypeUrl() {
			return u, rejectf("resource %q has type %s, response type_url is %s", res.GetName(), got, r.GetTypeUrl())
		}
		if _, err := decode(res.GetResource()); err != nil {
			return u, rejectf("resource %q cannot be decoded: %v", res.GetName(), err)
		}
		cr.Body = res.GetResource()
		u.Resources = append(u.Resources, cr)
	}
	for _, name := range r.GetRemovedResources() {
		c, err := cache.CanonicalName(name)
		if err != nil {
			return u, rejectf("removed resource name %q is not valid: %v", name, err)
		}
		if err := ownedName(id, "removed resource", name); err != nil {
			return u, err
		}
		u.Removed = append(u.Removed, c)
	}
	return resourceErrors(id, u, r.GetResourceErrors())
}

// resourceErrors adds a response's resource_errors (xRFC TP3) to u, each
// under its canonical name ("" and "*" are the Wildcard). A NOT_FOUND is
// also a removal: the spec makes it one, and what a response answers
// (answered.go) counts it as such.
func resourceErrors(id cache.LinkID, u cache.Update, errs []*discoveryv3.ResourceError) (cache.Update, error) {
	for i, re := range errs {
		name := re.GetResourceName().GetName()
		if re.GetErrorDetail() == nil {
			return u, rejectf("resource_errors[%d] (%q) has no error_detail", i, name)
		}
		c := cache.Wildcard
		if name != "" {
			var err error
			if c, err = cache.CanonicalName(name); err != nil {
				return u, rejectf("resource_errors[%d] name %q is not valid: %v", i, name, err)
			}
			if err := ownedName(id, fmt.Sprintf("resource_errors[%d] name", i), name); err != nil {
				return u, err
			}
		}
		u.Errors = append(u.Errors, cache.ResourceError{Name: c, Detail: re.GetErrorDetail()})
		if codes.Code(re.GetErrorDetail().GetCode()) == codes.NotFound {
			u.Removed = append(u.Removed, c)
		}
	}
	return u, nil
}

// sotwUpdate validates a SotW response and turns it into a cache update.
// Resources may be wrapped in envoy.service.discovery.v3.Resource (TTL,
// heartbeats, aliases, metadata, cache control); the wrapper is removed,
// its fields kept.
func sotwUpdate(id cache.LinkID, r *discoveryv3.DiscoveryResponse, now time.Time) (cache.Update, error) {
	u := cache.Update{Link: id, TypeURL: r.GetTypeUrl(), Arrived: now}
	seen := names{}
	for i, a := range r.GetResources() {
		// The response's version_info is the origin's only version of each
		// resource; whether one changed is the cache's call, by its bytes.
		cr := &cache.Resource{OriginVersion: r.GetVersionInfo(), Arrived: now, Body: a}
		if a.GetTypeUrl() == xdstype.ResourceWrapperURL {
			var w discoveryv3.Resource
			if err := proto.Unmarshal(a.GetValue(), &w); err != nil {
				return u, rejectf("resources[%d]: Resource wrapper cannot be decoded: %v", i, err)
			}
			cr.Name, cr.TTL, cr.Body = w.GetName(), w.GetTtl(), w.GetResource()
			keepFields(cr, &w)
			if cr.Body == nil {
				if cr.Name == "" {
					return u, rejectf("resources[%d]: heartbeat without a name", i)
				}
				if _, err := seen.add(cr.Name); err != nil {
					return u, err
				}
				if err := ownedResource(id, cr.Name, w.GetAliases()); err != nil {
					return u, err
				}
				cr.Heartbeat = true
				u.Resources = append(u.Resources, cr)
				continue
			}
		}
		if got := cr.Body.GetTypeUrl(); got != r.GetTypeUrl() {
			return u, rejectf("resources[%d] has type %s, response type_url is %s", i, got, r.GetTypeUrl())
		}
		msg, err := decode(cr.Body)
		if err != nil {
			return u, rejectf("resources[%d] cannot be decoded: %v", i, err)
		}
		if msg == nil && cr.Name == "" {
			// A type the relay cannot decode (an operator's own): its name
			// is only in the Resource wrapper, or in a delta response.
			return u, rejectf("resources[%d]: type %s cannot be decoded here, so its name must come in the Resource wrapper (or use transport delta)", i, cr.Body.GetTypeUrl())
		}
		if name := cachev3.GetResourceName(msg); name != "" {
			if cr.Name != "" && cr.Name != name {
				return u, rejectf("resources[%d]: wrapper names %q, resource names %q", i, cr.Name, name)
			}
			cr.Name = name
		}
		if cr.Name == "" {
			return u, rejectf("resources[%d] has no name", i)
		}
		if _, err := seen.add(cr.Name); err != nil {
			return u, err
		}
		if err := ownedResource(id, cr.Name, cr.Aliases); err != nil {
			return u, err
		}
		u.Resources = append(u.Resources, cr)
	}
	return resourceErrors(id, u, r.GetResourceErrors())
}
