package cache

import (
	"time"

	"github.com/xds-relay/xds-relay/internal/propagation"
)

// The cache's part of the propagation ledger (internal/propagation): each
// Apply that brings new revisions is one change, whose record each of
// those revisions points to (Resource.Change); the ChangeSet announcing
// it tells the record when its fan-out is over. The sessions settle the
// record from what their clients answer.

// beginRecord starts the record of update u's change, before the lock;
// nil when the ledger is off or u brings no resource.
func (c *Cache) beginRecord(u *Update, arrived time.Time) *propagation.Change {
	if c.ledger == nil || len(u.Resources) == 0 {
		return nil
	}
	return c.ledger.Begin(u.Link.Authority, u.TypeURL, arrived)
}

// stamp returns r, a new revision of this Apply, pointing to the change's
// record: r itself when it points to none yet (it is published by this
// Apply), a copy when it already points to one (the same *Resource
// applied again, which sessions may be reading).
func (a *applyRun) stamp(r *Resource) *Resource {
	if a.rec == nil || r.Change == a.rec {
		return r
	}
	if r.Change != nil {
		// Field by field: Encoded may be written meanwhile, and the
		// copy, a revision of its own, starts without encodings.
		r = &Resource{Name: r.Name, Version: r.Version, OriginVersion: r.OriginVersion, Body: r.Body, TTL: r.TTL,
			Aliases: r.Aliases, Metadata: r.Metadata, CacheControl: r.CacheControl, Heartbeat: r.Heartbeat, Arrived: r.Arrived}
	}
	r.Change = a.rec
	return r
}

// describeRecordLocked describes the change's record from its new
// revisions, before any can be read; it reports whether there is a
// record to list (Ledger.Add, after the lock).
func (a *applyRun) describeRecordLocked() bool {
	if a.rec == nil || len(a.revised) == 0 {
		return false
	}
	first := a.revised[0].Res
	for _, rv := range a.revised[1:] {
		if rv.Key.Name < first.Name {
			first = rv.Res
		}
	}
	a.rec.Describe(len(a.revised), first.Name, first.OriginVersion)
	if a.cs != nil {
		a.cs.rec = a.rec
	}
	return true
}
