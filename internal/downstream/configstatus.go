package downstream

import (
	"sort"
	"strconv"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	rpcstatus "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/xds-relay/xds-relay/internal/cache"
	"github.com/xds-relay/xds-relay/internal/xdstype"
)

// What a connected client was sent and what it answered, per resource: the
// read-only view Client Status Discovery (internal/csds) serves.
//
// It is derived from what a session keeps anyway, plus two numbers:
//   - sentRev.seq: the response that carried what the client has of a name,
//     written in the same store that records the name as sent (the
//     fan-out path does no other work for it). SotW: the type's
//     version_info counter; delta: the stream's nonce counter.
//   - typeState.answered: the highest seq the client answered (ACK or
//     NACK). A name whose seq is above it was sent and is not answered yet.
//
// A NACK marks the names its response carried (typeNacks.marked, by name,
// valid while the name's seq is the NACKed one); that walk of the type's
// names happens on a NACK only, never on the fan-out path.

// ResourceState is where a name stands with one client: what it answered
// about the response that carried what it has.
type ResourceState uint8

const (
	// ResourceRequested: subscribed, nothing sent yet (the origin has
	// not answered, or it is being looked up).
	ResourceRequested ResourceState = iota
	// ResourceSent: sent, and the client has not answered yet.
	ResourceSent
	// ResourceAcked: the client ACKed the response that carried it, or
	// (delta) declared that version on reconnect (initial_resource_versions).
	ResourceAcked
	// ResourceNacked: the client NACKed the response that carried it.
	ResourceNacked
)

func (s ResourceState) String() string {
	switch s {
	case ResourceRequested:
		return "requested"
	case ResourceSent:
		return "sent"
	case ResourceAcked:
		return "acked"
	case ResourceNacked:
		return "nacked"
	}
	return "unknown"
}

// ResourceStatus is one name a client subscribed to or was sent.
type ResourceStatus struct {
	TypeURL string
	// Name as the client knows it (as it asked, or as the origin spells a
	// collection member). Client strings are not cut here: their length
	// is bounded by downstream.limits.max_name_length.
	Name string
	// Version: delta, the resource's version sent; SotW, the version_info
	// of the response that carried it. "" when nothing was sent.
	Version string
	// Updated: when the relay received the revision sent (zero when none).
	Updated time.Time
	State   ResourceState
	// Pending: the client is owed a newer state of the name, which the
	// writer has not sent yet (a newer revision, a forced resend), or
	// the relay has yet to compare what the client declared it has.
	Pending bool
	// Absent: the client was told the name does not exist (delta's
	// removed_resources).
	Absent bool
	// Nack is the client's error when State is ResourceNacked.
	Nack *NackState
}

// NackState is a client's NACK of a response.
type NackState struct {
	At      time.Time
	Code    int32
	Message string // cut as clientText cuts it
}

// ClientStatus is one connected client stream and its resources.
type ClientStatus struct {
	ID      uint64
	Variant string // sotw or delta
	Stream  string // "ads" or the per-type stream's type URL
	Peer    string
	// Node is what the relay keeps of the client's Node (NodeKeeper);
	// shared with the session and never modified: read it only. Nil until
	// the client's first request carries one.
	Node *corev3.Node
	// Resources by type URL, then name; at most StatusQuery.MaxResources
	// over the whole report.
	Resources []ResourceStatus
	// ResourcesCut counts this client's entries left out of Resources.
	ResourcesCut int
}

// StatusQuery selects and bounds a ConfigStatus report.
type StatusQuery struct {
	// Match selects clients by node (nil node: no request carried one
	// yet); nil selects every client. Called without any session lock.
	Match func(*corev3.Node) bool
	// MaxClients bounds the clients listed (by stream id, oldest first);
	// MaxResources the resource entries over all of them. A client past
	// MaxClients is only counted; once MaxResources are listed, a client's
	// entries are only counted (ClientStatus.ResourcesCut). 0: none.
	MaxClients   int
	MaxResources int
	// MaxBytes, when not 0, also bounds the report by an upper bound of
	// its encoded size: entries past it are counted as cut, as past
	// MaxResources; a client whose node does not fit any more is only
	// counted, as past MaxClients.
	MaxBytes int
}

