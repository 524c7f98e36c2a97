package admin

import (
	"encoding/json"
	"errors"
	"net/http"
)

// The JSON pages are written here, by one writer: the components return
// plain values (pages.go) and jsonPage serves them.

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
