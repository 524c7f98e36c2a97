package downstream

import (
	"context"
	"fmt"
	"hash/fnv"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/xds-relay/xds-relay/internal/access"
	"github.com/xds-relay/xds-relay/internal/cache"
)

// fetchWatcher wakes a unary Fetch when a key it waits on changes.
// fetchWatcher is a poll's watcher of the cache; viewer is its client as
// a rollout's hold tells it apart (rollout.go). Read-only after creation
// but for ch.
type fetchWatcher struct {
	ch     chan struct{}
	viewer cache.Viewer
}

func (w *fetchWatcher) Notify(cache.Key) {}

func (w *fetchWatcher) Flush(*cache.ChangeSet) {
	select {
	case w.ch <- struct{}{}:
	default:
	}
}

// fetchRPC is fetch for the unary gRPC Fetch methods: not-modified becomes
// FailedPrecondition (there is no response to send).
func (s *Server) fetchRPC(ctx context.Context, req *discoveryv3.DiscoveryRequest, typeURL string) (*discoveryv3.DiscoveryResponse, error) {
	leave, err := s.admitStream() // a Fetch counts as a stream while it waits
	if err != nil {
		return nil, err
	}
	defer leave()
	resp, err := s.fetch(ctx, req, typeURL, certIdentity(ctx))
	if isErr(err, ErrNotModified) {
		return nil, status.Error(codes.FailedPrecondition, err.Error())
	}
	return resp, err
}

// fetch answers one REST-JSON poll or unary Fetch from the cache. It waits
// up to FetchWait for resources the relay has not received yet, and, when
// the client's version_info is current, for a change (long polling); with
// none, it returns ErrNotModified.
//
// cert is the SANs of the client's verified certificate; with the
// request's node it is what the access rules (access.go) judge.
func (s *Server) fetch(ctx context.Context, req *discoveryv3.DiscoveryRequest, typeURL string, cert access.Identity) (*discoveryv3.DiscoveryResponse, error) {
	if req.GetTypeUrl() != "" && req.GetTypeUrl() != typeURL {
		return nil, status.Errorf(codes.InvalidArgument, "%v: request for %s on the fetch for %q", ErrWrongType, quoteShort(req.GetTypeUrl()), typeURL)
	}
	s.m.requests.WithLabelValues(typeLabel(typeURL)).Inc()
	names := req.GetResourceNames()
	if err := s.checkNames("resource_names", typeURL, names); err != nil {
		return nil, err
	}
	if err := s.refuseLocators(typeURL, "resource_locators", len(req.GetResourceLocators())); err != nil {
		return nil, err
	}
	if len(names) == 0 {
		names = []string{cache.Wildcard}
	}
	id := cert.WithNode(req.GetNode().GetId(), req.GetNode().GetCluster())
	// The channel first: a SetAccess after it closes it, and the poll
	// checks again under the new policy.
	accessChanged := s.accessChange()
	fa := s.fetchAccess(typeURL, id, req.GetNode())
	if err := fa.checkNode(s); err != nil {
		return nil, err
	}
	items, unknown, watch, err := s.resolveFetch(typeURL, names, req.GetNode(), fa, &id)
	if err != nil {
		return nil, err
	}
	w := &fetchWatcher{ch: make(chan struct{}, 1), viewer: cache.ViewerOf(req.GetNode().GetId(), req.GetNode().GetCluster())}
	if len(watch.watch) > 0 {
		watchKeys(s.cache, w, watch.watch, watch.nodes)
		defer s.cache.Unwatch(w, watch.watch...)
	}
	deadline := time.NewTimer(s.fetchWait)
	defer deadline.Stop()

	for {
		resp, pending := s.fetchResponse(w, typeURL, items, unknown, fa, typeWrap(sotwWrapOf(req.GetNode()), typeURL))
		current := req.GetVersionInfo() != "" && resp.GetVersionInfo() == req.GetVersionInfo()
		if !pending && !current {
			return s.fetchComplete(typeURL, items, resp)
		}
		select {
		case <-w.ch:
		case <-accessChanged:
			// A reload changed the rules while the poll waited: what it
			// asked for is judged again; denied, it answers
			// PermissionDenied, never the data.
			accessChanged = s.accessChange()
			fa = s.fetchAccess(typeURL, id, req.GetNode())
			if err := fa.recheck(s, items); err != nil {
				return nil, err
			}
		case <-ctx.Done():
			return nil, status.FromContextError(ctx.Err()).Err()
		case <-deadline.C:
			return s.fetchExpired(typeURL, items, resp, current)
		}
	}
}

