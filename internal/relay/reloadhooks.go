package relay

import (
	"fmt"
	"slices"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/xds-relay/xds-relay/config"
	"github.com/xds-relay/xds-relay/internal/access"
	"github.com/xds-relay/xds-relay/internal/aggregation"
	"github.com/xds-relay/xds-relay/internal/cache"
	"github.com/xds-relay/xds-relay/internal/downstream"
	"github.com/xds-relay/xds-relay/internal/propagation"
	"github.com/xds-relay/xds-relay/internal/upstream"
)

// reloadComponents adds the reload hooks of the relay itself and of the
// components buildComponents built, in the order a reload applies them.
// What each claims is what a reload may change; every other field needs a
// restart (reload.go).
func (r *Relay) reloadComponents(c *cache.Cache, up *upstream.Manager, ds *downstream.Server, ledger *propagation.Ledger) {
	// Read when Close begins.
	r.onReload(func(_, _ *config.Config) error { return nil },
		"shutdown_grace_period", "downstream.drain_delay", "downstream.drain_waves", "downstream.drain_duration")
	// Read by the admin listener's Host check on each request.
	r.onReload(func(_, _ *config.Config) error { return nil }, "admin_allowed_hosts")
	r.onReload(r.reloadLogLevel, "log.level")
	r.onReload(func(old, next *config.Config) error {
		c.SetBounds(next.Cache.MaxResources, int64(next.Cache.MaxBytes))
		c.SetRefetchInterval(next.Cache.RefetchInterval)
		return nil
	}, "cache.max_resources", "cache.max_bytes", "cache.refetch_interval")
	r.onReload(func(old, next *config.Config) error {
		if err := ds.SetLimits(downstreamLimits(next)); err != nil {
			return err
		}
		return ds.SetSendTimeout(next.Downstream.SendTimeout)
	}, "downstream.send_timeout", "downstream.limits.max_streams", "downstream.limits.max_names_per_stream",
		"downstream.limits.max_name_length", "downstream.limits.max_types_per_stream", "downstream.limits.max_version_length",
		"downstream.limits.max_groups_per_authority", "downstream.limits.max_new_groups_per_stream")
	// Upstream before the resolver: an added authority has its upstream
	// before any name resolves to it.
	r.onReload(func(old, next *config.Config) error {
		if slices.EqualFunc(old.Authorities, next.Authorities, sameUpstream) {
			return nil
		}
		auths, err := upstreamAuthorities(next, r.upCreds)
		if err != nil {
			return err
		}
		return up.SetAuthorities(auths)
	}, "authorities")
	r.onReload(func(old, next *config.Config) error {
		res, err := newResolver(next)
		if err != nil {
			return err
		}
		if err := ds.SetResolver(res); err != nil {
			return err
		}
		ds.SetAuthorities(next.AuthorityNames()) // their metric series
		if ledger != nil {
			ledger.SetAuthorities(next.AuthorityNames())
		}
		return nil
	}, "authorities", "aggregation")
	// After the resolver: the access rules of the new authorities. Streams
	// holding what the new rules deny end with PermissionDenied.
	r.onReload(func(old, next *config.Config) error {
		pol, err := access.New(next.AccessOptions())
		if err != nil {
			return fmt.Errorf("access: %w", err)
		}
		if ended := ds.SetAccess(pol); ended > 0 {
			r.lg.Info("config reload: streams the new access rules deny were ended", zap.Int("streams", ended))
		}
		return nil
	}, "authorities", "downstream.node_identity")
}

// reloadLogLevel applies log.level when the new config changes it (a level
// set by PUT /debug/log_level stays until then).
func (r *Relay) reloadLogLevel(old, next *config.Config) error {
	if old.Log.Level == next.Log.Level {
		return nil
	}
	level, err := zapcore.ParseLevel(next.Log.Level)
	if err != nil {
		return fmt.Errorf("log.level: %w", err)
	}
	if !r.levelOK {
		r.lg.Warn("log.level changed but this relay's logger has a fixed level; it takes effect at the next start", zap.String("level", next.Log.Level))
		return nil
	}
	r.level.SetLevel(level)
	return nil
}

// newResolver builds the downstream resolver of cfg's authorities and rules.
func newResolver(cfg *config.Config) (*downstream.NameResolver, error) {
	rules, err := aggregation.Compile(cfg.AggregationRules())
	if err != nil {
		return nil, fmt.Errorf("aggregation: %w", err)
	}
	return downstream.NewResolver(cfg.AuthorityNames(), rules).CarryTypes(cfg.AuthorityTypes()), nil
}

// downstreamLimits are cfg's downstream limits as the Server takes them.
func downstreamLimits(cfg *config.Config) downstream.Limits {
	l := cfg.Downstream.Limits
	return downstream.Limits{
		MaxStreams:        l.MaxStreams,
		MaxNamesPerStream: l.MaxNamesPerStream,
		MaxNameLength:     l.MaxNameLength,
		MaxTypesPerStream: l.MaxTypesPerStream,
		MaxVersionLength:  l.MaxVersionLength,

		MaxGroupsPerAuthority: l.MaxGroupsPerAuthority,
		MaxNewGroupsPerStream: l.MaxNewGroupsPerStream,
	}
}

// sameUpstream: a and b are served upstream alike.
func sameUpstream(a, b config.Authority) bool {
	return a.Name == b.Name && a.Transport == b.Transport && a.GlobCollections == b.GlobCollections && slices.Equal(a.Origins, b.Origins) &&
		equalPtr(a.TLS, b.TLS) && a.BearerTokenFile == b.BearerTokenFile
}

// equalPtr: both nil, or both set to equal values.
func equalPtr[T comparable](a, b *T) bool {
	return a == b || (a != nil && b != nil && *a == *b)
}
