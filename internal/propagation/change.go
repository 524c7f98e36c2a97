package propagation

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Change is the record of one origin change (one cache Apply that brought
// new revisions): when it arrived, and, counted over the client streams it
// was sent to, how each settled. Every revision the change brought points
// to it (cache.Resource.Change), so whatever response carries one of them
// (the fan-out, a later subscription, a reconnect) is counted here.
//
// Counts only ever grow; pending is sent minus the settled ones. A client
// stream is counted once per time the change is pending with it (a
// stream that receives more of the change while it has not answered is
// still one). Its methods are safe for concurrent use; nil-safe where a
// caller has no record (the ledger off, a revision restored from a
// snapshot).
type Change struct {
	id        uint64    // read-only after Begin
	authority string    // read-only after Begin
	typeURL   string    // read-only after Begin
	arrived   time.Time // read-only after Begin
	// resources, first and version describe the change (Describe): set
	// before the cache publishes any of its revisions, read-only after.
	resources int
	first     string
	version   string
	// obs and nacksTotal are this change's series of the ledger's
	// metrics (nil: no ledger metrics). read-only after Begin
	obs        prometheus.Observer
	nacksTotal prometheus.Counter

	sent, acked, nacked, superseded, gone, dropped atomic.Int64
	// announced: when the cache's announcement of the change ended and
	// every watcher that took it was done with it (unix ns; 0 until).
	announced atomic.Int64
	lastAck   atomic.Int64 // unix ns of the latest ACK
	// lat: arrival → ACK, per stream (latency.go); made at the first ACK,
	// dropped (and never made again) once the change is retired.
	lat     atomic.Pointer[latency]
	retired atomic.Bool
	// reported: the ledger's scan logged the change (report.go).
	reported atomic.Bool

	mu sync.Mutex // a leaf: taken by a session under its own mutex
	// reasons: the first MaxReasons distinct NACK messages, with counts;
	// nackers: the first MaxNackers distinct nodes that NACKed it.
	reasons []NackReason // guarded by mu
	nackers []Nacker     // guarded by mu
}

// The bounds of what a change keeps of its NACKs.
const (
	// MaxReasons: distinct NACK messages kept per change (a further one
	// is counted with the others, not kept).
	MaxReasons = 4
	// MaxNackers: distinct nodes kept per change as having NACKed it.
	MaxNackers = 16
	// MaxNackNames: resource names kept per NACK.
	MaxNackNames = 4
)

// NackReason is one distinct NACK message of a change and how many client
// streams NACKed it with it.
type NackReason struct {
	Code    int32  `json:"code"`
	Message string `json:"message"`
	Streams int    `json:"streams"`
}

// Nacker is one node that NACKed a response carrying the change: its
// first such NACK.
type Nacker struct {
	Node    string    `json:"node"`
	At      time.Time `json:"at"`
	Code    int32     `json:"code"`
	Message string    `json:"message"`
	// Names: the change's resources the NACKed response carried, as the
	// client knows them (at most MaxNackNames; NamesCut counts the rest).
	Names    []string `json:"names"`
	NamesCut int      `json:"names_cut,omitempty"`
}

// Nack is a client's NACK as a session hands it to Tracker.Answered.
type Nack struct {
	Node    string // the client's node id ("" when it sent none)
	Code    int32
	Message string // as the session keeps it (cut)
	// Names, by change: the names of that change the NACKed response
	// carried (nil: not known).
	Names map[*Change][]string
}

// changeIDs numbers changes, from 1.
var changeIDs atomic.Uint64

// ID identifies the change (never 0).
func (c *Change) ID() uint64 { return c.id }

// Authority is the authority of the upstream link the change came on.
func (c *Change) Authority() string { return c.authority }

// TypeURL is the type of every resource of the change.
func (c *Change) TypeURL() string { return c.typeURL }

// Arrived is when the relay received the change from its origin.
func (c *Change) Arrived() time.Time { return c.arrived }

// Resources, First and Version are what Describe set: how many new
// revisions, the first one's name, the origin's version of it.
func (c *Change) Resources() int  { return c.resources }
func (c *Change) First() string   { return c.first }
func (c *Change) Version() string { return c.version }

// Describe sets how many new revisions the change brought, the first
// one's name (sorted) and the origin's version of it (SotW: the
// response's version_info). The cache calls it once, before any revision
// of the change can be read.
func (c *Change) Describe(resources int, first, version string) {
	if c == nil {
		return
	}
	c.resources, c.first, c.version = resources, first, version
}

// Announced says the cache's announcement of the change has ended and
// every watcher that took it sent its response (or will send none): the
// fan-out is over, so the change may now be found converged.
func (c *Change) Announced(at time.Time) {
	if c == nil {
		return
	}
	c.announced.CompareAndSwap(0, at.UnixNano())
}

// FannedOut reports whether the change's fan-out is over (Announced): only
// then may its counts be final.
func (c *Change) FannedOut() bool { return c != nil && c.announced.Load() != 0 }

func (c *Change) sentTo() { c.sent.Add(1) }

func (c *Change) ack(now time.Time) {
	c.acked.Add(1)
	d := now.Sub(c.arrived)
	if c.obs != nil {
		c.obs.Observe(d.Seconds())
	}
	c.lastAck.Store(now.UnixNano())
	if l := c.latency(); l != nil {
		l.observe(d)
	}
}

// latency returns the change's histogram, made on first use; nil once the
// change is retired.
func (c *Change) latency() *latency {
	if l := c.lat.Load(); l != nil || c.retired.Load() {
		return l
	}
	c.lat.CompareAndSwap(nil, new(latency))
	return c.lat.Load()
}

// retire drops what only the ledger's listing needs (the histogram): the
// change left it. Revisions may still point to it and settle it.
func (c *Change) retire() {
	c.retired.Store(true)
	c.lat.Store(nil)
}

func (c *Change) nack(n *Nack, now time.Time) {
	c.nacked.Add(1)
	if c.nacksTotal != nil {
		c.nacksTotal.Inc()
	}
	if n == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.noteReasonLocked(n)
	for i := range c.nackers {
		if c.nackers[i].Node == n.Node {
			return // distinct nodes: the first NACK of each
		}
	}
	if len(c.nackers) == MaxNackers {
		return
	}
	names := n.Names[c]
	kept := names[:min(len(names), MaxNackNames)]
	c.nackers = append(c.nackers, Nacker{Node: n.Node, At: now, Code: n.Code, Message: n.Message,
		Names: append([]string(nil), kept...), NamesCut: len(names) - len(kept)})
}

// noteReasonLocked counts n's message among the change's reasons.
func (c *Change) noteReasonLocked(n *Nack) {
	for i := range c.reasons {
		if r := &c.reasons[i]; r.Code == n.Code && r.Message == n.Message {
			r.Streams++
			return
		}
	}
	if len(c.reasons) < MaxReasons {
		c.reasons = append(c.reasons, NackReason{Code: n.Code, Message: n.Message, Streams: 1})
	}
}

// Nackers returns the distinct nodes that NACKed a response carrying the
// change (the first MaxNackers), first NACK first: what a NACK breaker
// counts.
func (c *Change) Nackers() []Nacker {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]Nacker, len(c.nackers))
	copy(out, c.nackers)
	return out
}

