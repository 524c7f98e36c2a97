package relay

import (
	"encoding/json"
	"errors"
	"net/http"

	"github.com/xds-relay/xds-relay/internal/cache"
	"github.com/xds-relay/xds-relay/internal/csds"
	"github.com/xds-relay/xds-relay/internal/downstream"
	"github.com/xds-relay/xds-relay/internal/upstream"
)

// The admin listener's JSON pages: the components return plain values
// (cache.Inspect, upstream Links, downstream ClientsPage and NacksPage,
// csds Debug, the status page's status) and the relay serves them here,
// with the one JSON writer. No component imports net/http for its page.

// cachePage is cache.CachePath: the cached keys ParseFilter's query
// selects; a bad parameter is a 400 naming it.
func cachePage(c *cache.Cache) http.Handler {
	return jsonPage(cache.CachePath, func(req *http.Request, _ http.Header) (any, error) {
		f, err := cache.ParseFilter(req.URL.Query())
		if err != nil {
			return nil, pageError{http.StatusBadRequest, err}
		}
		return c.Inspect(f), nil
	})
}

// upstreamsPage is upstream.UpstreamsPath: every link, and every
// authority without one.
func upstreamsPage(up *upstream.Manager) http.Handler {
	return jsonPage(upstream.UpstreamsPath, func(*http.Request, http.Header) (any, error) {
		return up.Links(), nil
	})
}

// clientsPage is downstream.ClientsPath: the connected clients, with
// downstream.ClientsCutHeader when not all of them are listed.
func clientsPage(ds *downstream.Server) http.Handler {
	return jsonPage(downstream.ClientsPath, func(_ *http.Request, h http.Header) (any, error) {
		clients, cut := ds.ClientsPage()
		if cut != "" {
			h.Set(downstream.ClientsCutHeader, cut)
		}
		return clients, nil
	})
}

// nacksPage is downstream.NacksPath: the recent client NACKs.
func nacksPage(ds *downstream.Server) http.Handler {
	return jsonPage(downstream.NacksPath, func(*http.Request, http.Header) (any, error) {
		return ds.NacksPage(), nil
	})
}

// csdsPage is csds.DebugPath: client status counted per client stream
// (?node_id= for one node), with csds.TruncatedHeader when cut; 503 when
// no report can be built now. Never cached by the browser.
func csdsPage(s *csds.Server) http.Handler {
	return jsonPage(csds.DebugPath, func(req *http.Request, h http.Header) (any, error) {
		sum, note, err := s.Debug(req.Context(), req.URL.Query().Get("node_id"))
		if err != nil {
			return nil, pageError{http.StatusServiceUnavailable, err}
		}
		if note != "" {
			h.Set(csds.TruncatedHeader, note)
		}
		h.Set("Cache-Control", "no-store")
		return sum, nil
	})
}

// jsonPage serves the value answer returns as indented JSON (writeJSON).
// answer may set headers on h (a truncation note, Cache-Control). An
// error is answered as text, "<path>: <error>", with the status a
// pageError carries (500 for any other error).
func jsonPage(path string, answer func(req *http.Request, h http.Header) (any, error)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		v, err := answer(req, w.Header())
		if err != nil {
			status := http.StatusInternalServerError
			var pe pageError
			if errors.As(err, &pe) {
				status = pe.status
			}
			http.Error(w, path+": "+err.Error(), status)
			return
		}
		writeJSON(w, v)
	})
}

// pageError is a JSON page's refusal, answered with status: 400 for a bad
// query parameter, 503 when the answer cannot be built now.
type pageError struct {
	status int
	err    error
}

func (e pageError) Error() string { return e.err.Error() }
func (e pageError) Unwrap() error { return e.err }

// writeJSON is the admin listener's one JSON writer: application/json,
// indented two spaces.
func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v) // the client hung up: nothing to do
}
