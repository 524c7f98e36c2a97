package delivery

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	statuspb "google.golang.org/genproto/googleapis/rpc/status"

	"github.com/xds-relay/xds-relay/config"
	"github.com/xds-relay/xds-relay/internal/cache"
)

// Options configure a Delivery.
type Options struct {
	// Config is the running config: its delivery section and each
	// authority's override (config.DeliveryOf).
	Config *config.Config
	// Logger; New names it "delivery". nil: no logging.
	Logger *zap.Logger
	// Registry for the metrics; nil: not registered.
	Registry prometheus.Registerer
	// Now is the clock; nil: time.Now. For tests.
	Now func() time.Time
	// ReleasePath is where the admin listener serves Release
	// (internal/admin's DeliveryReleasePath): the page's release actions
	// and the hold log lines name it.
	ReleasePath string
}

// Delivery decides, for every origin change, what the relay's clients
// get of it: it implements cache.Validator (validate.go),
// cache.RemovalGuard (guard.go) and cache.Gate (rollout.go, waves.go),
// downstream's NackReporter (breaker.go), and releases what it holds
// (release.go).
type Delivery struct {
	lg *zap.Logger // read-only after New
	// releasePath is Options.ReleasePath; read-only after New.
	releasePath string
	m           *metrics         // read-only after New
	now         func() time.Time // read-only after New
	// settings are the running config's, per authority (SetConfig).
	settings atomic.Pointer[settings]
	// held is the cache, whose deferred removals are the held removals;
	// set by SetCache before Run and the pages; read-only after.
	held heldRemovals
	// wake pokes the release loop (Run): a hold started, or the settings
	// changed. 1 slot.
	wake chan struct{}

	// fleet is the downstream server (SetFleet), origins the upstream
	// (SetOrigins); set before serving, read-only after.
	fleet   Fleet
	origins Origins

	mu sync.Mutex
	// refused remembers the invalid versions by key (validate.go).
	// guarded by mu
	refused map[cache.Key]refusal
	// recent are the latest invalid versions, newest last, and
	// invalidTotal counts them all. guarded by mu
	recent       []Invalid
	invalidTotal int
	// rollouts: the rollouts not settled (rollout.go); versions: their
	// versions by type, name and version, and by key (the newest of each
	// key that rolls out). guarded by mu
	rollouts map[*rollout]struct{}
	versions map[versionID]*version
	byKey    map[cache.Key]*version
	// trips: the versions the breaker holds now (breaker.go). guarded by mu
	trips map[*version]struct{}
}

// heldRemovals is what Delivery uses of the cache: its deferred removals,
// and the holds and ends of rollouts.
type heldRemovals interface {
	Deferrals() []cache.Deferral
	DeferredCounts() []cache.Deferral
	ReleaseDeferred(cache.DeferralFilter) []cache.Deferral
	SetHold(revs []cache.Revision, h *cache.Hold) int
	Settle(revs []cache.Revision) int
	Rolling(rv cache.Revision) (bool, *cache.Hold)
	LookupRollout(k cache.Key) (*cache.Resource, cache.State, *statuspb.Status, cache.Rollout)
}

// Fleet is what Delivery reads of the relay's clients (internal/downstream's
// Server): who is connected, and what each holds of some keys.
type Fleet interface {
	Viewers() []cache.Viewer
	Holdings(keys []cache.Key, f func(v cache.Viewer, key int, version string, acked bool))
}

// Origins is how the NACK breaker tells an origin (internal/upstream's
// Manager): a NACK of typeURL on link's stream with detail.
type Origins interface {
	NackHeld(link cache.LinkID, typeURL string, detail *statuspb.Status)
}

// New returns a Delivery on opts.Config. It checks nothing of the config:
// config.Validate did.
func New(opts Options) *Delivery {
	lg := opts.Logger
	if lg == nil {
		lg = zap.NewNop()
	}
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	d := &Delivery{
		lg:          lg.Named("delivery"),
		releasePath: opts.ReleasePath,
		now:         now,
		wake:        make(chan struct{}, 1),
		refused:     make(map[cache.Key]refusal),
		rollouts:    make(map[*rollout]struct{}),
		versions:    make(map[versionID]*version),
		byKey:       make(map[cache.Key]*version),
		trips:       make(map[*version]struct{}),
	}
	s := settingsOf(opts.Config)
	d.settings.Store(s)
	d.m = newMetrics(opts.Registry, d, s.authorities)
	return d
}

// SetCache gives d the cache it screens for (the cache is built with d as
// its Validator, Guard and Gate, so after d). Call before Run and before
// the pages are served.
func (d *Delivery) SetCache(c *cache.Cache) { d.held = c }

// SetFleet gives d the relay's clients (waves are cut from them, their
// progress read from what they hold); SetOrigins the upstream the breaker
// NACKs. Call both before serving; without them waves hold no client and
// the breaker tells no origin.
func (d *Delivery) SetFleet(f Fleet)     { d.fleet = f }
func (d *Delivery) SetOrigins(o Origins) { d.origins = o }

// SetConfig applies a reloaded config: the next origin change is screened
// by its settings, and the release loop re-reads release_after. An
// authority's metric series follow the authorities configured.
func (d *Delivery) SetConfig(cfg *config.Config) {
	s := settingsOf(cfg)
	old := d.settings.Swap(s)
	d.m.setAuthorities(old.authorities, s.authorities)
	d.poke()
}

// poke wakes the release loop.
func (d *Delivery) poke() {
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// settings are the delivery settings of every configured authority.
// Immutable once built.
type settings struct {
	top         config.Delivery
	byAuthority map[string]config.Delivery
	authorities []string // in config order
}

func settingsOf(cfg *config.Config) *settings {
	s := &settings{top: cfg.Delivery, byAuthority: make(map[string]config.Delivery, len(cfg.Authorities))}
	for _, a := range cfg.Authorities {
		s.byAuthority[a.Name] = cfg.DeliveryOf(a.Name)
		s.authorities = append(s.authorities, a.Name)
	}
	return s
}

// of is authority's settings (the top-level section for one not
// configured).
func (s *settings) of(authority string) config.Delivery {
	if d, ok := s.byAuthority[authority]; ok {
		return d
	}
	return s.top
}