// Reasons returns the change's distinct NACK messages (the first
// MaxReasons) with how many streams NACKed with each.
func (c *Change) Reasons() []NackReason {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]NackReason(nil), c.reasons...)
}

// Counts is where a change stands, over the client streams it was sent to.
type Counts struct {
	// Sent: streams it was sent to (each counted once per time it was
	// pending with it).
	Sent int64 `json:"sent"`
	// Acked: streams that ACKed a response carrying it, or a later
	// response of its type (they accepted a state at least as new).
	Acked int64 `json:"acked"`
	// Nacked: streams that NACKed a response carrying it.
	Nacked int64 `json:"nacked"`
	// Superseded: streams sent a newer state of every resource of it they
	// had been sent before they answered, whose answer to a later
	// response settled it (its own answer never came).
	Superseded int64 `json:"superseded"`
	// Gone: streams that ended before answering.
	Gone int64 `json:"gone"`
	// Dropped: streams that fell more than MaxPending changes behind in
	// their answers (Tracker): no longer followed.
	Dropped int64 `json:"dropped"`
	// Pending: sent, not settled yet.
	Pending int64 `json:"pending"`
}

// Counts reads the change's counts. The settled ones are read before
// Sent, so Pending is never negative.
func (c *Change) Counts() Counts {
	n := Counts{Acked: c.acked.Load(), Nacked: c.nacked.Load(), Superseded: c.superseded.Load(),
		Gone: c.gone.Load(), Dropped: c.dropped.Load()}
	n.Sent = c.sent.Load()
	n.Pending = max(0, n.Sent-n.Acked-n.Nacked-n.Superseded-n.Gone-n.Dropped)
	return n
}
