package propagation

import (
	"cmp"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
)

// RecentChanges is how many changes the ledger lists per authority: the
// latest ones; an older change leaves the listing (its histogram is
// dropped) but still settles, and still counts in the metrics.
const RecentChanges = 64

// DefaultReportAfter is Options.ReportAfter's default (config
// propagation.report_after holds the relay's).
const DefaultReportAfter = 30 * time.Second

// Options configure a Ledger.
type Options struct {
	Logger   *zap.Logger
	Registry prometheus.Registerer
	// Authorities: the configured authorities, whose metric series exist
	// from start (SetAuthorities replaces them).
	Authorities []string
	// ReportAfter: a change not converged this long after it arrived is
	// logged with the number of streams still pending. Default
	// DefaultReportAfter.
	ReportAfter time.Duration
	// ScanEvery: how often Run looks for changes to log. Default 1s.
	ScanEvery time.Duration
	// Now is the clock; nil: time.Now. For tests.
	Now func() time.Time
	// PagePath is where the admin listener serves Page (internal/admin's
	// PropagationPath), named by the log line that points there.
	PagePath string
}

// Ledger keeps the records of the latest origin changes, per authority,
// and logs each once it converged (or once it is overdue). The records
// themselves are counted by the sessions (Tracker), through the revisions
// that point to them: the ledger only lists them.
type Ledger struct {
	lg          *zap.Logger      // read-only after New
	m           *metrics         // read-only after New
	now         func() time.Time // read-only after New
	reportAfter time.Duration    // read-only after New
	scanEvery   time.Duration    // read-only after New
	pagePath    string           // read-only after New

	mu          sync.Mutex
	byAuthority map[string]*recent // guarded by mu
	authorities []string           // guarded by mu; configured (metric series)
}

// recent is one authority's latest changes: a ring.
type recent struct {
	changes [RecentChanges]*Change
	next    int    // where the next one goes
	total   uint64 // changes listed since start
}

// New returns a Ledger.
func New(opts Options) *Ledger {
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	if opts.ReportAfter <= 0 {
		opts.ReportAfter = DefaultReportAfter
	}
	if opts.ScanEvery <= 0 {
		opts.ScanEvery = time.Second
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	l := &Ledger{lg: opts.Logger.Named("propagation"), m: newMetrics(opts.Registry), now: opts.Now,
		reportAfter: opts.ReportAfter, scanEvery: opts.ScanEvery, pagePath: opts.PagePath, byAuthority: make(map[string]*recent)}
	l.SetAuthorities(opts.Authorities)
	return l
}

// SetAuthorities makes the metric series of the authorities named exist,
// at zero, and deletes those of authorities no longer named (a reload).
func (l *Ledger) SetAuthorities(names []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.m.setAuthorities(l.authorities, names)
	l.authorities = slices.Clone(names)
}

// Begin starts the record of an origin change of typeURL that arrived at
// the relay on a link of authority. It takes no lock the caller could
// hold (the cache calls it before its own) and lists nothing: Add does,
// once the change brought new revisions. Nil on a nil Ledger (off).
func (l *Ledger) Begin(authority, typeURL string, arrived time.Time) *Change {
	if l == nil {
		return nil
	}
	c := &Change{id: changeIDs.Add(1), authority: authority, typeURL: typeURL, arrived: arrived}
	c.obs, c.nacksTotal = l.m.series(authority, typeURL)
	return c
}

// Add lists c, Described, among its authority's latest changes; the
// oldest listed leaves the listing. The cache calls it after its lock is
// released, before it announces the change.
func (l *Ledger) Add(c *Change) {
	if l == nil || c == nil {
		return
	}
	l.mu.Lock()
	r := l.byAuthority[c.authority]
	if r == nil {
		r = &recent{}
		l.byAuthority[c.authority] = r
	}
	old := r.changes[r.next]
	r.changes[r.next] = c
	r.next = (r.next + 1) % RecentChanges
	r.total++
	l.mu.Unlock()
	if old != nil {
		old.retire()
	}
}

// listed returns the listed changes of authority ("": every authority),
// newest first (by arrival, then id).
func (l *Ledger) listed(authority string) []*Change {
	l.mu.Lock()
	var out []*Change
	for a, r := range l.byAuthority {
		if authority != "" && a != authority {
			continue
		}
		for _, c := range r.changes {
			if c != nil {
				out = append(out, c)
			}
		}
	}
	l.mu.Unlock()
	slices.SortFunc(out, func(a, b *Change) int {
		if c := b.arrived.Compare(a.arrived); c != 0 {
			return c
		}
		return cmp.Compare(b.id, a.id)
	})
	return out
}
