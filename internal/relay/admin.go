package relay

import (
	"html/template"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/zap"
)

// adminReadHeaderTimeout bounds how long a client may take to send request
// headers to the admin server. Responses are not bounded: pprof profiles
// stream for as long as asked.
const adminReadHeaderTimeout = 10 * time.Second

// adminPage is one endpoint listed on the /debug/ index.
type adminPage struct {
	Path        string
	Description string
}

// admin is the admin HTTP server's routing: every endpoint is added in New,
// before the server starts, and listed on /debug/.
type admin struct {
	mux   *http.ServeMux     // read-only once serving
	pages []adminPage        // read-only once serving
	m     *metrics           // read-only after newAdmin
	lg    *zap.Logger        // read-only after newAdmin
	ready func() error       // read-only after newAdmin; nil error = ready
	index *template.Template // read-only after newAdmin
	guard *adminGuard        // read-only after newAdmin
}

// newAdmin: allowedHosts returns the running config's admin_allowed_hosts
// (adminguard.go).
func newAdmin(reg *prometheus.Registry, m *metrics, lg *zap.Logger, ready func() error, allowedHosts func() []string) *admin {
	a := &admin{
		mux:   http.NewServeMux(),
		m:     m,
		lg:    lg,
		ready: ready,
		index: template.Must(template.New("index").Parse(indexHTML)),
		guard: newAdminGuard(allowedHosts),
	}
	a.handle("/metrics", "Prometheus metrics", promhttp.InstrumentMetricHandler(reg,
		promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorLog: zap.NewStdLog(lg), Registry: reg})))
	a.handle("/healthz", "200 while the process runs", http.HandlerFunc(healthz))
	a.handle("/readyz", "200 while the relay serves, 503 while starting or shutting down", http.HandlerFunc(a.readyz))
	a.handle("/debug/", "this page", http.HandlerFunc(a.debugIndex))
	return a
}

// handle routes pattern (an http.ServeMux pattern) to h, behind the Host
// and cross-origin checks (adminguard.go), counting requests (refused ones
// too, as 403). A non-empty description lists the endpoint on /debug/.
func (a *admin) handle(pattern, description string, h http.Handler) {
	label := strings.TrimPrefix(pattern, "/")
	if label == "" {
		label = "root"
	}
	a.mux.Handle(pattern, promhttp.InstrumentHandlerCounter(
		a.m.adminRequests.MustCurryWith(prometheus.Labels{"handler": label}), a.guard.wrap(h)))
	if description != "" {
		a.pages = append(a.pages, adminPage{Path: pattern, Description: description})
	}
}

func healthz(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = w.Write([]byte("ok\n"))
}

func (a *admin) readyz(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	if err := a.ready(); err != nil {
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte("not ready: " + err.Error() + "\n"))
		return
	}
	_, _ = w.Write([]byte("ready\n"))
}

func (a *admin) debugIndex(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/debug/" {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	if err := a.index.Execute(w, a.pages); err != nil {
		a.lg.Debug("debug index not written", zap.Error(err))
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
