package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"go.uber.org/zap"

	"github.com/xds-relay/xds-relay/config"
	"github.com/xds-relay/xds-relay/internal/relay"
)

// run serves cfg until ctx ends (SIGINT/SIGTERM) or the relay fails, then
// shuts down within the configured grace period. SIGHUP re-reads the
// config file (relay.Reload): a file that does not validate is logged and
// refused, the running config kept; SIGHUP never ends the process.
// started, when set, is called once every listener is bound (the demo
// prints its guide then, never before a busy port fails the start); a
// listener that cannot be bound fails with hint's advice (see busyHint).
func run(ctx context.Context, cfg *config.Config, stderr io.Writer, started func() error, hint func(key string) string) error {
	lg, err := relay.NewLogger(cfg.Log, stderr)
	if err != nil {
		return err
	}
	defer func() { _ = lg.Sync() }()
	reg := relay.NewRegistry(version)
	// Before New: from here on a SIGHUP is a reload request, never the
	// default action (which ends the process).
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	r, err := relay.New(cfg, lg, reg)
	if err != nil {
		return err
	}
	if err := r.Start(ctx); err != nil {
		return errors.Join(busyHint(err, hint), r.Close())
	}
	if started != nil {
		if err := started(); err != nil {
			return errors.Join(err, r.Close())
		}
	}
	var failed error
	for done := false; !done; {
		select {
		case <-hup:
			lg.Info("SIGHUP: reloading the config", zap.String("path", cfg.Source()))
			_ = r.Reload() // logged and counted by the relay; the running config stays on error
		case <-ctx.Done():
			// A second SIGINT or SIGTERM during the shutdown ends the
			// process at once.
			signal.Reset(syscall.SIGINT, syscall.SIGTERM)
			lg.Info("shutting down; signal again to exit at once", zap.String("cause", fmt.Sprint(context.Cause(ctx))),
				zap.Duration("drain_delay", cfg.Downstream.DrainDelay), zap.Duration("grace", cfg.ShutdownGracePeriod))
			done = true
		case failed = <-r.Failed():
			done = true
		}
	}
	return errors.Join(failed, r.Close())
}

// busyHint adds to the error of a listener whose address is in use what
// to change: hint(key) names the flag or config key of that listener.
func busyHint(err error, hint func(key string) string) error {
	var le *relay.ListenError
	if hint == nil || !errors.As(err, &le) || !errors.Is(le.Err, syscall.EADDRINUSE) {
		return err
	}
	return fmt.Errorf("%w: another process (another xds-relay?) listens there; stop it, or %s", err, hint(le.Key))
}

// configHint: serve's listeners are set in the config file.
func configHint(cfg *config.Config) func(key string) string {
	return func(key string) string {
		return fmt.Sprintf("set %s in %s to a free address", key, cfg.Source())
	}
}