// resolveFetch resolves the names a fetch asks for: the items to look up,
// the names that cannot be served (unknown authority: NOT_FOUND), and the
// keys to watch with the upstream nodes rules set for them. A name that
// ends the fetch (statusFor), or that the access rules deny (checkFetch,
// which may narrow id), returns its status, as do names whose upstream
// links cannot open (admitFetch).
func (s *Server) resolveFetch(typeURL string, names []string, node *corev3.Node, fa *fetchAccess, id *access.Identity) (items []fetchItem, unknown []resErr, watch watchEdit, err error) {
	for _, n := range names {
		r, err := s.resolve(typeURL, n, node)
		if err != nil {
			if isErr(err, ErrUnknownAuthority) {
				s.m.requestErrors.WithLabelValues(typeLabel(typeURL), reasonUnknownAuthority).Inc()
				unknown = append(unknown, resErr{name: n, detail: unknownStatus(err)})
				continue
			}
			return nil, nil, watchEdit{}, s.statusFor(typeURL, n, node, err)
		}
		if skip, err := s.checkFetch(fa.pol, id, r, typeURL, n); err != nil {
			return nil, nil, watchEdit{}, err
		} else if skip {
			continue
		}
		items = append(items, fetchItem{name: n, res: r})
		watch.add(r)
	}
	if err := s.admitFetch(items); err != nil {
		return nil, nil, watchEdit{}, err // the upstream links they need (groups.go)
	}
	return items, unknown, watch, nil
}

// fetchComplete answers a fetch when all it asked for is known and is not
// the version the client has: NotFound when the origin says none of it
// exists, the response otherwise.
func (s *Server) fetchComplete(typeURL string, items []fetchItem, resp *discoveryv3.DiscoveryResponse) (*discoveryv3.DiscoveryResponse, error) {
	if len(resp.GetResources()) == 0 && s.allAbsent(items) {
		return nil, status.Errorf(codes.NotFound, "%s: the origin says %s does not exist", typeURL, namesOf(items))
	}
	s.m.responses.WithLabelValues(typeLabel(typeURL)).Inc()
	s.m.responseResource.WithLabelValues(typeLabel(typeURL)).Add(float64(len(resp.GetResources())))
	s.m.countErrors(typeURL, resp.GetResourceErrors())
	return resp, nil
}

// fetchExpired answers a fetch whose wait passed: ErrNotModified when the
// client has the current version, Unavailable when nothing is known and
// no origin answers, otherwise what is known (the rest is still pending).
func (s *Server) fetchExpired(typeURL string, items []fetchItem, resp *discoveryv3.DiscoveryResponse, current bool) (*discoveryv3.DiscoveryResponse, error) {
	if current {
		return nil, fmt.Errorf("%w: version %s of %s", ErrNotModified, resp.GetVersionInfo(), typeURL)
	}
	if len(resp.GetResources()) == 0 {
		if err := s.unserved(items); err != nil {
			return nil, status.Errorf(codes.Unavailable, "%s: nothing known after %v: %v", typeURL, s.fetchWait, err)
		}
	}
	// Answer with what is known; the rest is still pending.
	s.m.responses.WithLabelValues(typeLabel(typeURL)).Inc()
	s.m.countErrors(typeURL, resp.GetResourceErrors())
	return resp, nil
}

// allAbsent: every item is a name (no collection) the origin said does
// not exist.
func (s *Server) allAbsent(items []fetchItem) bool {
	for _, it := range items {
		if it.res.Collection {
			return false
		}
		if s.cache.Lookup(nil, it.res.Key).State != cache.StateAbsent {
			return false
		}
	}
	return len(items) > 0
}

// unserved returns why no origin answers for the stream of a still
// pending item (OriginState); nil when one does or none is known.
func (s *Server) unserved(items []fetchItem) error {
	if s.originState == nil {
		return nil
	}
	for _, it := range items {
		if err := s.originState(it.res.Key.Link); err != nil {
			return err
		}
	}
	return nil
}

