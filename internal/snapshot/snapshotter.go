package snapshot

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/xds-relay/xds-relay/internal/cache"
)

// Options configure a Snapshotter (config: cache.snapshot_*, FromConfig).
type Options struct {
	// Path of the snapshot file; its directory has the temporary file of
	// each write.
	Path string
	// Interval: a snapshot is written at most this often, and only when
	// the cache changed since the last one.
	Interval time.Duration
	// MaxBytes bounds the file, written and read (see Encode for
	// what is left out when the cache does not fit). <= 0: no bound.
	MaxBytes int64
	// Fingerprint of the running config; a snapshot of another is ignored.
	Fingerprint Fingerprint
	// Logger; named "cache.snapshot" (the name its log lines have always
	// had). nil: no logging.
	Logger *zap.Logger
	// Registry for the snapshot metrics; nil: not registered.
	Registry prometheus.Registerer
	// Now is the clock; nil: time.Now.
	Now func() time.Time
}

// LoadResult says what became of the snapshot at start; it is the result
// label of xds_relay_cache_snapshot_loads_total.
type LoadResult string

// Load results.
const (
	LoadLoaded       LoadResult = "loaded"
	LoadAbsent       LoadResult = "absent"
	LoadCorrupt      LoadResult = "corrupt"
	LoadIncompatible LoadResult = "incompatible"
	LoadForeign      LoadResult = "foreign_config"
	LoadTooLarge     LoadResult = "too_large"
	LoadUntrusted    LoadResult = "untrusted"
	LoadError        LoadResult = "error"
)

// Snapshotter keeps a cache.Cache's snapshot on disk: Load at start, Run while
// the relay serves (periodic writes), Final at shutdown. It never stops
// the relay: a snapshot that cannot be read is ignored, one that cannot be
// written is retried at the next interval; both are logged and counted.
//
// Ownership: Load runs before Run; Run's goroutine is the only writer
// while it runs, and Final writes only after Run returned (the relay calls
// it from Close, after the upstream stopped and before the cache closes).
type Snapshotter struct {
	c        *cache.Cache     // read-only after New
	path     string           // read-only after New
	interval time.Duration    // read-only after New
	maxBytes int64            // read-only after New
	lg       *zap.Logger      // read-only after New
	m        *metrics         // read-only after New
	now      func() time.Time // read-only after New

	// fp is the running config's fingerprint (SetFingerprint on reload).
	fp atomic.Pointer[Fingerprint]
	// at is when the snapshot at path was written (Unix ns; 0: none known).
	at atomic.Int64
	// started: Run began, so Final writes.
	started atomic.Bool
	// lastGen is the cache Generation the last snapshot written or loaded
	// has, under fingerprint lastFP; current says the file at path has
	// it. Owned by the writer (Load, then Run's goroutine, then Final).
	lastGen uint64
	lastFP  Fingerprint
	current bool
}

// New returns a Snapshotter of c; it reads and writes nothing
// yet.
func New(c *cache.Cache, opts Options) *Snapshotter {
	lg := opts.Logger
	if lg == nil {
		lg = zap.NewNop()
	}
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	s := &Snapshotter{
		c: c, path: opts.Path, interval: opts.Interval, maxBytes: opts.MaxBytes,
		lg: lg.Named("cache").Named("snapshot"), now: now,
	}
	s.SetFingerprint(opts.Fingerprint)
	s.m = newMetrics(opts.Registry, s.age)
	return s
}

// SetFingerprint sets the running config's fingerprint (a config reload
// that changes what keys mean); the next write rewrites the snapshot under
// it, whether or not the cache changed.
func (s *Snapshotter) SetFingerprint(fp Fingerprint) { s.fp.Store(&fp) }

// upToDate: the file at the path has the cache as it is, under the
// running config's fingerprint.
func (s *Snapshotter) upToDate() bool {
	return s.current && s.c.Generation() == s.lastGen && *s.fp.Load() == s.lastFP
}

// age is xds_relay_cache_snapshot_age_seconds.
func (s *Snapshotter) age() float64 {
	at := s.at.Load()
	if at == 0 {
		return -1
	}
	return s.now().Sub(time.Unix(0, at)).Seconds()
}

// Load reads the snapshot at the path and, when it checks out whole,
// restores it into the cache (before the relay serves). Any failure is
// logged with its reason and counted, and the cache stays as it was.
func (s *Snapshotter) Load() (LoadResult, cache.RestoreResult) {
	result, rr := s.load()
	s.m.loads.WithLabelValues(string(result)).Inc()
	s.lastGen = s.c.Generation()
	return result, rr
}

