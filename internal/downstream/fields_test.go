package downstream

import (
	"context"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	endpointv3s "github.com/envoyproxy/go-control-plane/envoy/service/endpoint/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/xds-relay/xds-relay/internal/cache"
	"github.com/xds-relay/xds-relay/internal/xdstype"
)

func trace(id string) *corev3.Metadata {
	return &corev3.Metadata{FilterMetadata: map[string]*structpb.Struct{
		"trace": {Fields: map[string]*structpb.Value{"id": structpb.NewStringValue(id)}},
	}}
}

// fieldsRes is a revision carrying the origin's wrapper fields.
func fieldsRes(typeURL, name, version string, aliases []string, md *corev3.Metadata, cc *discoveryv3.Resource_CacheControl) *cache.Resource {
	r := res(typeURL, name, version)
	r.Aliases, r.Metadata, r.CacheControl = aliases, md, cc
	return r
}

// dfres is the delta Resource a client is sent for r (with its fields).
func dfres(name string, r *cache.Resource) *discoveryv3.Resource {
	return &discoveryv3.Resource{Name: name, Version: cache.RevisionVersion(r), Resource: r.Body, Ttl: r.TTL,
		Aliases: r.Aliases, Metadata: r.Metadata, CacheControl: r.CacheControl}
}

// TestDeltaPassesResourceFields: aliases, metadata and cache_control reach
// a delta client as the origin sent them; a change of metadata alone is a
// new version, sent.
func TestDeltaPassesResourceFields(t *testing.T) {
	e := newEnv(t, 0)
	n := xdstp(edsType, "f1")
	r1 := fieldsRes(edsType, n, "1", []string{"other-name"}, trace("t1"), &discoveryv3.Resource_CacheControl{})
	e.cache.set(key(edsType, n), r1)
	c := e.delta()
	c.Send(&discoveryv3.DeltaDiscoveryRequest{Node: testNode, TypeUrl: edsType, ResourceNamesSubscribe: []string{n}})
	got := c.Recv()
	checkDelta(t, deltaResp(edsType, nil, dfres(n, r1)), got)
	c.Send(ack(edsType, got))

	r2 := fieldsRes(edsType, n, "1", []string{"other-name"}, trace("t2"), &discoveryv3.Resource_CacheControl{})
	e.cache.set(key(edsType, n), r2)
	got = c.Recv()
	checkDelta(t, deltaResp(edsType, nil, dfres(n, r2)), got)
	if got.GetResources()[0].GetVersion() == cache.RevisionVersion(r1) {
		t.Errorf("a metadata-only change kept version %s", cache.RevisionVersion(r1))
	}
}

// wrapClients are SotW clients by what they take in the Resource wrapper:
// wrapped, the resources a wrapper is for.
var wrapClients = []struct {
	name    string
	node    *corev3.Node
	wrapped bool
}{
	{name: "resource-in-sotw", node: wrapperNode, wrapped: true},
	{name: "ttl feature", node: ttlNode, wrapped: true},
	{name: "no feature", node: testNode},
}

// TestSotWWrapsResourceFields: a SotW client that takes the Resource
// wrapper gets a resource with fields in it; one that advertised neither
// feature gets the bare body.
func TestSotWWrapsResourceFields(t *testing.T) {
	for _, tc := range wrapClients {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, 0)
			n := xdstp(edsType, "f1")
			r := fieldsRes(edsType, n, "1", []string{"al"}, trace("t1"), nil)
			e.cache.set(key(edsType, n), r)
			c := e.sotw()
			c.Send(&discoveryv3.DiscoveryRequest{Node: tc.node, TypeUrl: edsType, ResourceNames: []string{n}})
			want := r.Body
			if tc.wrapped {
				want = wrap(t, dfres(n, r))
			}
			checkSotW(t, sotwResp(edsType, "1", want), c.Recv())
		})
	}
}

const vhType = resourcev3.VirtualHostType

// structType is a type an operator lists whose message has no name field.
const structType = "type.googleapis.com/google.protobuf.Struct"

// TestSotWWrapsNamelessTypes: a resource of a type whose message carries
// no name (xdstype.Named) goes to a SotW client that takes the Resource
// wrapper in it, named, even without fields or a TTL: bare, the client
// could not tell which it is. A client that does not take the wrapper
// gets it bare, as before. The wrapped entry is shared by every client.
func TestSotWWrapsNamelessTypes(t *testing.T) {
	for _, tc := range wrapClients {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, 0)
			if err := e.srv.SetResolver(NewResolver([]string{authority}, legacyMatcher{}).
				CarryTypes(map[string][]string{authority: {structType}})); err != nil {
				t.Fatal(err)
			}
			n := "xdstp://" + authority + "/google.protobuf.Struct/s1"
			r := e.put(structType, n, "1")
			for range 2 { // a second client shares the first one's entry
				c := e.sotw()
				c.Send(&discoveryv3.DiscoveryRequest{Node: tc.node, TypeUrl: structType, ResourceNames: []string{n}})
				want := r.Body
				if tc.wrapped {
					want = wrap(t, dfres(n, r))
				}
				checkSotW(t, sotwResp(structType, "1", want), c.Recv())
			}
		})
	}
}

// wrapperNode takes the SotW Resource wrapper, without TTLs.
var wrapperNode = &corev3.Node{Id: "grpc-like", Cluster: "c1", ClientFeatures: []string{xdstype.FeatureResourceInSotW}}

