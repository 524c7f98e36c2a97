package downstream

import (
	"context"
	"testing"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	endpointv3s "github.com/envoyproxy/go-control-plane/envoy/service/endpoint/v3"
	"github.com/prometheus/client_golang/prometheus/testutil"
	statuspb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/xds-relay/xds-relay/internal/cache"
)

func resourceError(name string, detail *statuspb.Status) *discoveryv3.ResourceError {
	return &discoveryv3.ResourceError{ResourceName: &discoveryv3.ResourceName{Name: name}, ErrorDetail: detail}
}

func sotwWithErrors(typeURL, version string, errs []*discoveryv3.ResourceError, rs ...*anypb.Any) *discoveryv3.DiscoveryResponse {
	r := sotwResp(typeURL, version, rs...)
	r.ResourceErrors = errs
	return r
}

func deltaWithErrors(typeURL string, removed []string, errs []*discoveryv3.ResourceError, rs ...*discoveryv3.Resource) *discoveryv3.DeltaDiscoveryResponse {
	r := deltaResp(typeURL, removed, rs...)
	r.ResourceErrors = errs
	return r
}

func errorsSent(e *env, typeURL, code string) float64 {
	return testutil.ToFloat64(e.srv.m.resourceErrors.WithLabelValues(typeLabel(typeURL), code))
}

var (
	unavailable = &statuspb.Status{Code: int32(codes.Unavailable), Message: "origin: backend down"}
	notFound    = &statuspb.Status{Code: int32(codes.NotFound), Message: "origin: no such resource"}
	denied      = &statuspb.Status{Code: int32(codes.PermissionDenied), Message: "origin: not yours"}
)

// An origin's transient error on a cached resource reaches its clients
// once, beside the revision they hold; the same bytes again are resent,
// which clears the error on the client (TP3).
func TestResourceErrorTransientThenCleared(t *testing.T) {
	e := newEnv(t, 0)
	// The client's spelling differs from the canonical one: errors go out
	// under the name as the client asked for it.
	asked := "xdstp://" + authority + "/envoy.config.endpoint.v3.ClusterLoadAssignment/e?b=2&a=1"
	k := key(edsType, asked)
	r := res(edsType, asked, "1")
	e.cache.set(k, r)

	d := e.delta()
	d.Send(&discoveryv3.DeltaDiscoveryRequest{Node: testNode, TypeUrl: edsType, ResourceNamesSubscribe: []string{asked}})
	dr := d.Recv()
	checkDelta(t, deltaResp(edsType, nil, dres(asked, r)), dr)
	d.Send(ack(edsType, dr))
	s := e.sotw()
	s.Send(&discoveryv3.DiscoveryRequest{Node: testNode, TypeUrl: edsType, ResourceNames: []string{asked}})
	sr := s.Recv()
	checkSotW(t, sotwResp(edsType, "1", r.Body), sr)
	s.Send(sotwAck(sr, asked))

	e.cache.setError(k, unavailable)
	checkDelta(t, deltaWithErrors(edsType, nil, []*discoveryv3.ResourceError{resourceError(asked, unavailable)}), d.Recv())
	checkSotW(t, sotwWithErrors(edsType, "2", []*discoveryv3.ResourceError{resourceError(asked, unavailable)}), s.Recv())

	// The same bytes again: nothing changed but the error is gone.
	e.cache.set(k, res(edsType, asked, "1"))
	checkDelta(t, deltaResp(edsType, nil, dres(asked, r)), d.Recv())
	checkSotW(t, sotwResp(edsType, "3", r.Body), s.Recv())
	if got := errorsSent(e, edsType, "unavailable"); got != 2 {
		t.Errorf("resource_errors_sent_total{code=unavailable} = %v, want 2", got)
	}
}