func (s *Snapshotter) load() (LoadResult, cache.RestoreResult) {
	data, err := ReadFile(s.path, s.maxBytes)
	if err != nil {
		if isNotExist(err) {
			s.lg.Info("no snapshot to load; starting empty", zap.String("path", s.path))
			return LoadAbsent, cache.RestoreResult{}
		}
		result := LoadError
		switch {
		case errors.Is(err, ErrTooLarge):
			result = LoadTooLarge
		case errors.Is(err, ErrUntrusted):
			result = LoadUntrusted
		}
		s.lg.Warn("snapshot not loaded; starting empty", zap.String("path", s.path), zap.String("result", string(result)), zap.Error(err))
		return result, cache.RestoreResult{}
	}
	snap, err := Decode(data, *s.fp.Load())
	if err != nil {
		result := LoadCorrupt
		switch {
		case errors.Is(err, ErrVersion):
			result = LoadIncompatible
		case errors.Is(err, ErrForeign):
			result = LoadForeign
		}
		s.lg.Warn("snapshot not loaded; starting empty", zap.String("path", s.path), zap.String("result", string(result)), zap.Error(err))
		return result, cache.RestoreResult{}
	}
	rr := s.c.Restore(snap.Entries)
	s.m.restored.Set(float64(rr.Resources))
	s.m.skipped.WithLabelValues(skippedExpired).Add(float64(rr.Expired))
	s.m.skipped.WithLabelValues(skippedOverBounds).Add(float64(rr.OverBounds))
	s.m.skipped.WithLabelValues(skippedOtherAuthority).Add(float64(rr.Foreign))
	s.at.Store(snap.Written.UnixNano())
	s.lastFP = snap.Fingerprint
	s.current = rr.Expired == 0 && rr.OverBounds == 0 && rr.Existing == 0 && rr.Foreign == 0
	s.lg.Info("snapshot loaded", zap.String("path", s.path), zap.Time("written", snap.Written),
		zap.Int("resources", rr.Resources), zap.Int("collections", rr.Collections),
		zap.Int("expired", rr.Expired), zap.Int("over_bounds", rr.OverBounds), zap.Int("other_authority", rr.Foreign))
	return LoadLoaded, rr
}

// Run writes a snapshot every interval in which the cache changed, until
// ctx ends. It returns nil: write failures are logged, counted and retried.
func (s *Snapshotter) Run(ctx context.Context) error {
	s.started.Store(true)
	t := time.NewTicker(s.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			if s.upToDate() {
				continue
			}
			_ = s.write()
		}
	}
}

// Final writes the snapshot at shutdown, unless the file already has the
// cache as it is, or Run never ran (a relay closed before it started).
func (s *Snapshotter) Final() {
	if !s.started.Load() || s.upToDate() {
		return
	}
	_ = s.write()
}

// write collects the cache's entries (under its lock: pointers only),
// encodes them and replaces the file atomically, outside any lock. Only
// the writer calls it (Run's goroutine, then Final): it updates the
// writer's unlocked state.
func (s *Snapshotter) write() error {
	start := s.now()
	fp := *s.fp.Load()
	entries, gen := s.c.SnapshotEntries()
	data, n, truncated := Encode(fp, start, entries, s.maxBytes)
	if err := WriteFile(s.path, data); err != nil {
		s.m.writes.WithLabelValues(writeError).Inc()
		s.lg.Error("snapshot not written", zap.String("path", s.path), zap.Error(err))
		return err
	}
	s.lastGen, s.lastFP, s.current = gen, fp, true
	s.at.Store(start.UnixNano())
	s.m.writeDuration.Observe(s.now().Sub(start).Seconds())
	// The count first, the gauges of what was written last: a reader that
	// sees them sees the write counted.
	if truncated {
		s.m.writes.WithLabelValues(writeTruncated).Inc()
		s.lg.Error("snapshot truncated to cache.snapshot_max_bytes: the least recently used resources and every collection left out",
			zap.String("path", s.path), zap.Int("resources", n), zap.Int("bytes", len(data)), zap.Int64("max_bytes", s.maxBytes))
	} else {
		s.m.writes.WithLabelValues(writeOK).Inc()
		s.lg.Debug("snapshot written", zap.String("path", s.path), zap.Int("resources", n), zap.Int("bytes", len(data)))
	}
	s.m.bytes.Set(float64(len(data)))
	s.m.resources.Set(float64(n))
	return nil
}