// TestDeltaAliasSubscription: a VHDS client subscribes by alias
// (routeconfig/domain); it is sent the virtual host under its own name,
// with its aliases, and its changes; when the origin's revision no longer
// lists the alias the client is told the resource is gone. Another client
// unsubscribes by the resource's own name.
func TestDeltaAliasSubscription(t *testing.T) {
	e := newEnv(t, 0)
	const alias, own = "rc/www.example.com", "rc/vh1"
	r1 := fieldsRes(vhType, own, "1", []string{alias}, nil, nil)
	e.cache.set(key(vhType, own), r1)

	c := e.delta()
	c.Send(&discoveryv3.DeltaDiscoveryRequest{Node: testNode, TypeUrl: vhType, ResourceNamesSubscribe: []string{alias}})
	got := c.Recv()
	checkDelta(t, deltaResp(vhType, nil, dfres(own, r1)), got)
	c.Send(ack(vhType, got))

	other := e.delta()
	other.Send(&discoveryv3.DeltaDiscoveryRequest{Node: testNode, TypeUrl: vhType, ResourceNamesSubscribe: []string{alias}})
	checkDelta(t, deltaResp(vhType, nil, dfres(own, r1)), other.Recv())
	other.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: vhType, ResourceNamesUnsubscribe: []string{own}})
	e.syncDelta(other)

	r2 := fieldsRes(vhType, own, "1", []string{alias}, trace("t2"), nil)
	e.cache.set(key(vhType, own), r2)
	got = c.Recv()
	checkDelta(t, deltaResp(vhType, nil, dfres(own, r2)), got)
	c.Send(ack(vhType, got))
	other.None() // unsubscribed by the resource's own name

	e.cache.set(key(vhType, own), fieldsRes(vhType, own, "2", []string{"rc/elsewhere.example.com"}, nil, nil))
	got = c.Recv()
	// The alias no longer leads to rc/vh1 (and reads as the origin left
	// it: the test's subscriber answered it as absent).
	checkDelta(t, deltaResp(vhType, []string{own, alias}), got)
}

// TestDeltaDoNotCacheLateClient: a client that subscribes to a cached
// do_not_cache resource is not answered from cache: it waits for the
// origin's fresh copy, which goes to it and not to the client that holds
// it already.
func TestDeltaDoNotCacheLateClient(t *testing.T) {
	e := newEnv(t, 0)
	n := xdstp(edsType, "dnc")
	dnc := &discoveryv3.Resource_CacheControl{DoNotCache: true}
	r := fieldsRes(edsType, n, "1", nil, nil, dnc)
	first := e.delta()
	first.Send(&discoveryv3.DeltaDiscoveryRequest{Node: testNode, TypeUrl: edsType, ResourceNamesSubscribe: []string{n}})
	got := first.Recv() // the test's subscriber answers at once: absent
	checkDelta(t, deltaResp(edsType, []string{n}), got)
	first.Send(ack(edsType, got))
	// Put while watched: a do_not_cache revision nobody watches is dropped.
	e.cache.set(key(edsType, n), r)
	got = first.Recv()
	checkDelta(t, deltaResp(edsType, nil, dfres(n, r)), got)
	first.Send(ack(edsType, got))

	late := e.delta()
	late.Send(&discoveryv3.DeltaDiscoveryRequest{Node: testNode, TypeUrl: edsType, ResourceNamesSubscribe: []string{n}})
	e.syncDelta(late) // handled, and nothing of n came before the sync's answer

	fresh := fieldsRes(edsType, n, "1", nil, nil, dnc) // the origin's answer, unchanged
	e.cache.set(key(edsType, n), fresh)
	checkDelta(t, deltaResp(edsType, nil, dfres(n, r)), late.Recv())
	first.None()
}

// TestSotWAliasNotAnswered: aliases are a delta matter; a SotW client
// asking for a name that only an alias leads to is sent nothing for it
// (never another resource under the name it asked).
func TestSotWAliasNotAnswered(t *testing.T) {
	e := newEnv(t, 0)
	const alias, own = "rc/www.example.com", "rc/vh1"
	e.cache.set(key(vhType, own), fieldsRes(vhType, own, "1", []string{alias}, nil, nil))
	c := e.sotw()
	c.Send(&discoveryv3.DiscoveryRequest{Node: testNode, TypeUrl: vhType, ResourceNames: []string{alias}})
	e.syncSotW(c) // the sync's answer comes first: nothing was sent for the alias
	c.None()
}

// TestFetchAliasNotAnswered: a unary Fetch (and REST, which shares it) is
// not answered by alias, as SotW streams are not: the resource an alias
// leads to may be another authority's, checked only on delta streams.
// Its own name is answered.
func TestFetchAliasNotAnswered(t *testing.T) {
	e := newEnv(t, 0)
	const alias, own = "cla/alias", "cla/own"
	r := fieldsRes(edsType, own, "1", []string{alias}, nil, nil)
	e.cache.set(key(edsType, own), r)
	c := endpointv3s.NewEndpointDiscoveryServiceClient(e.conn)
	got, err := c.FetchEndpoints(context.Background(), &discoveryv3.DiscoveryRequest{Node: testNode, ResourceNames: []string{alias}})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.GetResources()) != 0 {
		t.Errorf("Fetch of an alias got %d resources, want none", len(got.GetResources()))
	}
	got, err = c.FetchEndpoints(context.Background(), &discoveryv3.DiscoveryRequest{Node: testNode, ResourceNames: []string{own}})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.GetResources()) != 1 {
		t.Errorf("Fetch of the resource's own name got %d resources, want 1", len(got.GetResources()))
	}
}
