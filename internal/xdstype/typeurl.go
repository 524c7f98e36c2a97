package xdstype

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// ResourceWrapperURL is the type URL of envoy.service.discovery.v3.Resource,
// the wrapper a SotW response uses for a resource that carries a TTL (or
// for a heartbeat, without the resource).
const ResourceWrapperURL = resourcev3.APITypePrefix + "envoy.service.discovery.v3.Resource"

// LbEndpointType is the type URL of LEDS resources
// (envoy.config.endpoint.v3.LbEndpoint), served through xdstp glob
// collections; go-control-plane's resource package has no constant for it.
const LbEndpointType = resourcev3.APITypePrefix + "envoy.config.endpoint.v3.LbEndpoint"

// FeatureResourceTTL is the client feature (node.client_features) of an
// xDS client that takes per-resource TTLs and heartbeats, over SotW in the
// Resource wrapper (Envoy's API docs, "Well Known Client Features"). The
// relay follows it downstream and advertises it upstream.
const FeatureResourceTTL = "xds.config.supports-resource-ttl"

// FeatureResourceInSotW is the client feature of an xDS client that
// unwraps the Resource wrapper in SotW responses (gRPC's clients, Envoy).
const FeatureResourceInSotW = "xds.config.resource-in-sotw"

// OtherLabel is the type label of every type URL that is not a known xDS
// resource type.
const OtherLabel = "other"

// known are the types a type label names: the resource types the relay
// serves (see docs/protocol.md, "Served variants and types").
var known = map[string]bool{
	resourcev3.ListenerType: true, resourcev3.RouteType: true, resourcev3.ScopedRouteType: true,
	resourcev3.VirtualHostType: true, resourcev3.ClusterType: true, resourcev3.EndpointType: true,
	resourcev3.SecretType: true, resourcev3.RuntimeType: true, resourcev3.ExtensionConfigType: true,
	LbEndpointType: true,
}

// knownURLs maps each served type URL to itself: the one copy Intern
// gives.
var knownURLs = func() map[string]string {
	m := make(map[string]string, len(known))
	for t := range known {
		m[t] = t
	}
	return m
}()

// listed are the other type URLs an operator listed (authorities[].types,
// through List), each to itself: they are labelled by their own name too.
// The set only grows, and only from configuration, so it stays bounded
// whatever clients and origins send. Copied on write: Label, on every
// metric update, reads it without a lock.
var (
	listed   atomic.Pointer[map[string]string]
	listedMu sync.Mutex // serialises List's copies
)

// List adds typeURLs, each one CheckTypeURL accepts, to the types that
// Label names: the types an operator configured an authority to carry.
func List(typeURLs ...string) {
	listedMu.Lock()
	defer listedMu.Unlock()
	next := make(map[string]string)
	if cur := listed.Load(); cur != nil {
		maps.Copy(next, *cur)
	}
	for _, t := range typeURLs {
		if !known[t] && CheckTypeURL(t) == nil {
			next[t] = t
		}
	}
	listed.Store(&next)
}

func isListed(typeURL string) bool {
	cur := listed.Load()
	if cur == nil {
		return false
	}
	_, ok := (*cur)[typeURL]
	return ok
}

// Intern returns this package's copy of typeURL when it is a served or
// listed type, else typeURL: a client stream keeps its type URLs, and a
// request's are its own allocations.
func Intern(typeURL string) string {
	if t, ok := knownURLs[typeURL]; ok {
		return t
	}
	if cur := listed.Load(); cur != nil {
		if t, ok := (*cur)[typeURL]; ok {
			return t
		}
	}
	return typeURL
}

// Label is the metric label of a type URL: a served or listed type without
// "type.googleapis.com/" ("envoy.config.cluster.v3.Cluster"), anything
// else OtherLabel. ADS carries any type URL a client or an origin chooses;
// the label set stays bounded whatever they send.
func Label(typeURL string) string {
	if !known[typeURL] && !isListed(typeURL) {
		return OtherLabel
	}
	return strings.TrimPrefix(typeURL, resourcev3.APITypePrefix)
}

// IsServed reports whether typeURL is one of the resource types the relay
// serves on ADS and on its own per-type service.
func IsServed(typeURL string) bool { return known[typeURL] }

// Served returns the type URLs of the resource types the relay serves,
// sorted.
func Served() []string {
	out := make([]string, 0, len(known))
	for t := range known {
		out = append(out, t)
	}
	slices.Sort(out)
	return out
}

// CheckTypeURL returns an error unless typeURL has the form an operator
// may list for an authority: "type.googleapis.com/" and a protobuf message
// name ("mesh.example.v1.Workload"). The message need not be known to the
// relay: it never decodes what it carries.
func CheckTypeURL(typeURL string) error {
	name, ok := strings.CutPrefix(typeURL, resourcev3.APITypePrefix)
	if !ok {
		return fmt.Errorf("%q is not a type URL: it must start with %q", typeURL, resourcev3.APITypePrefix)
	}
	if !protoreflect.FullName(name).IsValid() || !strings.Contains(name, ".") {
		return fmt.Errorf("%q is not a type URL: %q is not a full protobuf message name (package.Message)", typeURL, name)
	}
	if typeURL == ResourceWrapperURL {
		return fmt.Errorf("%q is the SotW resource wrapper, not a resource type", typeURL)
	}
	return nil
}

// Labels returns every value Label can return: the served and listed
// types' labels, sorted, then OtherLabel. Metrics create their type series from it at
// start, so each exists at zero before the first event.
func Labels() []string {
	out := make([]string, 0, len(known)+1)
	for _, t := range Served() {
		out = append(out, Label(t))
	}
	if cur := listed.Load(); cur != nil {
		for t := range *cur {
			out = append(out, Label(t))
		}
	}
	slices.Sort(out)
	return append(out, OtherLabel)
}
