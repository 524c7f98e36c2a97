package relay

import (
	"crypto/sha256"
	"encoding/json"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/xds-relay/xds-relay/config"
	"github.com/xds-relay/xds-relay/internal/aggregation"
	"github.com/xds-relay/xds-relay/internal/cache"
)

// snapshots wires warm restart when cache.snapshot_path is set: the
// snapshot is restored into c now, before anything serves; written every
// cache.snapshot_interval in which the cache changed (a goRun loop); and
// written once more at Close, after the upstream stopped and before the
// cache closes (an onStop registered right after c.Close's, so it runs
// just before it). A snapshot that cannot be read never stops the relay.
// A reload that changes what keys mean (authorities, rules, node) changes
// the fingerprint the next snapshot is written under.
func (r *Relay) snapshots(cfg *config.Config, lg *zap.Logger, reg prometheus.Registerer, c *cache.Cache) {
	if cfg.Cache.SnapshotPath == "" {
		return
	}
	s := cache.NewSnapshotter(c, cache.SnapshotOptions{
		Path:        cfg.Cache.SnapshotPath,
		Interval:    cfg.Cache.SnapshotInterval,
		MaxBytes:    int64(cfg.Cache.SnapshotMaxBytes),
		Fingerprint: configFingerprint(cfg),
		Logger:      lg,
		Registry:    reg,
	})
	s.Load()
	r.goRun(s.Run)
	r.onStop(s.Final)
	// Claims no field (cache.snapshot_* need a restart); follows every
	// reload, so a snapshot is always written under the running config.
	r.onReload(func(_, next *config.Config) error {
		s.SetFingerprint(configFingerprint(next))
		return nil
	})
}

// configFingerprint hashes the parts of cfg that decide what a cache key
// means and what the origin answers for it: the node shown upstream, each
// authority's name, origins, transport and glob mode, and the aggregation
// rules (the built-in plain-names rule included). A snapshot written under
// another fingerprint is not loaded.
func configFingerprint(cfg *config.Config) cache.Fingerprint {
	type authority struct {
		Name, Transport, GlobCollections string
		Origins                          []string
	}
	v := struct {
		Node        config.Node
		Authorities []authority
		Rules       []aggregation.Rule
	}{Node: cfg.Node, Rules: cfg.AggregationRules()}
	for _, a := range cfg.Authorities {
		v.Authorities = append(v.Authorities, authority{Name: a.Name, Transport: a.Transport, GlobCollections: a.GlobCollections, Origins: a.Origins})
	}
	b, err := json.Marshal(v)
	if err != nil {
		// Plain data; cannot fail. A fingerprint of nothing matches no
		// snapshot written with one.
		return cache.Fingerprint{}
	}
	return sha256.Sum256(b)
}
