package snapshot

import (
	"crypto/sha256"
	"encoding/json"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/xds-relay/xds-relay/config"
	"github.com/xds-relay/xds-relay/internal/aggregation"
	"github.com/xds-relay/xds-relay/internal/cache"
)

// FromConfig returns the Snapshotter of c that cfg's cache.snapshot_*
// keys ask for, or nil when cache.snapshot_path is not set (no warm
// restart). It reads and writes nothing yet: the relay calls Load before
// anything serves, runs Run, calls Final at Close (after the upstream
// stopped and before the cache closes) and Reload on every reload.
func FromConfig(cfg *config.Config, c *cache.Cache, lg *zap.Logger, reg prometheus.Registerer) *Snapshotter {
	if cfg.Cache.SnapshotPath == "" {
		return nil
	}
	return New(c, Options{
		Path:        cfg.Cache.SnapshotPath,
		Interval:    cfg.Cache.SnapshotInterval,
		MaxBytes:    int64(cfg.Cache.SnapshotMaxBytes),
		Fingerprint: ConfigFingerprint(cfg),
		Logger:      lg,
		Registry:    reg,
	})
}

// Reload follows a config reload: a reload that changes what keys mean
// (authorities, rules, node) changes the fingerprint the next snapshot is
// written under. It claims no config field (cache.snapshot_* need a
// restart) and never refuses a reload.
func (s *Snapshotter) Reload(_, next *config.Config) error {
	s.SetFingerprint(ConfigFingerprint(next))
	return nil
}

// ConfigFingerprint hashes the parts of cfg that decide what a cache key
// means and what the origin answers for it: the node shown upstream, each
// authority's name, origins, transport and glob mode, and the aggregation
// rules (the built-in plain-names rule included). A snapshot written under
// another fingerprint is not loaded.
func ConfigFingerprint(cfg *config.Config) Fingerprint {
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
		return Fingerprint{}
	}
	return sha256.Sum256(b)
}