// A client that subscribes after the error arrived gets it from the cache
// (the origin sent it once), in its first response; a client of another
// name does not get it.
func TestResourceErrorForLateSubscriber(t *testing.T) {
	e := newEnv(t, 0)
	n := xdstp(edsType, "pending-e")
	other := xdstp(edsType, "o")
	ro := e.put(edsType, other, "1")
	first := e.delta()
	first.Send(&discoveryv3.DeltaDiscoveryRequest{Node: testNode, TypeUrl: edsType, ResourceNamesSubscribe: []string{n}})
	e.syncDelta(first) // subscribed: the error has a key to be kept under
	e.cache.setError(key(edsType, n), denied)
	checkDelta(t, deltaWithErrors(edsType, nil, []*discoveryv3.ResourceError{resourceError(n, denied)}), first.Recv())

	bystander := e.delta()
	bystander.Send(&discoveryv3.DeltaDiscoveryRequest{Node: testNode, TypeUrl: edsType, ResourceNamesSubscribe: []string{other}})
	checkDelta(t, deltaResp(edsType, nil, dres(other, ro)), bystander.Recv())

	late := e.delta()
	late.Send(&discoveryv3.DeltaDiscoveryRequest{Node: testNode, TypeUrl: edsType, ResourceNamesSubscribe: []string{n}})
	checkDelta(t, deltaWithErrors(edsType, nil, []*discoveryv3.ResourceError{resourceError(n, denied)}), late.Recv())
	lateSotW := e.sotw()
	lateSotW.Send(&discoveryv3.DiscoveryRequest{Node: testNode, TypeUrl: edsType, ResourceNames: []string{n}})
	checkSotW(t, sotwWithErrors(edsType, "1", []*discoveryv3.ResourceError{resourceError(n, denied)}), lateSotW.Recv())
	bystander.None()

	// The resource arrives: every client gets it, which clears the error.
	r := e.put(edsType, n, "1")
	checkDelta(t, deltaResp(edsType, nil, dres(n, r)), first.Recv())
	checkDelta(t, deltaResp(edsType, nil, dres(n, r)), late.Recv())
}

// The origin's NOT_FOUND is an absence: delta clients get the name in
// removed_resources with the origin's status; SotW clients the status.
func TestResourceErrorNotFound(t *testing.T) {
	for _, typeURL := range []string{edsType, ldsType} {
		t.Run(typeLabel(typeURL), func(t *testing.T) {
			e := newEnv(t, 0)
			n, kept := xdstp(typeURL, "gone"), xdstp(typeURL, "kept")
			r := e.put(typeURL, n, "1")
			rk := e.put(typeURL, kept, "1")
			d := e.delta()
			d.Send(&discoveryv3.DeltaDiscoveryRequest{Node: testNode, TypeUrl: typeURL, ResourceNamesSubscribe: []string{n, kept}})
			dr := d.Recv()
			checkDelta(t, deltaResp(typeURL, nil, dres(kept, rk), dres(n, r)), dr)
			d.Send(ack(typeURL, dr))
			s := e.sotw()
			s.Send(&discoveryv3.DiscoveryRequest{Node: testNode, TypeUrl: typeURL, ResourceNames: []string{n, kept}})
			sr := s.Recv()
			s.Send(sotwAck(sr, n, kept))

			e.cache.setError(key(typeURL, n), notFound)
			errs := []*discoveryv3.ResourceError{resourceError(n, notFound)}
			checkDelta(t, deltaWithErrors(typeURL, []string{n}, errs), d.Recv())
			if fullStateTypes[typeURL] {
				checkSotW(t, sotwWithErrors(typeURL, "2", errs, rk.Body), s.Recv())
			} else {
				checkSotW(t, sotwWithErrors(typeURL, "2", errs), s.Recv())
			}
			if read := e.cache.Lookup(nil, key(typeURL, n)); read.Res != nil || read.State != cache.StateAbsent {
				t.Errorf("cache: %v %v, want absent", read.Res, read.State)
			}
		})
	}
}

// One origin change that brings a revision and an error is one response
// per client and type, carrying both.
func TestResourceErrorSameResponseAsChange(t *testing.T) {
	e := newEnv(t, 0)
	a, b := xdstp(edsType, "a"), xdstp(edsType, "b")
	ra := e.put(edsType, a, "1")
	rb := e.put(edsType, b, "1")
	d := e.delta()
	d.Send(&discoveryv3.DeltaDiscoveryRequest{Node: testNode, TypeUrl: edsType, ResourceNamesSubscribe: []string{a, b}})
	checkDelta(t, deltaResp(edsType, nil, dres(a, ra), dres(b, rb)), d.Recv())
	ka := key(edsType, a)
	ra2 := res(edsType, a, "2")
	e.cache.Apply(cache.Update{Link: ka.Link, TypeURL: edsType, Resources: []*cache.Resource{ra2},
		Errors: []cache.ResourceError{{Name: key(edsType, b).Name, Detail: unavailable}}})
	checkDelta(t, deltaWithErrors(edsType, nil, []*discoveryv3.ResourceError{resourceError(b, unavailable)}, dres(a, ra2)), d.Recv())
	d.None()
}

