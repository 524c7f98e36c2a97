package admin

import (
	"html/template"
	"net/http"
	"net/http/pprof"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/zap"
)

// ReadHeaderTimeout bounds how long a client may take to send request
// headers to the admin server. Responses are not bounded: pprof profiles
// stream for as long as asked.
const ReadHeaderTimeout = 10 * time.Second

// page is one endpoint listed on the /debug/ index.
type page struct {
	Path        string
	Description string
}

// Options are what New needs of the process: the registry /metrics
// serves, readiness, the Host allow list, and the relay's own operations.
type Options struct {
	// Registry is served on /metrics; admin's own metric is registered on
	// it. nil: a registry of its own.
	Registry *prometheus.Registry
	// Logger; New names it "admin". nil: no logging.
	Logger *zap.Logger
	// Ready is nil while the relay serves and passes its checks; its
	// error is /readyz's 503 and the status page's "ready".
	Ready func() error
	// AllowedHosts returns the running config's admin_allowed_hosts
	// (guard.go).
	AllowedHosts func() []string
	// Pprof serves Go runtime profiles (admin_pprof).
	Pprof bool
	// Reload re-reads the config file (ReloadPath); an error wrapping
	// ReloadRefused is a refusal (400: nothing changed), any other a
	// failure (500).
	Reload        func() error
	ReloadRefused error
	// Level is the logger's level LogLevelPath shows and sets; nil: the
	// level is fixed (501).
	Level *zap.AtomicLevel
}

// Server is the admin listener's handler: every route (routes.go) behind
// the Host and cross-origin checks, counted, and listed on /debug/. Its
// routes are added by New and AddPages, before the relay serves it.
type Server struct {
	mux   *http.ServeMux     // read-only once serving
	pages []page             // read-only once serving
	m     *metrics           // read-only after New
	lg    *zap.Logger        // read-only after New
	ready func() error       // read-only after New; nil error = ready
	index *template.Template // read-only after New
	guard *guard             // read-only after New
	ops   Options            // read-only after New
}

// New builds the admin handler with the process's own routes: /metrics,
// /healthz, /readyz, /debug/, pprof when asked, reload and log level.
// AddPages adds the components' pages.
func New(o Options) *Server {
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	if o.Registry == nil {
		o.Registry = prometheus.NewRegistry()
	}
	s := &Server{
		mux:   http.NewServeMux(),
		m:     newMetrics(o.Registry),
		lg:    o.Logger.Named("admin"),
		ready: o.Ready,
		index: template.Must(template.New("index").Parse(indexHTML)),
		guard: newGuard(o.AllowedHosts),
		ops:   o,
	}
	s.handle("/metrics", "Prometheus metrics", promhttp.InstrumentMetricHandler(o.Registry,
		promhttp.HandlerFor(o.Registry, promhttp.HandlerOpts{ErrorLog: zap.NewStdLog(s.lg), Registry: o.Registry})))
	s.handle("/healthz", "200 while the process runs", http.HandlerFunc(healthz))
	s.handle("/readyz", "200 while the relay serves, 503 while starting or shutting down", http.HandlerFunc(s.readyz))
	s.handle(IndexPath, "this page", http.HandlerFunc(s.debugIndex))
	if o.Pprof {
		s.pprof()
	}
	s.handleOperations() // operations.go
	return s
}

// ServeHTTP serves the admin listener.
func (s *Server) ServeHTTP(w http.ResponseWriter, req *http.Request) { s.mux.ServeHTTP(w, req) }

// handle routes pattern (an http.ServeMux pattern) to h, behind the Host
// and cross-origin checks (guard.go), counting requests (refused ones
// too, as 403). A non-empty description lists the endpoint on /debug/.
func (s *Server) handle(pattern, description string, h http.Handler) {
	label := strings.TrimPrefix(pattern, "/")
	if label == "" {
		label = "root"
	}
	s.mux.Handle(pattern, promhttp.InstrumentHandlerCounter(
		s.m.requests.MustCurryWith(prometheus.Labels{"handler": label}), s.guard.wrap(h)))
	if description != "" {
		s.pages = append(s.pages, page{Path: pattern, Description: description})
	}
}

func healthz(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = w.Write([]byte("ok\n"))
}

func (s *Server) readyz(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	if err := s.ready(); err != nil {
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte("not ready: " + err.Error() + "\n"))
		return
	}
	_, _ = w.Write([]byte("ready\n"))
}

func (s *Server) debugIndex(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != IndexPath {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	if err := s.index.Execute(w, s.pages); err != nil {
		s.lg.Debug("debug index not written", zap.Error(err))
	}
}

const indexHTML = `<!DOCTYPE html>
<html><head><title>xds-relay admin</title></head>
<body>
<h1>xds-relay admin</h1>
<ul>
{{range .}}<li><a href="{{.Path}}">{{.Path}}</a>: {{.Description}}</li>
{{end}}</ul>
</body></html>
`

// pprof serves Go runtime profiles (admin_pprof).
func (s *Server) pprof() {
	s.handle(PprofPath, "Go runtime profiles (pprof)", http.HandlerFunc(pprof.Index))
	s.handle(PprofPath+"cmdline", "", http.HandlerFunc(pprof.Cmdline))
	s.handle(PprofPath+"profile", "", http.HandlerFunc(pprof.Profile))
	s.handle(PprofPath+"symbol", "", http.HandlerFunc(pprof.Symbol))
	s.handle(PprofPath+"trace", "", http.HandlerFunc(pprof.Trace))
}
