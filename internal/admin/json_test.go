package admin

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
)

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