// A glob's own error goes to its clients under the glob as they spelled
// it; the legacy wildcard's under "" (asked for by no name).
func TestResourceErrorOnCollections(t *testing.T) {
	e := newEnv(t, 0)
	glob := "xdstp://" + authority + "/envoy.config.endpoint.v3.ClusterLoadAssignment/pending-dir/*"
	d := e.delta()
	d.Send(&discoveryv3.DeltaDiscoveryRequest{Node: testNode, TypeUrl: edsType, ResourceNamesSubscribe: []string{glob}})
	e.syncDelta(d)
	e.cache.setError(key(edsType, glob), denied)
	checkDelta(t, deltaWithErrors(edsType, nil, []*discoveryv3.ResourceError{resourceError(glob, denied)}), d.Recv())

	w := e.sotw()
	w.Send(&discoveryv3.DiscoveryRequest{Node: testNode, TypeUrl: cdsType})
	wr := w.Recv() // the wildcard, answered empty
	w.Send(sotwAck(wr))
	e.cache.setError(cache.Key{Link: legacyStream, TypeURL: cdsType, Name: cache.Wildcard}, unavailable)
	checkSotW(t, sotwWithErrors(cdsType, "2", []*discoveryv3.ResourceError{resourceError("", unavailable)}), w.Recv())
}

// A member's error goes to a glob's clients under the member's name: at
// once to those that hold it, in the first response of a late one.
func TestResourceErrorOfMember(t *testing.T) {
	e := newEnv(t, 0)
	glob := "xdstp://" + authority + "/envoy.config.endpoint.v3.ClusterLoadAssignment/dir/*"
	m := "xdstp://" + authority + "/envoy.config.endpoint.v3.ClusterLoadAssignment/dir/m"
	r := e.put(edsType, m, "1")
	e.cache.Apply(cache.Update{Link: key(edsType, m).Link, TypeURL: edsType, Complete: []string{glob}})
	d := e.delta()
	d.Send(&discoveryv3.DeltaDiscoveryRequest{Node: testNode, TypeUrl: edsType, ResourceNamesSubscribe: []string{glob}})
	dr := d.Recv()
	checkDelta(t, deltaResp(edsType, nil, dres(m, r)), dr)
	d.Send(ack(edsType, dr))
	e.cache.setError(key(edsType, m), unavailable)
	errs := []*discoveryv3.ResourceError{resourceError(m, unavailable)}
	checkDelta(t, deltaWithErrors(edsType, nil, errs), d.Recv())

	late := e.sotw()
	late.Send(&discoveryv3.DiscoveryRequest{Node: testNode, TypeUrl: edsType, ResourceNames: []string{glob}})
	checkSotW(t, sotwWithErrors(edsType, "1", errs, r.Body), late.Recv())
	d.None()
}

// While no origin of a stream answers, its pending names get the relay's
// UNAVAILABLE; once the resource comes it is sent, and present names are
// untouched.
func TestResourceErrorStreamUnavailable(t *testing.T) {
	e := newEnv(t, 0)
	p, ok := xdstp(edsType, "pending-p"), xdstp(edsType, "ok")
	rok := e.put(edsType, ok, "1")
	s := e.sotw()
	s.Send(&discoveryv3.DiscoveryRequest{Node: testNode, TypeUrl: edsType, ResourceNames: []string{p, ok}})
	sr := s.Recv()
	checkSotW(t, sotwResp(edsType, "1", rok.Body), sr)
	s.Send(sotwAck(sr, p, ok))
	down := &statuspb.Status{Code: int32(codes.Unavailable), Message: "xds-relay: no origin answers"}
	e.cache.SetLinkError(key(edsType, p).Link, down)
	checkSotW(t, sotwWithErrors(edsType, "2", []*discoveryv3.ResourceError{resourceError(p, down)}), s.Recv())
	e.cache.SetLinkError(key(edsType, p).Link, nil)
	s.None() // cleared: nothing to say until the resource comes
	rp := e.put(edsType, p, "1")
	checkSotW(t, sotwResp(edsType, "3", rp.Body), s.Recv())
}

