package relay

import (
	"errors"
	"fmt"
	"io/fs"
	"reflect"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/xds-relay/xds-relay/config"
	"github.com/xds-relay/xds-relay/internal/trustfile"
)

// Reload: SIGHUP (cmd/xds-relay) and POST /debug/reload re-read the config
// file the relay was started from (Reload), or a caller hands a parsed one
// (ReloadConfig). The new config is validated whole; then every field that
// differs must be claimed by a reload hook (onReload), or the reload is
// refused naming it ("listen: changing it needs a restart"): no change is
// ever silently ignored. A refused config changes nothing. An accepted one
// is applied by the hooks, in the order they were added, each given the
// running and the new config; if one fails, the hooks before it are called
// again with the configs swapped, to put back what they changed.

// reloadHook applies a new config's fields of paths.
type reloadHook struct {
	paths []string
	apply func(old, next *config.Config) error
}

// onReload adds fn to what a reload calls, claiming the config fields of
// paths (YAML paths: "cache.max_bytes"; a path claims everything under it).
// fn must check what it can before changing anything: an error stops the
// reload. Call in New, before Start.
func (r *Relay) onReload(fn func(old, next *config.Config) error, paths ...string) {
	r.reloads = append(r.reloads, reloadHook{paths: paths, apply: fn})
}

// Reload re-reads the config file the relay was started from
// (config.Source) and applies it (see ReloadConfig). A file that does not
// load or validate is refused (ErrReloadInvalid, with every problem).
func (r *Relay) Reload() error {
	path := r.config().Source()
	if path == "" {
		return r.refuse(reloadError, "", fmt.Errorf("relay: reload: the config was not read from a file"))
	}
	next, err := config.Load(path)
	if err != nil {
		return r.refuse(loadResult(err), path, err)
	}
	return r.ReloadConfig(next)
}

// The result label values of xds_relay_config_reloads_total.
const (
	reloadOK        = "ok"
	reloadInvalid   = "invalid"
	reloadUntrusted = "untrusted"
	reloadTooLarge  = "too_large"
	reloadError     = "error"
)

// loadResult is the reload result of a config file that did not load: the
// file itself refused (untrusted, too_large: config.Load checks it before
// parsing), its content refused (invalid), or a file that could not be
// read (error: missing, mid-swap, permission).
func loadResult(err error) string {
	var pe *fs.PathError
	switch {
	case errors.Is(err, trustfile.ErrUntrusted):
		return reloadUntrusted
	case errors.Is(err, trustfile.ErrTooLarge):
		return reloadTooLarge
	case errors.As(err, &pe) && !errors.Is(err, config.ErrInvalid):
		return reloadError
	}
	return reloadInvalid
}

// ReloadConfig validates next and applies it in place of the running
// config. It is refused (ErrReloadInvalid) when next does not validate or
// changes a field no hook applies; the running config is then kept.
func (r *Relay) ReloadConfig(next *config.Config) error {
	r.reloadMu.Lock()
	defer r.reloadMu.Unlock()
	if r.life.closing() {
		return ErrClosed
	}
	if next == nil {
		return r.refuse(reloadInvalid, "", errors.New("nil config"))
	}
	if err := next.Validate(); err != nil {
		return r.refuse(reloadInvalid, next.Source(), err)
	}
	old := r.config()
	if errs := r.restartOnly(old, next); len(errs) > 0 {
		return r.refuse(reloadInvalid, next.Source(), errors.Join(errs...))
	}
	for i, h := range r.reloads {
		if err := h.apply(old, next); err != nil {
			for j := i - 1; j >= 0; j-- {
				if rerr := r.reloads[j].apply(next, old); rerr != nil {
					r.lg.Error("config reload: undoing a hook failed", zap.Error(rerr))
				}
			}
			return r.refuse(reloadError, next.Source(), fmt.Errorf("relay: reload: %w", err))
		}
	}
	r.cfg.Store(next)
	r.m.reloads.WithLabelValues(reloadOK).Inc()
	r.m.lastReloadSuccess.Set(float64(time.Now().UnixNano()) / 1e9)
	r.lg.Info("config reloaded", zap.String("path", next.Source()), zap.Strings("changed", changedPaths(old, next)))
	return nil
}

// refuse counts and logs a refused or failed reload, every problem on its
// own line as it is (the log's problems list holds the problems alone),
// and returns its error: for a refused file or content (every result but
// "error": the file could not be read), ErrReloadInvalid on a line of its
// own above the problems ("config reload refused; the running
// config is kept:\nrelay.yaml: cache.max_resources (line 8): ...").
func (r *Relay) refuse(result, path string, problems error) error {
	r.m.reloads.WithLabelValues(result).Inc()
	r.lg.Error("config reload refused; the running config is kept", zap.String("path", path),
		zap.String("result", result), zap.Strings("problems", strings.Split(problems.Error(), "\n")))
	if result == reloadError {
		return problems
	}
	return fmt.Errorf("%w; the running config is kept:\n%w", ErrReloadInvalid, problems)
}

// restartOnly lists the fields next changes that no reload hook claims.
func (r *Relay) restartOnly(old, next *config.Config) []error {
	claimed := map[string]bool{}
	for _, h := range r.reloads {
		for _, p := range h.paths {
			claimed[p] = true
		}
	}
	var errs []error
	for _, p := range changedPaths(old, next) {
		if !claimedPath(claimed, p) {
			errs = append(errs, fmt.Errorf("%s: changing it needs a restart", p))
		}
	}
	return errs
}

// claimedPath: p or a parent of p is claimed.
func claimedPath(claimed map[string]bool, p string) bool {
	for {
		if claimed[p] {
			return true
		}
		i := strings.LastIndexByte(p, '.')
		if i < 0 {
			return false
		}
		p = p[:i]
	}
}

// changedPaths lists the YAML paths of the leaf fields (or whole lists)
// that differ between a and b.
func changedPaths(a, b *config.Config) []string {
	var out []string
	diffFields(reflect.ValueOf(a).Elem(), reflect.ValueOf(b).Elem(), "", &out)
	return out
}

func diffFields(a, b reflect.Value, prefix string, out *[]string) {
	t := a.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "" || name == "-" {
			continue
		}
		path := name
		if prefix != "" {
			path = prefix + "." + name
		}
		fa, fb := a.Field(i), b.Field(i)
		if f.Type.Kind() == reflect.Struct {
			diffFields(fa, fb, path, out)
			continue
		}
		if !reflect.DeepEqual(fa.Interface(), fb.Interface()) {
			*out = append(*out, path)
		}
	}
}