// StatusReport is the answer to a StatusQuery.
type StatusReport struct {
	Clients []ClientStatus
	// Matched counts the connected clients Match selected (all of them,
	// listed or not); ResourcesCut the entries left out over all listed
	// clients.
	Matched      int
	ResourcesCut int
}

// ConfigStatus reports the connected client streams q selects: each
// session's lock is taken only to copy its state (no I/O, no other
// component called), the report is sorted and cut outside it. Unary Fetch
// and REST-JSON polls are no connected clients and are not reported.
func (s *Server) ConfigStatus(q StatusQuery) StatusReport {
	sessions := s.listSessions()
	sort.Slice(sessions, func(i, j int) bool { return sessions[i].id < sessions[j].id })
	var rep StatusReport
	budget, bytes := q.MaxResources, q.MaxBytes
	for _, ss := range sessions {
		ss.mu.Lock()
		node := ss.node
		ss.mu.Unlock()
		if q.Match != nil && !q.Match(node) {
			continue
		}
		rep.Matched++
		if len(rep.Clients) >= q.MaxClients {
			continue
		}
		if q.MaxBytes > 0 {
			if n := proto.Size(node) + entryOverhead; bytes >= n {
				bytes -= n
			} else {
				bytes = 0
				continue // no room for another client: counted only
			}
		}
		cs := ClientStatus{ID: ss.id, Variant: string(ss.variant), Stream: ss.fixedType, Peer: ss.peer, Node: node}
		if cs.Stream == "" {
			cs.Stream = "ads"
		}
		if budget > 0 && (q.MaxBytes == 0 || bytes > 0) {
			cs.Resources = ss.resourceStatus()
			sort.Slice(cs.Resources, func(i, j int) bool {
				a, b := &cs.Resources[i], &cs.Resources[j]
				if a.TypeURL != b.TypeURL {
					return a.TypeURL < b.TypeURL
				}
				return a.Name < b.Name
			})
			keep := min(len(cs.Resources), budget)
			if q.MaxBytes > 0 {
				for i := range keep {
					if bytes -= cs.Resources[i].size(); bytes < 0 {
						keep = i
						break
					}
				}
			}
			cs.ResourcesCut = len(cs.Resources) - keep
			cs.Resources = cs.Resources[:keep:keep]
			budget -= keep
		} else {
			cs.ResourcesCut = ss.resourceCount()
		}
		rep.ResourcesCut += cs.ResourcesCut
		rep.Clients = append(rep.Clients, cs)
	}
	return rep
}

// entryOverhead is what an entry or a client config costs encoded beyond
// its strings: tags, lengths, a timestamp, the enums (an upper bound).
const entryOverhead = 48

// size is an upper bound of r's encoded size in a CSDS response.
func (r *ResourceStatus) size() int {
	n := len(r.TypeURL) + len(r.Name) + 2*len(r.Version) + entryOverhead
	if r.Nack != nil {
		n += len(r.Nack.Message) + entryOverhead
	}
	return n
}

// resourceCount is how many entries resourceStatus would return.
func (ss *session) resourceCount() int {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	n := 0
	for _, ts := range ss.types.all() {
		n += ts.sent.len()
		for name, sb := range ts.subs.all() {
			if !ts.sent.has(name) && !sb.collection {
				n++
			}
		}
	}
	return n
}

// resourceStatus copies the session's per-resource state, unsorted.
func (ss *session) resourceStatus() []ResourceStatus {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	n := 0
	for _, ts := range ss.types.all() {
		n += ts.sent.len() + ts.subs.len()
	}
	out := make([]ResourceStatus, 0, n)
	for _, ts := range ss.types.all() {
		pending := ss.pendingLocked(ts)
		for name, h := range ts.sent.all() {
			out = append(out, ss.sentStatusLocked(ts, name, h, pending[name]))
		}
		for name, sb := range ts.subs.all() {
			if ts.sent.has(name) || sb.collection {
				continue
			}
			out = append(out, ResourceStatus{TypeURL: ts.typeURL, Name: name, State: ResourceRequested, Pending: pending[name]})
		}
	}
	return out
}

