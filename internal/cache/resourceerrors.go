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
//   - A link no origin answers (SetLinkError, from package upstream)
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

// SetLinkError records that no origin answers link s (detail, an
// UNAVAILABLE status the relay makes), or that one does again (nil). The
// first detail of an outage stands until it is cleared; setting it
// notifies the watchers of the link's pending keys that have no error of
// their own, as one change. Clearing notifies nobody: a client keeps an
// error until it is sent the resource (TP3), which the origin's answer
// brings.
func (c *Cache) SetLinkError(s LinkID, detail *statuspb.Status) {
	c.mu.Lock()
	if detail == nil || c.linkErr[s] != nil {
		if detail == nil {
			delete(c.linkErr, s)
		}
		c.mu.Unlock()
		return
	}
	c.linkErr[s] = detail
	var nb noteBuilder
	now := c.now()
	for st, m := range c.byType {
		if st.link != s {
			continue
		}
		for _, e := range m {
			if e.err == nil && e.visibleState(now) == StatePending {
				nb.addWatchers(e.key, c.watchers[e.key])
			}
		}
	}
	for st, m := range c.colls {
		if st.link != s {
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
