package propagation

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/xds-relay/xds-relay/internal/xdstype"
)

// A change's state, as ChangeView.State says it.
const (
	// StateConverging: some client stream has not settled it yet, or the
	// fan-out is still going on.
	StateConverging = "converging"
	// StateConverged: every stream it was sent to ACKed it (or a later
	// state), or ended, or was sent a newer state first.
	StateConverged = "converged"
	// StateNacked: settled, and some streams NACKed it.
	StateNacked = "nacked"
	// StateUnsent: the fan-out is over and no client was sent it (nobody
	// subscribes to what it changed).
	StateUnsent = "unsent"
)

// ChangeView is one change as the pages show it.
type ChangeView struct {
	ID        uint64    `json:"id"`
	Authority string    `json:"authority"`
	Type      string    `json:"type"` // xdstype.Label
	Arrived   time.Time `json:"arrived"`
	AgeS      float64   `json:"age_s"`
	// Resources: new revisions it brought; First: the first one's name
	// (sorted); Version: the origin's version of it.
	Resources int    `json:"resources"`
	First     string `json:"first"`
	Version   string `json:"version"`
	Counts
	State string `json:"state"`
	// P50MS, P99MS, MaxMS: arrival → ACK over the streams that ACKed it;
	// LastAckMS: arrival → the latest ACK. 0 while none did.
	P50MS     float64      `json:"p50_ms"`
	P99MS     float64      `json:"p99_ms"`
	MaxMS     float64      `json:"max_ms"`
	LastAckMS float64      `json:"last_ack_ms"`
	Reasons   []NackReason `json:"nack_reasons"`
	// Nackers: the distinct nodes that NACKed it (at most MaxNackers).
	Nackers []Nacker `json:"nackers,omitempty"`
	// Buckets: arrival → ACK, non-empty buckets (only when asked for).
	Buckets []Bucket `json:"buckets,omitempty"`
	// Line is the change in one line, as the status page shows it.
	Line string `json:"line"`
}

// view describes c at now; withDetail adds the nackers and the buckets.
func (c *Change) view(now time.Time, withDetail bool) ChangeView {
	v := ChangeView{ID: c.id, Authority: c.authority, Type: xdstype.Label(c.typeURL), Arrived: c.arrived,
		AgeS: now.Sub(c.arrived).Seconds(), Resources: c.resources, First: c.first, Version: c.version,
		Counts: c.Counts(), Reasons: c.Reasons()}
	if v.Reasons == nil {
		v.Reasons = []NackReason{}
	}
	v.State = c.state(v.Counts)
	if l := c.lat.Load(); l != nil {
		v.P50MS, v.P99MS = ms(l.quantile(0.5)), ms(l.quantile(0.99))
		v.MaxMS = ms(time.Duration(l.max.Load()))
		if withDetail {
			v.Buckets = l.buckets()
		}
	}
	if last := c.lastAck.Load(); last != 0 {
		v.LastAckMS = ms(time.Unix(0, last).Sub(c.arrived))
	}
	if withDetail {
		v.Nackers = c.Nackers()
	}
	v.Line = v.line()
	return v
}

// state is the change's state given its counts n.
func (c *Change) state(n Counts) string {
	switch {
	case c.announced.Load() == 0 || n.Pending > 0:
		return StateConverging
	case n.Sent == 0:
		return StateUnsent
	case n.Nacked > 0:
		return StateNacked
	}
	return StateConverged
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// line is the change in one line: "v7 of 10 resources (cla-0000 …):
// 9,981 ACKed / 3 NACKed (reason) / 16 pending, p50 12 ms p99 48 ms".
func (v *ChangeView) line() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s v%s of %s (%s): ", shortType(v.Type), shortVersion(v.Version), plural(v.Resources, "resource"), v.First)
	fmt.Fprintf(&b, "%s ACKed / %s NACKed", thousands(v.Acked), thousands(v.Nacked))
	if len(v.Reasons) > 0 {
		fmt.Fprintf(&b, " (%s)", v.Reasons[0].Message)
	}
	fmt.Fprintf(&b, " / %s pending", thousands(v.Pending))
	for _, o := range []struct {
		n    int64
		what string
	}{{v.Superseded, "superseded"}, {v.Gone, "gone"}, {v.Dropped, "not followed"}} {
		if o.n > 0 {
			fmt.Fprintf(&b, " / %s %s", thousands(o.n), o.what)
		}
	}
	if v.Acked > 0 {
		fmt.Fprintf(&b, ", p50 %s p99 %s", msText(v.P50MS), msText(v.P99MS))
	}
	return b.String()
}

// shortType is a type label's last dotted part: ClusterLoadAssignment.
func shortType(label string) string { return label[strings.LastIndexByte(label, '.')+1:] }

// shortVersion cuts a long version (a hash) to its first 12 characters,
// as a short commit id is read; the JSON keeps it whole.
func shortVersion(v string) string {
	if len(v) > 16 {
		return v[:12] + "…"
	}
	return v
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return thousands(int64(n)) + " " + what + "s"
}

// thousands writes n with commas: 9,981.
func thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	if n < 0 || len(s) <= 3 {
		return s
	}
	var b strings.Builder
	for i, d := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(d)
	}
	return b.String()
}

func msText(v float64) string {
	if v >= 100 {
		return strconv.FormatFloat(v, 'f', 0, 64) + " ms"
	}
	return strconv.FormatFloat(v, 'f', 1, 64) + " ms"
}

// Page is the JSON of Path.
type Page struct {
	// PerAuthority: how many changes are kept per authority
	// (RecentChanges); Changes: those selected, newest first.
	PerAuthority int          `json:"per_authority"`
	Changes      []ChangeView `json:"changes"`
}

// PageQuery selects what Page lists.
type PageQuery struct {
	Authority string // "": every authority
	Type      string // a type label or URL; "": every type
	// Limit: at most this many changes (0: all kept).
	Limit int
	// Detail: each change's nackers and latency buckets too.
	Detail bool
}

// Page lists the kept changes q selects, newest first.
func (l *Ledger) Page(q PageQuery) Page {
	p := Page{PerAuthority: RecentChanges, Changes: []ChangeView{}}
	if l == nil {
		return p
	}
	now := l.now()
	for _, c := range l.listed(q.Authority) {
		if q.Type != "" && q.Type != c.typeURL && q.Type != xdstype.Label(c.typeURL) {
			continue
		}
		if q.Limit > 0 && len(p.Changes) == q.Limit {
			break
		}
		p.Changes = append(p.Changes, c.view(now, q.Detail))
	}
	return p
}

// StatusChanges is how many changes the status page shows.
const StatusChanges = 10

// Summary is what the status page shows: the latest StatusChanges changes
// of every authority. Off: Enabled false.
type Summary struct {
	Enabled bool         `json:"enabled"`
	Changes []ChangeView `json:"changes"`
}

// Summary returns the status page's part.
func (l *Ledger) Summary() Summary {
	if l == nil {
		return Summary{Changes: []ChangeView{}}
	}
	return Summary{Enabled: true, Changes: l.Page(PageQuery{Limit: StatusChanges}).Changes}
}
