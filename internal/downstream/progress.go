package downstream

import (
	"cmp"
	"maps"
	"slices"
	"time"

	statuspb "google.golang.org/genproto/googleapis/rpc/status"

	"github.com/xds-relay/xds-relay/internal/cache"
	"github.com/xds-relay/xds-relay/internal/propagation"
)

// "Why is this client behind?": ClientProgress, what the propagation
// ledger's client page (/debug/propagation/client, internal/admin) shows for one node id.
// For each resource each of its streams subscribes to: the version it was
// sent, the version it ACKed, the newest version the relay holds, and the
// reason for any difference (propagation.Reason: reasonOf decides, and
// every case has one). Its starting point is what CSDS reports of the
// name (heldStatusLocked: the same records), so both always agree.
//
// Cost: the node's streams are found by id (Server.byNode), whatever the
// number of clients; then one copy of each stream's state under its
// mutex, and one cache lookup per name without it.

// MaxProgressResources bounds the resources one ClientProgress lists over
// all of the node's streams; the rest are counted (ResourcesCut).
const MaxProgressResources = 10000

// ProgressReport is the JSON of /debug/propagation/client: the open streams
// of one node id.
type ProgressReport struct {
	Node    string           `json:"node"`
	Streams []StreamProgress `json:"streams"`
}

// StreamProgress is one open stream of the node.
type StreamProgress struct {
	ID      uint64 `json:"id"`
	Variant string `json:"variant"`
	Stream  string `json:"stream"` // "ads" or the per-type stream's type URL
	Peer    string `json:"peer"`
	Cluster string `json:"cluster"`
	// Resources: by type URL, then name; ResourcesCut: left out past
	// MaxProgressResources.
	Resources    []ResourceProgress `json:"resources"`
	ResourcesCut int                `json:"resources_cut,omitempty"`
	// Pending: the changes sent to the stream that it has not answered.
	Pending []PendingProgress `json:"pending_changes"`
}

// ResourceProgress is one resource the stream subscribes to.
type ResourceProgress struct {
	Type    string `json:"type"` // xdstype.Label
	TypeURL string `json:"type_url"`
	Name    string `json:"name"` // as the client knows it
	// Sent: the version it was last sent ("" none); SentAbsent: it was
	// told the name does not exist. Acked: the version it ACKed ("" none).
	Sent       string `json:"sent"`
	SentAbsent bool   `json:"sent_absent,omitempty"`
	Acked      string `json:"acked"`
	// Newest: the newest version the relay holds ("" none); NewestState:
	// present, absent (the origin says it does not exist) or pending.
	Newest      string `json:"newest"`
	NewestState string `json:"newest_state"`
	// State: where it stands as CSDS reports it (requested, sent, acked,
	// nacked; downstream.ResourceState).
	State string `json:"state"`
	// Reason for any difference (in_sync when none), Why in words, and
	// Detail: the NACK's error, the origin's or the relay's error, what
	// the writer is doing.
	Reason propagation.Reason `json:"reason"`
	Why    string             `json:"why"`
	Detail string             `json:"detail,omitempty"`
}

// PendingProgress is one change pending with a stream.
type PendingProgress struct {
	Type      string    `json:"type"`
	Change    uint64    `json:"change"` // its id on /debug/propagation
	Version   string    `json:"version"`
	First     string    `json:"first"`
	Arrived   time.Time `json:"arrived"`
	SentAt    time.Time `json:"sent_at"`
	Responses uint64    `json:"response"` // the latest response that carried it
}

// nameView is what decides one resource's reason: copied from the
// session under its mutex, then filled from the cache without it.
type nameView struct {
	typeURL, name string
	key           cache.Key
	status        ResourceStatus // as CSDS reports it (heldStatusLocked)
	h             held
	holds         bool         // the client holds something of the name (h)
	acked         string       // the version it ACKed (ackedVersionLocked)
	unknown       *unknownName // not served, or a denied glob
	denied        bool         // a collection member the access rules deny
	gathering     bool         // the type's gather awaits the name
	writerBusy    bool         // the writer is running (sending)
	// From the cache.
	res      *cache.Resource
	state    cache.State
	err      *statuspb.Status
	withheld bool          // a do_not_cache revision owed afresh from the origin
	ro       cache.Rollout // where res stands in its rollout (rollout.go)
	viewer   cache.Viewer  // the client, as a hold tells it apart
}