// sentStatusLocked is where name, sent as h, stands with the client;
// pending: the writer owes it a newer state. What CSDS reports, and what
// the propagation ledger's client view (progress.go) starts from.
func (ss *session) sentStatusLocked(ts *typeState, name string, h sentRev, pending bool) ResourceStatus {
	rs := ResourceStatus{TypeURL: ts.typeURL, Name: name, Absent: h.absent}
	if h.res != nil {
		rs.Updated = h.res.Arrived
	}
	switch {
	case ss.variant == xdstype.SotW && h.seq != 0:
		rs.Version = strconv.FormatUint(h.seq, 10)
	default:
		rs.Version = h.version()
	}
	rs.Pending = pending || (h.seq == 0 && h.res == nil && !h.absent)
	if m := ts.nackOfLocked(name, h); m != nil {
		rs.State, rs.Nack = ResourceNacked, &NackState{At: m.at, Code: m.code, Message: m.message}
	} else if h.seq > ts.answered {
		rs.State = ResourceSent
	} else {
		rs.State = ResourceAcked
	}
	return rs
}

// pendingLocked returns the names of ts the writer owes the client a newer
// state of: forced names, and those whose key is dirty (collection
// members included). Nil when there are none, the common case.
func (ss *session) pendingLocked(ts *typeState) map[string]bool {
	var out map[string]bool
	mark := func(n string) {
		if out == nil {
			out = make(map[string]bool)
		}
		out[n] = true
	}
	for n := range ts.force {
		mark(n)
	}
	for k := range ss.dirty.all() {
		if k.TypeURL != ts.typeURL {
			continue
		}
		ts.keyNamesLocked(k, func(n string, _ sub) { mark(n) })
		for _, c := range ts.colls {
			if c.key.Link != k.Link {
				continue
			}
			if n, ok := c.memberKeys[k.Name]; ok {
				mark(n)
			}
		}
	}
	return out
}

// nackMark is a client's NACK of the response seq, for the names that
// response carried (typeNacks.marked).
type nackMark struct {
	seq     uint64
	at      time.Time
	code    int32
	message string
}

// answerLocked records a client's answer (ACK, or NACK with detail) to the
// response nonce of ts: the NACK bookkeeping (recordNackLocked) and what
// ConfigStatus reads. It reports whether the answer was a NACK.
// SotW: only the type's latest response is answered (stale nonces are
// ignored before); delta: any response of the type sent so far.
func (ss *session) answerLocked(ts *typeState, nonce, versionInfo string, detail *rpcstatus.Status) bool {
	nacked := ss.recordNackLocked(ts, nonce, versionInfo, detail)
	var seq uint64
	if ss.variant == xdstype.SotW {
		seq = ts.version
	} else {
		n, err := strconv.ParseUint(nonce, 10, 64)
		last, lerr := strconv.ParseUint(ts.lastNonce, 10, 64)
		if err != nil || lerr != nil || n > last {
			return nacked // not a nonce this type was sent
		}
		seq = n
	}
	ts.answered = max(ts.answered, seq)
	ss.settleLocked(ts, seq, versionInfo, detail) // propagation.go
	ss.breakerNackLocked(ts, seq, detail)         // rollout.go
	if nacked && seq != 0 && ts.nacks.lastSeq != seq {
		ts.nacks.lastSeq = seq
		ts.markNackLocked(&nackMark{seq: seq, at: time.Now(), code: detail.GetCode(), message: ts.nacks.last})
	}
	return nacked
}

// nackOfLocked returns the client's NACK of the response that carried h,
// what it has of name; nil when it did not NACK it.
func (ts *typeState) nackOfLocked(name string, h sentRev) *nackMark {
	if ts.nacks == nil {
		return nil
	}
	if m, ok := ts.nacks.marked[name]; ok && m.seq == h.seq && h.seq != 0 {
		return m
	}
	return nil
}

// markNackLocked marks the names the NACKed response carried, and forgets
// marks that no longer apply (the name was sent again, or is gone).
func (ts *typeState) markNackLocked(m *nackMark) {
	n := ts.nacks
	for name, old := range n.marked {
		if h, ok := ts.sent.get(name); !ok || h.seq != old.seq {
			delete(n.marked, name)
		}
	}
	for name, h := range ts.sent.all() {
		if h.seq == m.seq {
			if n.marked == nil {
				n.marked = make(map[string]*nackMark)
			}
			n.marked[name] = m
		}
	}
}

// renoted is h for revision r of the same content the client was sent (or
// declared): what it has is unchanged, and so is where it stands.
func (h sentRev) renoted(r *cache.Resource) sentRev {
	return sentRev{res: r, seq: h.seq, err: h.err, vers: h.prevVersion(), prevGap: h.prevGap}
}
