package relay

import (
	"go.uber.org/zap"

	"github.com/xds-relay/xds-relay/config"
	"github.com/xds-relay/xds-relay/internal/configwatch"
)

// watchConfig wires config_watch: a change of the config file's content
// reloads it (Reload: logged and counted; a file that does not validate
// is refused and the running config kept). The watch starts here, so a
// directory that cannot be watched fails New; its loop is a goRun, and
// it is stopped by an onStop. config_watch itself needs a restart.
func (r *Relay) watchConfig(cfg *config.Config, lg *zap.Logger) error {
	if !cfg.ConfigWatch {
		return nil
	}
	if cfg.Source() == "" {
		r.lg.Warn("config_watch: the config was not read from a file; nothing to watch")
		return nil
	}
	w, err := configwatch.New(configwatch.Options{
		Path:     cfg.Source(),
		OnChange: func() { _ = r.Reload() },
		MaxBytes: int64(config.MaxFileBytes),
		Logger:   lg,
	})
	if err != nil {
		return err
	}
	r.goRun(w.Run)
	r.onStop(w.Close)
	return nil
}