// reasonOf decides v's reason and its detail. Every case ends in one.
func reasonOf(v *nameView) (propagation.Reason, string) {
	switch {
	case v.denied || (v.unknown != nil && v.unknown.detail == relayNotFound):
		return propagation.Denied, ""
	case v.unknown != nil:
		return propagation.NotServed, v.unknown.detail.GetMessage()
	case v.status.State == ResourceNacked:
		return propagation.Nacked, v.status.Nack.Message
	case v.withheld || v.state == cache.StatePending:
		return propagation.WaitingForOrigin, v.err.GetMessage()
	case !v.hasNewest() && v.gathering:
		return propagation.GatherWindow, ""
	case !v.hasNewest() && v.heldBack() == cache.HoldBreaker:
		return propagation.HeldByBreaker, ""
	case !v.hasNewest() && v.heldBack() == cache.HoldWave:
		return propagation.HeldByWave, ""
	case !v.hasNewest() && v.writerBusy:
		return propagation.NotWritten, "the writer is still sending earlier responses: the client reads slowly"
	case !v.hasNewest():
		return propagation.NotWritten, "the change is being announced, or the writer is about to send it"
	case v.status.State == ResourceSent:
		return propagation.AwaitingAck, ""
	case v.ro.Deferred:
		return propagation.HeldByDeletionGuard, ""
	}
	return propagation.InSync, v.err.GetMessage()
}

// heldBack is why the newest revision is held back from the client
// (cache.HoldNone: it is not).
func (v *nameView) heldBack() cache.HoldReason {
	if v.res == nil || v.ro.Hold == nil {
		return cache.HoldNone
	}
	var holds *cache.Resource
	if v.holds {
		holds = v.h.res
	}
	_, why := v.ro.Serve(v.res, v.viewer, holds)
	return why
}

// hasNewest reports whether the client was sent the newest state the
// relay holds of the name.
func (v *nameView) hasNewest() bool {
	switch {
	case !v.holds:
		return false
	case v.state == cache.StateAbsent:
		return v.h.absent
	}
	return !v.h.absent && v.res != nil && v.h.version() == v.res.Version
}

// progress turns v into its entry.
func (v *nameView) progress() ResourceProgress {
	p := ResourceProgress{Type: typeLabel(v.typeURL), TypeURL: v.typeURL, Name: v.name, State: v.status.State.String(),
		NewestState: v.state.String()}
	if v.holds {
		p.Sent, p.SentAbsent, p.Acked = v.h.version(), v.h.absent, v.acked
	}
	if v.state == cache.StatePresent && v.res != nil {
		p.Newest = v.res.Version
	}
	p.Reason, p.Detail = reasonOf(v)
	p.Why = p.Reason.Words()
	return p
}

// ClientProgress reports the open streams of node id nodeID: per resource,
// where it stands and why (see above).
func (s *Server) ClientProgress(nodeID string) ProgressReport {
	rep := ProgressReport{Node: nodeID, Streams: []StreamProgress{}}
	budget := MaxProgressResources
	for _, ss := range s.nodeSessions(nodeID) {
		sp := ss.progress()
		keep := min(len(sp.Resources), budget)
		sp.ResourcesCut = len(sp.Resources) - keep
		sp.Resources = sp.Resources[:keep:keep]
		budget -= keep
		rep.Streams = append(rep.Streams, sp)
	}
	return rep
}

// progress reports the stream: its names copied under the mutex, looked
// up in the cache without it.
func (ss *session) progress() StreamProgress {
	ss.mu.Lock()
	sp := StreamProgress{ID: ss.id, Variant: string(ss.variant), Stream: ss.fixedType, Peer: ss.peer,
		Cluster: ss.node.GetCluster(), Pending: ss.pendingChangesLocked()}
	views, colls := ss.nameViewsLocked()
	ss.mu.Unlock()
	if sp.Stream == "" {
		sp.Stream = "ads"
	}
	for i := range views {
		ss.lookupView(&views[i])
	}
	views = append(views, ss.unsentMembers(colls)...)
	sp.Resources = make([]ResourceProgress, 0, len(views))
	for i := range views {
		sp.Resources = append(sp.Resources, views[i].progress())
	}
	slices.SortFunc(sp.Resources, func(a, b ResourceProgress) int {
		return cmp.Or(cmp.Compare(a.TypeURL, b.TypeURL), cmp.Compare(a.Name, b.Name))
	})
	return sp
}

