package relay

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// Admin endpoints that change the running relay.
const (
	// ReloadPath: POST re-reads the config file (Reload).
	ReloadPath = "/debug/reload"
	// LogLevelPath: GET shows the log level; PUT sets it (?level=, or the
	// body: "debug" or {"level":"debug"}).
	LogLevelPath = "/debug/log_level"
	// maxLogLevelBody bounds a PUT /debug/log_level body.
	maxLogLevelBody = 1 << 10
)

// handleOperations mounts the reload and log level endpoints.
func (r *Relay) handleOperations() {
	r.admin.handle(ReloadPath, "POST: re-read the config file, as SIGHUP does (400 with every problem when refused)", http.HandlerFunc(r.serveReload))
	r.admin.handle(LogLevelPath, "GET: the log level; PUT ?level=debug|info|warn|error: set it until the next reload that changes log.level", http.HandlerFunc(r.serveLogLevel))
}

func (r *Relay) serveReload(w http.ResponseWriter, req *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	if req.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "use POST", http.StatusMethodNotAllowed)
		return
	}
	err := r.Reload()
	switch {
	case err == nil:
		fmt.Fprintln(w, "config reloaded")
	case errors.Is(err, ErrReloadInvalid):
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprintln(w, err)
	default:
		w.WriteHeader(http.StatusInternalServerError)
		fmt.Fprintln(w, err)
	}
}

func (r *Relay) serveLogLevel(w http.ResponseWriter, req *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	if !r.levelOK {
		http.Error(w, "this relay's logger has a fixed level", http.StatusNotImplemented)
		return
	}
	switch req.Method {
	case http.MethodGet, http.MethodHead:
		fmt.Fprintln(w, r.level.Level())
		return
	case http.MethodPut:
	default:
		w.Header().Set("Allow", "GET, PUT")
		http.Error(w, "use GET or PUT", http.StatusMethodNotAllowed)
		return
	}
	text := req.URL.Query().Get("level")
	if text == "" {
		body, err := io.ReadAll(io.LimitReader(req.Body, maxLogLevelBody+1))
		if err != nil || len(body) > maxLogLevelBody {
			http.Error(w, fmt.Sprintf("log level: body unreadable or over %d bytes", maxLogLevelBody), http.StatusBadRequest)
			return
		}
		text = strings.TrimSpace(string(body))
		var j struct {
			Level string `json:"level"`
		}
		if strings.HasPrefix(text, "{") && json.Unmarshal(body, &j) == nil {
			text = j.Level
		}
	}
	level, err := parseLogLevel(text)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	old := r.level.Level()
	r.level.SetLevel(level)
	r.lg.Warn("log level changed", zap.Stringer("from", old), zap.Stringer("to", level), zap.String("by", "PUT "+LogLevelPath))
	fmt.Fprintln(w, level)
}

// parseLogLevel accepts the config's log levels only.
func parseLogLevel(s string) (zapcore.Level, error) {
	switch s {
	case "debug", "info", "warn", "error":
		return zapcore.ParseLevel(s)
	}
	return 0, fmt.Errorf("log level %q is not one of debug, info, warn, error", truncate(s, 64))
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
