package cache

import (
	statuspb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
)

// Resource errors (xRFC TP3 resource_errors) are cache state: an origin
// sends an error once, and every client that asks for the key later reads
// it here (Lookup, LookupMembers), as it reads the key's revision.
//
//   - NOT_FOUND makes the key absent, as a removal does, and keeps the
//     origin's status with it (so clients are told why).
//   - Any other code keeps the key's state (a cached revision is still
//     served) and records the status beside it, until a revision (even
//     the same bytes again), a removal or an answer clears it.
//   - A stream no origin answers (SetStreamError, from the upstream link)
//     gives its pending keys that have no error of their own the link's
//     UNAVAILABLE; an answer clears it.

// applyErrorLocked applies one origin error of u. A key nobody subscribed
// is not kept for it. In a FullState update a key with a transient error
// keeps its state (added to keep, as if in the update).
func (c *Cache) applyErrorLocked(a *applyRun, s LinkID, typeURL string, re ResourceError, keep map[string]struct{}) {
	k := Key{Link: s, TypeURL: typeURL, Name: re.Name}
	notFound := codes.Code(re.Detail.GetCode()) == codes.NotFound
	if keep != nil && !notFound {
		keep[re.Name] = struct{}{}
	}
	e := c.entries[k]
	if e == nil {
		return
	}
	if notFound {
		switch {
		case e.collection:
			c.applyRemovedLocked(a, k) // known empty
		case e.state != StateAbsent:
			c.removeResourceLocked(a, e)
		}
		if e = c.entries[k]; e == nil {
			return // only a collection had brought it: dropped
		}
		if e.deferral != nil {
			return // its removal is deferred: so is the origin's status
		}
		e.err = re.Detail
		c.resizeLocked(e)
		a.change(k, false)
		return
	}
	e.err = re.Detail
	c.resizeLocked(e)
	a.change(k, !e.collection && e.state == StatePresent)
}

// Lookup is Get with the key's error: the origin's (kept until cleared),
// or, for a pending key without one, its stream's (SetStreamError). A
// present key may carry a transient error beside its revision; an absent
// one the origin's NOT_FOUND (nil: absent without an error sent).
func (c *Cache) Lookup(k Key) (*Resource, State, *statuspb.Status) {
	r, st, err, _ := c.LookupRollout(k)
	return r, st, err
}

// LookupRollout is Lookup with where a present key's newest revision
// stands in its rollout (rollout.go): what a client is sent of it is
// Rollout.Serve's, decided from this one read.
func (c *Cache) LookupRollout(k Key) (*Resource, State, *statuspb.Status, Rollout) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	e := c.servingLocked(k, now)
	if e == nil {
		if !isCollectionName(k.Name) && c.coveredByKnownLocked(k, globOf(k.Name)) {
			return nil, StateAbsent, nil, Rollout{}
		}
		return nil, StatePending, c.streamErr[k.Link], Rollout{}
	}
	if e.collection {
		return nil, StatePending, nil, Rollout{}
	}
	switch st := e.visibleState(now); st {
	case StatePresent:
		return e.res, st, e.err, e.rolloutLocked()
	case StatePending:
		if e.err == nil {
			return nil, st, c.streamErr[k.Link], Rollout{}
		}
		return nil, st, e.err, Rollout{}
	default:
		return nil, st, e.err, Rollout{}
	}
}

// CollectionLookup is what LookupMembers reads of a collection.
type CollectionLookup struct {
	// Members are the present members, sorted by name; State the
	// collection's (see Members).
	Members []*Resource
	State   State
	// Err is the collection's own error: the origin's for the glob or
	// Wildcard itself, or, while it is pending without one, its stream's.
	Err *statuspb.Status
	// MemberErrs are the errors of the members that carry one (a transient
	// error beside the revision), by the member's revision; nil when none
	// does.
	MemberErrs map[*Resource]*statuspb.Status
	// Rollouts: where the members that roll out held back, or whose
	// removal is deferred, stand (rollout.go), by the member's revision;
	// nil when none does.
	Rollouts map[*Resource]Rollout
}

// LookupMembers is Members with the errors of the collection and of its
// members.
func (c *Cache) LookupMembers(k Key) CollectionLookup {
	c.mu.Lock()
	defer c.mu.Unlock()
	l := c.membersOfLocked(k)
	if e := c.entries[k]; e != nil && e.collection {
		l.Err = e.err
	}
	if l.Err == nil && l.State == StatePending {
		l.Err = c.streamErr[k.Link]
	}
	return l
}

// SetStreamError records that no origin answers stream s (detail, an
// UNAVAILABLE status the relay makes), or that one does again (nil). The
// first detail of an outage stands until it is cleared; setting it
// notifies the watchers of the stream's pending keys that have no error of
// their own, as one change. Clearing notifies nobody: a client keeps an
// error until it is sent the resource (TP3), which the origin's answer
// brings.
func (c *Cache) SetStreamError(s LinkID, detail *statuspb.Status) {
	c.mu.Lock()
	if detail == nil || c.streamErr[s] != nil {
		if detail == nil {
			delete(c.streamErr, s)
		}
		c.mu.Unlock()
		return
	}
	c.streamErr[s] = detail
	var nb noteBuilder
	now := c.now()
	for st, m := range c.byType {
		if st.stream != s {
			continue
		}
		for _, e := range m {
			if e.err == nil && e.visibleState(now) == StatePending {
				nb.addWatchers(e.key, c.watchers[e.key])
			}
		}
	}
	for st, m := range c.colls {
		if st.stream != s {
			continue
		}
		for _, e := range m {
			if e.err == nil && c.collectionStateLocked(e) == StatePending {
				nb.addWatchers(e.key, c.watchers[e.key])
			}
		}
	}
	c.mu.Unlock()
	nb.send()
}

// StreamError returns the error SetStreamError recorded for s (nil: none).
func (c *Cache) StreamError(s LinkID) *statuspb.Status {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.streamErr[s]
}

// codeLabels are the values of the code label of the resource error
// counters (upstream and downstream): the codes TP3 gives a meaning, and
// "other".
var codeLabels = map[codes.Code]string{
	codes.NotFound:         "not_found",
	codes.PermissionDenied: "permission_denied",
	codes.Unavailable:      "unavailable",
	codes.Internal:         "internal",
	codes.Unknown:          "unknown",
}

// CodeLabel is the metric label of a resource error's code: bounded
// whatever code a peer sends.
func CodeLabel(st *statuspb.Status) string {
	if l, ok := codeLabels[codes.Code(st.GetCode())]; ok {
		return l
	}
	return "other"
}

// CodeLabels lists every value CodeLabel returns (their series exist from
// start).
func CodeLabels() []string {
	return []string{"internal", "not_found", "other", "permission_denied", "unavailable", "unknown"}
}