// pendingChangesLocked lists the changes pending with the stream.
func (ss *session) pendingChangesLocked() []PendingProgress {
	out := []PendingProgress{}
	for _, ts := range ss.types.all() {
		for _, p := range ts.prop.Pending() {
			c := p.Change
			out = append(out, PendingProgress{Type: typeLabel(ts.typeURL), Change: c.ID(), Version: c.Version(), First: c.First(),
				Arrived: c.Arrived(), SentAt: p.SentAt, Responses: p.Seq})
		}
	}
	return out
}

// lookupView fills v from the cache (no session lock held).
func (ss *session) lookupView(v *nameView) {
	if v.unknown != nil || v.key == (cache.Key{}) {
		return
	}
	v.res, v.state, v.err, v.ro = ss.srv.cache.LookupRollout(v.key)
	v.withheld = v.res != nil && ss.srv.cache.Withheld(ss, v.key, v.res)
}

// collView is one collection (wildcard, glob) the stream subscribes to:
// its members the client holds are listed with the other names; those it
// does not hold yet are found by listing the collection (unsentMembers).
type collView struct {
	typeURL string
	key     cache.Key
	held    map[string]struct{} // member names the client holds
	gather  bool
}

// nameViewsLocked copies, per type, each name the stream subscribes to
// (directly, by alias, or as a member it holds) or asked for and cannot
// be served, and its collections.
func (ss *session) nameViewsLocked() ([]nameView, []collView) {
	var views []nameView
	var colls []collView
	busy := ss.writer.runningLocked()
	for _, ts := range ss.types.all() {
		pending := ss.pendingLocked(ts)
		add := func(name string, key cache.Key, heldAs string) {
			v := nameView{typeURL: ts.typeURL, name: name, key: key, writerBusy: busy, viewer: ss.viewer,
				gathering: ts.gather != nil && ts.gather.awaits(name)}
			v.h, v.holds = ts.sent.get(heldAs)
			if v.holds {
				v.status = ss.heldStatusLocked(ts, heldAs, v.h, pending[heldAs])
				v.acked = ts.ackedVersionLocked(heldAs, v.h)
			} else {
				v.status = ResourceStatus{State: ResourceRequested, Pending: pending[name]}
			}
			views = append(views, v)
		}
		for name, sb := range ts.subs.all() {
			switch {
			case sb.collection:
				c := ts.colls[name]
				colls = append(colls, collView{typeURL: ts.typeURL, key: c.key, held: maps.Clone(c.members),
					gather: ts.gather != nil && ts.gather.awaits(name)})
			case ts.viaOf(name, sb) != "":
				add(name, ts.keyOf(name, sb), ts.viaOf(name, sb))
			default:
				add(name, ts.keyOf(name, sb), name)
			}
		}
		listed := make(map[string]struct{})
		for _, s := range ts.colls {
			for canonical, name := range s.memberKeys {
				if ts.subs.has(name) {
					continue
				}
				if _, dup := listed[name]; !dup {
					listed[name] = struct{}{}
					add(name, cache.Key{Link: s.key.Link, TypeURL: ts.typeURL, Name: canonical}, name)
				}
			}
		}
		for name, u := range ts.unknown {
			add(name, cache.Key{}, name) // no key: not looked up
			views[len(views)-1].unknown = &u
		}
	}
	return views, colls
}

// unsentMembers lists the members of colls the client does not hold yet,
// looked up without the session lock; a member the access rules deny the
// client is marked so.
func (ss *session) unsentMembers(colls []collView) []nameView {
	var out []nameView
	for _, c := range colls {
		l := ss.srv.cache.LookupMembers(c.key)
		for _, r := range l.Members {
			if _, ok := c.held[r.Name]; ok {
				continue
			}
			canonical, err := cache.CanonicalName(r.Name)
			if err != nil {
				canonical = r.Name
			}
			out = append(out, nameView{typeURL: c.typeURL, name: r.Name, res: r, state: cache.StatePresent,
				err: l.MemberErrs[r], gathering: c.gather, key: cache.Key{Link: c.key.Link, TypeURL: c.typeURL, Name: canonical},
				status: ResourceStatus{State: ResourceRequested}, ro: l.Rollouts[r]})
		}
	}
	if len(out) == 0 {
		return nil
	}
	ss.mu.Lock()
	pol := ss.srv.access.Load()
	busy := ss.writer.runningLocked()
	for i := range out {
		v := &out[i]
		v.writerBusy, v.viewer = busy, ss.viewer
		if ss.deniesAnyLocked(pol, v.typeURL) {
			_, ok := ss.memberAuthorityLocked(pol, v.typeURL, v.name, v.key.Link)
			v.denied = !ok
		}
	}
	ss.mu.Unlock()
	return out
}