// Names that cannot be served are told so once over SotW, with why.
func TestResourceErrorTypeNotCarriedSotW(t *testing.T) {
	e := newEnv(t, 0)
	e.srv.currentResolver().(*NameResolver).CarryTypes(map[string][]string{authority: {ldsType}})
	n := xdstp(edsType, "e")
	s := e.sotw()
	s.Send(&discoveryv3.DiscoveryRequest{Node: testNode, TypeUrl: edsType, ResourceNames: []string{n}})
	sr := s.Recv()
	checkSotW(t, sotwWithErrors(edsType, "1", []*discoveryv3.ResourceError{resourceError(n, typeNotCarried)}), sr)
	s.Send(sotwAck(sr, n))
	s.None()
	if got := errorsSent(e, edsType, "not_found"); got != 1 {
		t.Errorf("resource_errors_sent_total{code=not_found} = %v, want 1", got)
	}
}

// Fetch (and REST, which shares it) answers with the errors of the names
// asked for: the origin's beside a revision, NOT_FOUND for a name that
// does not exist and for one no authority serves; an error that clears
// changes the version.
func TestResourceErrorFetch(t *testing.T) {
	e := newEnv(t, 0)
	n, gone := xdstp(edsType, "f"), xdstp(edsType, "gone")
	unknown := "xdstp://nowhere.example/envoy.config.endpoint.v3.ClusterLoadAssignment/x"
	r := e.put(edsType, n, "1")
	e.cache.setError(key(edsType, n), unavailable)
	c := endpointv3s.NewEndpointDiscoveryServiceClient(e.conn)
	req := &discoveryv3.DiscoveryRequest{Node: testNode, ResourceNames: []string{n, gone, unknown}}
	got, err := c.FetchEndpoints(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	checkSotW(t, sotwWithErrors(edsType, got.GetVersionInfo(), []*discoveryv3.ResourceError{
		resourceError(n, unavailable), resourceError(gone, relayNotFound), resourceError(unknown, unknownAuthority),
	}, r.Body), got)

	e.cache.set(key(edsType, n), res(edsType, n, "1"))
	again, err := c.FetchEndpoints(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if again.GetVersionInfo() == got.GetVersionInfo() {
		t.Errorf("version %q unchanged after the error cleared", again.GetVersionInfo())
	}
	checkSotW(t, sotwWithErrors(edsType, again.GetVersionInfo(), []*discoveryv3.ResourceError{
		resourceError(gone, relayNotFound), resourceError(unknown, unknownAuthority),
	}, r.Body), again)
}

// The per-type services carry resource errors as ADS does.
func TestResourceErrorPerTypeServices(t *testing.T) {
	e := newEnv(t, 0)
	n := xdstp(edsType, "pending-per-type")
	eds := endpointv3s.NewEndpointDiscoveryServiceClient(e.conn)
	s := startStream(t, func(ctx context.Context) (grpc.BidiStreamingClient[discoveryv3.DiscoveryRequest, discoveryv3.DiscoveryResponse], error) {
		return eds.StreamEndpoints(ctx)
	})
	d := startStream(t, func(ctx context.Context) (grpc.BidiStreamingClient[discoveryv3.DeltaDiscoveryRequest, discoveryv3.DeltaDiscoveryResponse], error) {
		return eds.DeltaEndpoints(ctx)
	})
	// An ADS client subscribed first: the error has a key to be kept under.
	ads := e.delta()
	ads.Send(&discoveryv3.DeltaDiscoveryRequest{Node: testNode, TypeUrl: edsType, ResourceNamesSubscribe: []string{n}})
	e.syncDelta(ads)
	e.cache.setError(key(edsType, n), denied)
	errs := []*discoveryv3.ResourceError{resourceError(n, denied)}
	checkDelta(t, deltaWithErrors(edsType, nil, errs), ads.Recv())
	s.Send(&discoveryv3.DiscoveryRequest{Node: testNode, ResourceNames: []string{n}})
	d.Send(&discoveryv3.DeltaDiscoveryRequest{Node: testNode, ResourceNamesSubscribe: []string{n}})
	checkSotW(t, sotwWithErrors(edsType, "1", errs), s.Recv())
	checkDelta(t, deltaWithErrors(edsType, nil, errs), d.Recv())
}
