package downstream

import (
	"encoding/json"
	"net/http"
	"sort"
)

// ClientsPath is where the debug list of connected clients is served.
const ClientsPath = "/debug/clients"

// ClientInfo describes one connected client stream (GET /debug/clients).
type ClientInfo struct {
	ID      uint64   `json:"id"`
	NodeID  string   `json:"node_id"`
	Cluster string   `json:"cluster"`
	Variant string   `json:"variant"` // sotw or delta
	Stream  string   `json:"stream"`  // "ads" or the per-type stream's type URL
	Peer    string   `json:"peer"`
	Groups  []string `json:"groups"` // aggregation group keys of legacy names
	// Subscriptions by type URL: the names as the client asked for them.
	Subscriptions map[string]TypeInfo `json:"subscriptions"`
}

// TypeInfo is a client's state for one type.
type TypeInfo struct {
	Names      []string `json:"names"`
	Nacks      int      `json:"nacks,omitempty"`
	LastNack   string   `json:"last_nack,omitempty"`
	AckVersion string   `json:"ack_version,omitempty"` // SotW
}

// Clients returns every connected client, ordered by id.
func (s *Server) Clients() []ClientInfo {
	sessions := s.snapshotSessions()
	out := make([]ClientInfo, 0, len(sessions))
	for _, ss := range sessions {
		out = append(out, ss.describe())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

func (ss *session) describe() ClientInfo {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	ci := ClientInfo{
		ID:            ss.id,
		NodeID:        ss.node.GetId(),
		Cluster:       ss.node.GetCluster(),
		Variant:       ss.variant,
		Stream:        ss.fixedType,
		Peer:          ss.peer,
		Groups:        []string{},
		Subscriptions: make(map[string]TypeInfo, len(ss.types)),
	}
	if ci.Stream == "" {
		ci.Stream = "ads"
	}
	for g := range ss.groups {
		ci.Groups = append(ci.Groups, g)
	}
	sort.Strings(ci.Groups)
	for t, ts := range ss.types {
		ci.Subscriptions[t] = TypeInfo{Names: ts.namesLocked(), Nacks: ts.nackCount, LastNack: ts.lastNack, AckVersion: ts.ackVersion}
	}
	return ci
}

// ClientsHandler serves the JSON list of clients; mount it at ClientsPath.
func (s *Server) ClientsHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(s.Clients())
	})
}
