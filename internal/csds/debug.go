package csds

import (
	"context"
	"slices"
	"sort"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"

	"github.com/xds-relay/xds-relay/internal/downstream"
	"github.com/xds-relay/xds-relay/internal/xdstype"
)

// Summary is the report counted per client and type (no names), what an
// operator reads first: internal/admin serves it as /debug/csds.
type Summary struct {
	// Matched counts the connected client streams selected (?node_id=,
	// else all); Clients lists the first of them, by stream id, within
	// the response bounds; ResourcesCut counts entries left out of the
	// counts once the bound on entries was reached.
	Matched      int             `json:"matched"`
	Clients      []ClientSummary `json:"clients"`
	ResourcesCut int             `json:"resources_cut"`
	MaxClients   int             `json:"max_clients"`
	MaxResources int             `json:"max_resources"`
}

// ClientSummary is one client stream's counts.
type ClientSummary struct {
	ID      uint64        `json:"id"`
	NodeID  string        `json:"node_id"`
	Cluster string        `json:"cluster"`
	Variant string        `json:"variant"`
	Stream  string        `json:"stream"`
	Peer    string        `json:"peer"`
	Types   []TypeSummary `json:"types"`
	// ResourcesCut: this client's entries not counted (bound reached).
	ResourcesCut int `json:"resources_cut,omitempty"`
}

// TypeSummary counts one client's resources of one type by where they
// stand (downstream.ResourceState); Pending counts those also owed a newer
// state; LastNack is the error of a NACKed one.
type TypeSummary struct {
	Type      string `json:"type"` // xdstype.Label
	Acked     int    `json:"acked"`
	Nacked    int    `json:"nacked"`
	Sent      int    `json:"sent"` // not answered yet
	Requested int    `json:"requested"`
	Pending   int    `json:"pending"`
	LastNack  string `json:"last_nack,omitempty"`
}

// Summary reports the clients sel selects (nil: all), counted.
func (s *Server) summary(ctx context.Context, sel selector) (Summary, error) {
	rep, err := s.report(ctx, downstream.StatusQuery{Match: sel, MaxClients: s.maxClients, MaxResources: s.maxResources})
	if err != nil {
		return Summary{}, err
	}
	out := Summary{Matched: rep.Matched, ResourcesCut: rep.ResourcesCut, MaxClients: s.maxClients, MaxResources: s.maxResources,
		Clients: make([]ClientSummary, 0, len(rep.Clients))}
	for _, c := range rep.Clients {
		out.Clients = append(out.Clients, summarize(c))
	}
	return out, nil
}

func summarize(c downstream.ClientStatus) ClientSummary {
	cs := ClientSummary{ID: c.ID, NodeID: c.Node.GetId(), Cluster: c.Node.GetCluster(), Variant: c.Variant, Stream: c.Stream,
		Peer: c.Peer, Types: []TypeSummary{}, ResourcesCut: c.ResourcesCut}
	byType := map[string]*TypeSummary{}
	var order []string
	for i := range c.Resources {
		r := &c.Resources[i]
		t, ok := byType[r.TypeURL]
		if !ok {
			t = &TypeSummary{Type: xdstype.Label(r.TypeURL)}
			byType[r.TypeURL] = t
			order = append(order, r.TypeURL)
		}
		switch r.State {
		case downstream.ResourceAcked:
			t.Acked++
		case downstream.ResourceNacked:
			t.Nacked++
			if r.Nack != nil {
				t.LastNack = r.Nack.Message
			}
		case downstream.ResourceSent:
			t.Sent++
		case downstream.ResourceRequested:
			t.Requested++
		}
		if r.Pending {
			t.Pending++
		}
	}
	sort.Strings(order)
	for _, u := range order {
		cs.Types = append(cs.Types, *byType[u])
	}
	return cs
}

// Debug is what /debug/csds shows: the client streams of node id nodeID
// ("": all), counted, and note, the value of TruncatedHeader when the
// answer was cut ("" when not). An error: no report could be built now
// (the relay answers 503).
func (s *Server) Debug(ctx context.Context, nodeID string) (sum Summary, note string, err error) {
	s.m.requests.WithLabelValues(methodDebug).Inc()
	var sel selector
	if nodeID != "" {
		sel = func(n *corev3.Node) bool { return n.GetId() == nodeID }
	}
	sum, err = s.summary(ctx, sel)
	if err != nil {
		return Summary{}, "", err
	}
	return sum, s.note(len(sum.Clients), sum.Matched, sum.ResourcesCut), nil
}

// The status page's table: the first PageClients client streams, at most
// pageResources entries counted over them. Small and fixed bounds, so the
// page (refreshed every few seconds) takes no building slot.
const (
	PageClients   = 20
	pageResources = 5000
)

// Page is what the status page shows of client status.
type Page struct {
	// Matched counts every connected client stream; Rows are the first
	// PageClients, by stream id.
	Matched int       `json:"matched"`
	Rows    []PageRow `json:"rows"`
}

// PageRow is one client stream: its resources by type label, counted as
// synced (ACKed, nothing newer owed), NACKed, or pending (sent and not
// answered, requested and not sent, or owed a newer state); a type with
// none of a kind is left out of that map.
type PageRow struct {
	Client  string         `json:"client"` // node id
	Variant string         `json:"variant"`
	Types   []string       `json:"types"` // labels, sorted
	Synced  map[string]int `json:"synced"`
	Nacked  map[string]int `json:"nacked"`
	Pending map[string]int `json:"pending"`
}

// Page reports the status page's table.
func (s *Server) Page() Page {
	rep := s.src.ConfigStatus(downstream.StatusQuery{MaxClients: PageClients, MaxResources: pageResources})
	out := Page{Matched: rep.Matched, Rows: make([]PageRow, 0, len(rep.Clients))}
	for _, c := range rep.Clients {
		row := PageRow{Client: c.Node.GetId(), Variant: c.Variant, Types: []string{},
			Synced: map[string]int{}, Nacked: map[string]int{}, Pending: map[string]int{}}
		for i := range c.Resources {
			r := &c.Resources[i]
			l := xdstype.Label(r.TypeURL)
			if !slices.Contains(row.Types, l) {
				row.Types = append(row.Types, l)
			}
			switch {
			case r.State == downstream.ResourceNacked:
				row.Nacked[l]++
			case r.State == downstream.ResourceAcked && !r.Pending:
				row.Synced[l]++
			default:
				row.Pending[l]++
			}
		}
		sort.Strings(row.Types)
		out.Rows = append(out.Rows, row)
	}
	return out
}
