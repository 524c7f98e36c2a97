package loadgen

import (
	"encoding/json"
	"net/http"
)

// Handler serves the fleet's control endpoints, for a harness:
//
//	GET  /status     Status as JSON
//	GET  /summary    Summary as JSON
//	GET  /clients    ClientCounts as JSON: what each client received
//	POST /reconnect  start a reconnect storm (returns at once)
func (f *Fleet) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /status", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, f.Status())
	})
	mux.HandleFunc("GET /summary", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, f.Summary())
	})
	mux.HandleFunc("GET /clients", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, f.ClientCounts())
	})
	mux.HandleFunc("POST /reconnect", func(w http.ResponseWriter, _ *http.Request) {
		f.Reconnect()
		w.WriteHeader(http.StatusAccepted)
	})
	return mux
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v) // the peer hung up: nothing to do
}
