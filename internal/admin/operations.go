package admin

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

// maxLogLevelBody bounds a PUT /debug/log_level body.
const maxLogLevelBody = 1 << 10

// The endpoints that change the running relay: reload and log level.
// State changes only by the documented method (405 with Allow otherwise).

// handleOperations mounts the reload and log level endpoints.
func (s *Server) handleOperations() {
	s.handle(ReloadPath, "POST: re-read the config file, as SIGHUP does (400 with every problem when refused)", http.HandlerFunc(s.serveReload))
	s.handle(LogLevelPath, "GET: the log level; PUT ?level=debug|info|warn|error: set it until the next reload that changes log.level", http.HandlerFunc(s.serveLogLevel))
}

func (s *Server) serveReload(w http.ResponseWriter, req *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	if req.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "use POST", http.StatusMethodNotAllowed)
		return
	}
	err := s.ops.Reload()
	switch {
	case err == nil:
		fmt.Fprintln(w, "config reloaded")
	case errors.Is(err, s.ops.ReloadRefused):
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprintln(w, err)
	default:
		w.WriteHeader(http.StatusInternalServerError)
		fmt.Fprintln(w, err)
	}
}

func (s *Server) serveLogLevel(w http.ResponseWriter, req *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	lvl := s.ops.Level
	if lvl == nil {
		http.Error(w, "this relay's logger has a fixed level", http.StatusNotImplemented)
		return
	}
	switch req.Method {
	case http.MethodGet, http.MethodHead:
		fmt.Fprintln(w, lvl.Level())
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
	old := lvl.Level()
	lvl.SetLevel(level)
	s.lg.Warn("log level changed", zap.Stringer("from", old), zap.Stringer("to", level), zap.String("by", "PUT "+LogLevelPath))
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