// namesOf lists items' names for a message, the first few only.
func namesOf(items []fetchItem) string {
	const most = 5
	var b strings.Builder
	for i, it := range items {
		if i == most {
			fmt.Fprintf(&b, " and %d more", len(items)-most)
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(quoteShort(it.name))
	}
	return b.String()
}

// fetchItem is one name a fetch asked for, resolved.
type fetchItem struct {
	name string
	res  Resolution
}

// fetchResponse builds a fetch's response from what the cache has now
// (wrap: what the client takes in the Resource wrapper, features.go); pending reports that some of
// it is not known yet. Its version_info (and
// nonce) is a hash of the names, versions and errors it lists.
// Members fa does not let the client receive are left out.
// resource_errors (resourceerrors.go) have, under the names as asked, the
// error of each name and collection asked for, NOT_FOUND for a name that
// does not exist (the origin's status, or the relay's), and unknown.
// A do_not_cache revision the cache withholds from w (the poll's watcher:
// owed the origin's fresh copy, donotcache.go) is pending.
func (s *Server) fetchResponse(w *fetchWatcher, typeURL string, items []fetchItem, unknown []resErr, fa *fetchAccess, wrap sotwWrap) (resp *discoveryv3.DiscoveryResponse, pending bool) {
	entries, errs, pending := s.fetchLookups(w, items, unknown, fa)
	sort.Slice(entries, func(i, j int) bool { return entries[i].name < entries[j].name })
	h := fnv.New64a()
	resources := make([]*anypb.Any, 0, len(entries))
	for _, e := range entries {
		fmt.Fprintf(h, "%s\x00%s\x00", e.name, e.r.Version)
		if a := sotwEnvelopeFor(s.wrappers, e.name, e.r, false, wrap); a != nil {
			resources = append(resources, a)
		}
	}
	wire := wireErrors(errs)
	for _, e := range wire {
		fmt.Fprintf(h, "%s\x00%d\x00%s\x00", e.GetResourceName().GetName(), e.GetErrorDetail().GetCode(), e.GetErrorDetail().GetMessage())
	}
	v := strconv.FormatUint(h.Sum64(), 16)
	return &discoveryv3.DiscoveryResponse{VersionInfo: v, Resources: resources, TypeUrl: typeURL, Nonce: v, ControlPlane: s.controlPlane,
		ResourceErrors: wire}, pending
}

// fetchEntry is one resource a fetch's response lists, by name.
type fetchEntry struct {
	name string
	r    *cache.Resource
}

// fetchLookups looks a fetch's items up in the cache (fetchResponse): the
// resources present, each name once; the errors, unknown's first; whether
// some of it is pending.
func (s *Server) fetchLookups(w *fetchWatcher, items []fetchItem, unknown []resErr, fa *fetchAccess) (entries []fetchEntry, errs []resErr, pending bool) {
	errs = slices.Clone(unknown)
	seen := make(map[string]struct{})
	for _, it := range items {
		if it.res.Collection {
			l := s.cache.LookupMembers(it.res.Key)
			members, st, err := l.Members, l.State, l.Err
			pending = pending || st == cache.StatePending
			if err != nil {
				errs = append(errs, resErr{name: it.name, detail: err})
			} else if st == cache.StateAbsent && it.res.Key.Name != cache.Wildcard {
				errs = append(errs, resErr{name: it.name, detail: relayNotFound}) // a known empty glob
			}
			for _, m := range members {
				r, _ := l.Rollouts[m].Serve(m, w.viewer, nil) // rollout.go: a poll has nothing
				if r == nil {
					continue
				}
				if !fa.memberAllowed(s, it.res.Key.Link, r.Name) || s.fetchShadowed(fa, items, r.Name, it.res.Key.Link) {
					continue
				}
				if _, dup := seen[r.Name]; !dup {
					seen[r.Name] = struct{}{}
					entries = append(entries, fetchEntry{r.Name, r})
					if merr := l.MemberErrs[m]; merr != nil {
						errs = append(errs, resErr{name: r.Name, detail: merr})
					}
				}
			}
			continue
		}
		l := s.cache.Lookup(w, it.res.Key)
		st, err := l.State, l.Err
		r, _ := l.Rollout.Serve(l.Res, w.viewer, nil)
		if r == nil && st == cache.StatePresent {
			st = cache.StatePending // held back, nothing older to serve (rollout.go)
		}
		if st == cache.StatePresent && (l.Withheld(r) || aliasOf(it.res.Key, r) != "") {
			// Not sent yet (a do_not_cache copy owed fresh), or another
			// resource this name is an alias of: as over SotW streams,
			// aliases are not answered (alias.go).
			r, st, err = nil, cache.StatePending, nil
		}
		pending = pending || st == cache.StatePending
		if st == cache.StateAbsent && err == nil {
			err = relayNotFound
		}
		if err != nil {
			errs = append(errs, resErr{name: it.name, detail: err})
		}
		if st == cache.StatePresent {
			if _, dup := seen[it.name]; !dup {
				seen[it.name] = struct{}{}
				entries = append(entries, fetchEntry{it.name, r})
			}
		}
	}
	return entries, errs, pending
}
