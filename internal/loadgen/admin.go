package loadgen

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"
)

// Handler serves the fleet's control endpoints, for a harness:
//
//	GET  /status     Status as JSON
//	GET  /summary    Summary as JSON
//	GET  /clients    ClientCounts as JSON: what each client received
//	POST /reconnect  start a reconnect storm (returns at once)
//	POST /stall?for=D         the stalling clients stop reading for D (stall.go)
//	POST /churn?rate=R        start the churning client (churn.go)
//	DELETE /churn             stop it; ChurnStats as JSON
//	POST /latency             a PhaseRequest as JSON → Latency as JSON (phase.go)
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
	f.fairnessHandlers(mux)
	return mux
}

// fairnessHandlers adds the stall, churn and phase latency endpoints.
func (f *Fleet) fairnessHandlers(mux *http.ServeMux) {
	mux.HandleFunc("POST /stall", func(w http.ResponseWriter, r *http.Request) {
		d, err := time.ParseDuration(r.URL.Query().Get("for"))
		if err != nil || d <= 0 {
			http.Error(w, "want for=<duration>", http.StatusBadRequest)
			return
		}
		f.Stall(d)
		w.WriteHeader(http.StatusAccepted)
	})
	mux.HandleFunc("POST /churn", func(w http.ResponseWriter, r *http.Request) {
		rate, err := strconv.ParseFloat(r.URL.Query().Get("rate"), 64)
		if err == nil {
			err = f.StartChurn(rate)
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.WriteHeader(http.StatusAccepted)
	})
	mux.HandleFunc("DELETE /churn", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, f.StopChurn())
	})
	mux.HandleFunc("POST /latency", func(w http.ResponseWriter, r *http.Request) {
		var req PhaseRequest
		err := json.NewDecoder(r.Body).Decode(&req)
		var l Latency
		if err == nil {
			l, err = f.PhaseLatency(req)
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		writeJSON(w, l)
	})
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v) // the peer hung up: nothing to do
}
