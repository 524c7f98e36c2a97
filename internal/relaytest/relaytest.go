package relaytest

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"

	"github.com/xds-relay/xds-relay/config"
	"github.com/xds-relay/xds-relay/internal/relay"
	"github.com/xds-relay/xds-relay/internal/xdstest"
)

// Run validates cfg and runs the relay process on it (Start), as
// cmd/xds-relay does after its own validation.
func Run(t testing.TB, cfg *config.Config, lg *zap.Logger, reg *prometheus.Registry) *relay.Relay {
	t.Helper()
	if err := cfg.Validate(); err != nil {
		t.Fatalf("test config: %v", err)
	}
	return Start(t, cfg, lg, reg)
}

// Start runs the relay process on cfg as given, unvalidated (for a test
// of what relay.New makes of a config Validate would refuse): relay.New,
// then Start, bounded by xdstest.WaitTimeout, with its metrics on reg,
// until the test ends: its cleanup closes the relay and fails the test on
// a Close error. lg nil logs to the test at cfg.Log.Level (Logger).
func Start(t testing.TB, cfg *config.Config, lg *zap.Logger, reg *prometheus.Registry) *relay.Relay {
	t.Helper()
	if lg == nil {
		lg = Logger(t, cfg)
	}
	r, err := relay.New(cfg, lg, reg)
	if err != nil {
		t.Fatalf("relay.New: %v", err)
	}
	t.Cleanup(func() {
		if err := r.Close(); err != nil {
			t.Errorf("relay close: %v", err)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), xdstest.WaitTimeout)
	defer cancel()
	if err := r.Start(ctx); err != nil {
		t.Fatalf("relay start: %v", err)
	}
	return r
}

// Logger logs to the test at cfg.Log.Level.
func Logger(t testing.TB, cfg *config.Config) *zap.Logger {
	t.Helper()
	level, err := zapcore.ParseLevel(cfg.Log.Level)
	if err != nil {
		t.Fatalf("test config: log.level: %v", err)
	}
	return zaptest.NewLogger(t, zaptest.Level(level))
}
