package downstream

import (
	"fmt"
	"sort"
)

// What /debug/clients shows is cut, so that its size does not grow with
// what clients send: every string a client chose is cut as clientText
// cuts it (its first maxClientText bytes, then "…(N bytes)"); a type shows
// its first maxNamesShown names in order and MoreNames counts the rest;
// the page lists the first maxClientsShown clients by id, and ClientsPage
// then says how many there are (internal/admin's ClientsCutHeader).
const (
	maxNamesShown   = 100
	maxClientsShown = 1000
)

// ClientInfo describes one connected client stream (GET /debug/clients).
type ClientInfo struct {
	ID      uint64   `json:"id"`
	NodeID  string   `json:"node_id"`
	Cluster string   `json:"cluster"`
	Variant string   `json:"variant"` // sotw or delta
	Stream  string   `json:"stream"`  // "ads" or the per-type stream's type URL
	Peer    string   `json:"peer"`
	Groups  []string `json:"groups"` // aggregation group keys of legacy names
	// Parked: a send to it has waited send_timeout and it has not read
	// since (downstream.slow_clients: park).
	Parked bool `json:"parked,omitempty"`
	// Subscriptions by type URL: the names as the client asked for them.
	Subscriptions map[string]TypeInfo `json:"subscriptions"`
}

// TypeInfo is a client's state for one type.
type TypeInfo struct {
	Names []string `json:"names"`
	// MoreNames: subscribed names not shown (past the first maxNamesShown).
	MoreNames  int    `json:"more_names,omitempty"`
	Nacks      int    `json:"nacks,omitempty"`
	LastNack   string `json:"last_nack,omitempty"`
	AckVersion string `json:"ack_version,omitempty"` // SotW
}

// Clients returns every connected client, ordered by id.
func (s *Server) Clients() []ClientInfo {
	out, _ := s.clients(-1)
	return out
}

// clients returns the first max connected clients by id (all when max is
// negative), and how many there are.
func (s *Server) clients(max int) ([]ClientInfo, int) {
	sessions := s.snapshotSessions()
	sort.Slice(sessions, func(i, j int) bool { return sessions[i].id < sessions[j].id })
	total := len(sessions)
	if max >= 0 && total > max {
		sessions = sessions[:max]
	}
	out := make([]ClientInfo, 0, len(sessions))
	for _, ss := range sessions {
		out = append(out, ss.describe())
	}
	return out, total
}

func (ss *session) describe() ClientInfo {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	ci := ClientInfo{
		ID:            ss.id,
		NodeID:        clientText(ss.node.GetId()),
		Cluster:       clientText(ss.node.GetCluster()),
		Variant:       string(ss.variant),
		Stream:        ss.fixedType,
		Peer:          ss.peer,
		Groups:        []string{},
		Parked:        ss.parked,
		Subscriptions: make(map[string]TypeInfo, ss.types.len()),
	}
	if ci.Stream == "" {
		ci.Stream = "ads"
	}
	for g := range ss.groups {
		ci.Groups = append(ci.Groups, clientText(g))
	}
	sort.Strings(ci.Groups)
	for t, ts := range ss.types.all() {
		names := ts.namesLocked()
		ti := TypeInfo{AckVersion: clientText(ts.ackVersion)}
		if n := ts.nacks; n != nil {
			ti.Nacks, ti.LastNack = n.count, n.last
		}
		if len(names) > maxNamesShown {
			ti.MoreNames = len(names) - maxNamesShown
			names = names[:maxNamesShown]
		}
		for i, n := range names {
			names[i] = clientText(n)
		}
		ti.Names = names
		ci.Subscriptions[clientText(t)] = ti
	}
	return ci
}

// ClientsPage is what /debug/clients shows (internal/admin serves it): the first maxClientsShown
// connected clients by id, and cut, the value of ClientsCutHeader ("<shown>
// of <total>") when that is not every client, "" when it is.
func (s *Server) ClientsPage() (clients []ClientInfo, cut string) {
	clients, total := s.clients(maxClientsShown)
	if len(clients) < total {
		cut = fmt.Sprintf("%d of %d", len(clients), total)
	}
	return clients, cut
}
