package relay

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/xds-relay/xds-relay/internal/xdstest"
)

// TestJSONPages: every admin JSON page is written by writeJSON, with the
// headers each had when its component served it: application/json, and
// Cache-Control: no-store only on /debug/status and /debug/csds.
func TestJSONPages(t *testing.T) {
	r := startRelay(t, testConfig(t))
	base := "http://" + r.AdminAddr()
	client := &http.Client{Timeout: xdstest.WaitTimeout, Transport: &http.Transport{DisableKeepAlives: true}}
	for _, tc := range []struct {
		path      string
		noStore   bool
		bodyStart string
	}{
		{path: "/debug/upstreams", bodyStart: "[\n  {\n    \"authority\": \"auth.example\""},
		{path: "/debug/clients", bodyStart: "[]\n"},
		{path: "/debug/nacks", bodyStart: "{\n  \"total\": 0"},
		{path: "/debug/cache", bodyStart: "{\n  "},
		{path: "/debug/csds", noStore: true, bodyStart: "{\n  \"matched\": 0"},
		{path: StatusPath, noStore: true, bodyStart: "{\n  "},
	} {
		t.Run(tc.path, func(t *testing.T) {
			resp, err := client.Get(base + tc.path)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" {
				t.Errorf("status %d, content type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
			}
			if got := resp.Header.Get("Cache-Control") == "no-store"; got != tc.noStore {
				t.Errorf("Cache-Control %q, want no-store: %v", resp.Header.Get("Cache-Control"), tc.noStore)
			}
			if !strings.HasPrefix(string(body), tc.bodyStart) || !strings.HasSuffix(string(body), "\n") {
				t.Errorf("body %.200q, want it to start %q (indented JSON, one line feed at the end)", body, tc.bodyStart)
			}
		})
	}
}

// TestJSONPageRefusal: an answer's error is text "<path>: <error>" with
// the status its pageError carries, 500 without one; headers the answer
// set before it failed stay.
func TestJSONPageRefusal(t *testing.T) {
	for _, tc := range []struct {
		name   string
		err    error
		status int
	}{
		{name: "bad parameter", err: pageError{http.StatusBadRequest, errors.New("limit: bad")}, status: http.StatusBadRequest},
		{name: "unavailable", err: pageError{http.StatusServiceUnavailable, errors.New("busy")}, status: http.StatusServiceUnavailable},
		{name: "other", err: errors.New("broken"), status: http.StatusInternalServerError},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := jsonPage("/debug/x", func(_ *http.Request, h http.Header) (any, error) {
				h.Set("X-Note", "kept")
				return nil, tc.err
			})
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/debug/x", nil))
			if rec.Code != tc.status || rec.Body.String() != "/debug/x: "+tc.err.Error()+"\n" || rec.Header().Get("X-Note") != "kept" {
				t.Errorf("status %d, body %q, X-Note %q; want %d, %q", rec.Code, rec.Body.String(), rec.Header().Get("X-Note"), tc.status, "/debug/x: "+tc.err.Error())
			}
		})
	}
}
