package admin

import (
	"bytes"
	"embed"
	"fmt"
	"html/template"
	"net/http"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/xds-relay/xds-relay/config"
	"github.com/xds-relay/xds-relay/internal/csds"
	"github.com/xds-relay/xds-relay/internal/delivery"
)

// statusCSP lets the page load only its own script, style and JSON: no
// inline code, nothing from elsewhere.
// Forms may post to the relay itself only (the Delivery section's release
// button).
const statusCSP = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

//go:embed assets/status.html assets/status.js assets/status.css
var assets embed.FS

// statusTemplate renders the page without JavaScript; assets/status.js
// redraws it from StatusPath with the same formatting.
var statusTemplate = template.Must(template.New("status.html").Funcs(template.FuncMap{
	"join":       func(s []string) string { return strings.Join(s, ", ") },
	"counts":     func(m map[string]int) string { return formatCounts(m, false) },
	"typeCounts": func(m map[string]int) string { return formatCounts(m, true) },
	"short":      shortType,
	"shortAll":   formatTypes,
	"states":     formatClientStates,
	"age":        formatAge,
	"errAt":      formatErrAt,
	"authErrors": formatAuthorityErrors,
	"uptime":     func(s float64) string { return time.Duration(s * float64(time.Second)).Truncate(time.Second).String() },
	"clock":      func(t time.Time) string { return t.UTC().Format("15:04:05") },
	"bytes":      formatBytes,
	"ratio":      formatRatio,
	"reason":     formatHoldReason,
	"since":      formatHeldSince,
	"heldNames":  formatHeldNames,
	"ago":        formatSince,
	"nackedBy":   formatNackedBy,
	"holders":    formatHolders,
	"wavesOpen":  formatWavesOpen,
	"progress":   formatWaveProgress,
	"invalidClock": func(s string) string {
		if len(s) >= 19 {
			return s[11:19]
		}
		return s
	},
}).ParseFS(assets, "assets/status.html"))

// addStatusPages mounts the status page (/), its JSON (StatusPath) and
// assets.
func (s *Server) addStatusPages(src *statusSources) {
	lg := s.lg.Named("status")
	s.handle(StatusPagePath, "status page: authorities, upstream state, clients, cache, recent NACKs (refreshes itself)", http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.URL.Path != StatusPagePath {
			http.NotFound(w, req)
			return
		}
		var buf bytes.Buffer
		if err := statusTemplate.Execute(&buf, src.status()); err != nil {
			lg.Error("status page not rendered", zap.Error(err))
			http.Error(w, "status page: "+err.Error(), http.StatusInternalServerError)
			return
		}
		pageHeaders(w, "text/html; charset=utf-8")
		_, _ = w.Write(buf.Bytes())
	}))
	s.handle(StatusPath, "everything the status page shows (JSON)", jsonPage(StatusPath, func(_ *http.Request, h http.Header) (any, error) {
		h.Set("Cache-Control", "no-store")
		return src.status(), nil
	}))
	s.handle(StatusJSPath, "", assetHandler("assets/status.js", "text/javascript; charset=utf-8"))
	s.handle(StatusCSSPath, "", assetHandler("assets/status.css", "text/css; charset=utf-8"))
}

// configPage is ConfigPath: the running config, secrets redacted, as YAML
// (shown inline by browsers) or JSON (?format=json).
func configPage(running func() *config.Config, lg *zap.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		cfg := running()
		var out []byte
		var err error
		ctype := "text/plain; charset=utf-8" // YAML, shown inline by browsers
		switch f := req.URL.Query().Get("format"); f {
		case "", "yaml":
			out, err = config.Redacted(cfg)
		case "json":
			out, err = config.RedactedJSON(cfg)
			ctype = "application/json"
		default:
			http.Error(w, fmt.Sprintf("%s: format %q is not one of yaml, json", ConfigPath, f), http.StatusBadRequest)
			return
		}
		if err != nil {
			lg.Error("config not rendered", zap.Error(err))
			http.Error(w, ConfigPath+": "+err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", ctype)
		w.Header().Set("X-Content-Type-Options", "nosniff")
		_, _ = w.Write(out)
	})
}

// pageHeaders sets the content type and the headers that keep the page to
// its own files.
func pageHeaders(w http.ResponseWriter, ctype string) {
	h := w.Header()
	h.Set("Content-Type", ctype)
	h.Set("Content-Security-Policy", statusCSP)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")
}

func assetHandler(name, ctype string) http.Handler {
	body, err := assets.ReadFile(name)
	if err != nil {
		panic("admin: embedded " + name + ": " + err.Error()) // embedded at build time
	}
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		pageHeaders(w, ctype)
		_, _ = w.Write(body)
	})
}

// The formatting below is mirrored by assets/status.js.

// shortType names a type by its last dotted part: "Cluster" for
// envoy.config.cluster.v3.Cluster or its type URL.
func shortType(s string) string { return s[strings.LastIndex(s, ".")+1:] }

// formatCounts writes m as "k: n, ..." ordered by key; with shorten, keys
// are types named by shortType (counts that shorten alike are summed).
func formatCounts(m map[string]int, shorten bool) string {
	out := make(map[string]int, len(m))
	for k, n := range m {
		if shorten {
			k = shortType(k)
		}
		out[k] += n
	}
	parts := make([]string, 0, len(out))
	for _, k := range sortedKeys(out) {
		parts = append(parts, fmt.Sprintf("%s: %d", k, out[k]))
	}
	return strings.Join(parts, ", ")
}

// formatTypes names types by shortType, joined (status.js: shortAll).
func formatTypes(ts []string) string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = shortType(t)
	}
	return strings.Join(out, ", ")
}

// formatClientStates says how many clients the table lists (status.js:
// states).
func formatClientStates(p csds.Page) string {
	if p.Matched > len(p.Rows) {
		return fmt.Sprintf("the first %d of %d", len(p.Rows), p.Matched)
	}
	return fmt.Sprintf("%d", len(p.Rows))
}

// formatErrAt is an error with the time it happened (status.js: errAt).
func formatErrAt(err string, at *time.Time) string {
	if err == "" || at == nil {
		return err
	}
	return at.UTC().Format("15:04:05") + " UTC: " + err
}

// formatAuthorityErrors is an authority's link error and its failed
// origin checks, with their times (status.js: authErrors).
func formatAuthorityErrors(a AuthorityStatus) string {
	var out []string
	if a.LastError != "" {
		out = append(out, formatErrAt(a.LastError, a.LastErrorAt))
	}
	for _, c := range a.OriginChecks {
		if c.State == "failed" {
			out = append(out, formatErrAt("origin "+c.Origin+": "+c.Error, c.At))
		}
		for _, p := range c.FileProblems {
			at, where := p.At, "origin "+c.Origin+": "
			if p.File != "" {
				where += p.File + ": "
			}
			out = append(out, formatErrAt(where+p.Error, &at))
		}
	}
	return strings.Join(out, "; ")
}

func formatAge(s *float64) string {
	if s == nil {
		return "never"
	}
	return fmt.Sprintf("%.1fs ago", *s)
}

func formatBytes(n int64) string {
	if n < 1024 {
		return fmt.Sprintf("%d B", n)
	}
	v, units, i := float64(n)/1024, []string{"KiB", "MiB", "GiB", "TiB"}, 0
	for v >= 1024 && i < len(units)-1 {
		v /= 1024
		i++
	}
	return fmt.Sprintf("%.1f %s (%d B)", v, units[i], n)
}

// formatHoldReason says why removals are held (status.js: holdReason).
func formatHoldReason(reason string) string {
	switch reason {
	case delivery.ReasonShare:
		return "more than max_removed_share of the type removed at once (" + reason + ")"
	case delivery.ReasonEmpty:
		return "a collection or wildcard emptied (" + reason + ")"
	case delivery.ReasonBreaker:
		return "clients NACKed it (" + reason + ")"
	case delivery.ReasonWave:
		return "rolling out wave by wave (" + reason + ")"
	case delivery.ReasonWaveStalled:
		return "its rollout stopped: a wave did not ACK within max_wait (" + reason + ")"
	}
	return reason
}

// formatHeldSince is when a hold began and how long ago (status.js:
// heldSince).
func formatHeldSince(h delivery.HeldRemoval) string { return formatSince(h.Since, h.AgeS) }

// formatSince is a time and how long ago, ageS seconds (status.js: since).
func formatSince(t time.Time, ageS float64) string {
	return fmt.Sprintf("%s UTC (%s ago)", t.UTC().Format("15:04:05"), time.Duration(ageS*float64(time.Second)).Truncate(time.Second))
}

// formatNackedBy is who tripped a held version (status.js: nackedBy).
func formatNackedBy(v delivery.HeldVersion) string {
	who := fmt.Sprintf("%d client(s)", len(v.Nackers))
	if v.RelayBelow {
		who += ", a relay below among them"
	}
	if len(v.Nackers) > 0 {
		who += fmt.Sprintf("; %s: %s", v.Nackers[0].Node, v.Nack)
	}
	return who
}

// formatHolders is how many clients hold which version of a held one's
// resource (status.js: holders).
func formatHolders(v delivery.HeldVersion) string {
	if len(v.Holders) == 0 {
		return "none connected"
	}
	parts := make([]string, 0, len(v.Holders))
	for _, h := range v.Holders {
		parts = append(parts, fmt.Sprintf("%s %.8s: %d (%d ACKed)", h.Which, h.Version, h.Clients, h.Acked))
	}
	return strings.Join(parts, ", ")
}

// formatWavesOpen is how far a rollout is (status.js: wavesOpen).
func formatWavesOpen(r delivery.RolloutView) string {
	out := fmt.Sprintf("%d of %d open", min(r.Open, r.Waves), r.Waves)
	if r.Stalled {
		out += ", stopped (release to go on)"
	}
	return out
}

// formatWaveProgress is each wave's clients, sent and ACKed, everyone
// else last (status.js: waveProgress).
func formatWaveProgress(r delivery.RolloutView) string {
	parts := make([]string, 0, len(r.Progress))
	for i, w := range r.Progress {
		name := fmt.Sprintf("wave %d", w.Wave)
		if i == len(r.Progress)-1 {
			name = "everyone else"
		}
		parts = append(parts, fmt.Sprintf("%s: %d clients, %d sent, %d ACKed", name, w.Clients, w.Sent, w.Acked))
	}
	return strings.Join(parts, "; ")
}

// formatHeldNames is how many resources are held and the first names
// (status.js: heldNames).
func formatHeldNames(h delivery.HeldRemoval) string {
	more := ""
	if h.Resources > len(h.Names) {
		more = ", …"
	}
	return fmt.Sprintf("%d: %s%s", h.Resources, strings.Join(h.Names, ", "), more)
}

func formatRatio(c CacheStatus) string {
	if c.Hits+c.Misses == 0 {
		return "n/a (no subscriptions yet)"
	}
	return fmt.Sprintf("%.1f%% (%d hits, %d misses)", c.HitRatio*100, c.Hits, c.Misses)
}
