package admin

import (
	"maps"
	"slices"
	"time"

	"github.com/xds-relay/xds-relay/internal/cache"
	"github.com/xds-relay/xds-relay/internal/csds"
	"github.com/xds-relay/xds-relay/internal/delivery"
	"github.com/xds-relay/xds-relay/internal/downstream"
	"github.com/xds-relay/xds-relay/internal/propagation"
	"github.com/xds-relay/xds-relay/internal/upstream"
	"github.com/xds-relay/xds-relay/internal/xdstype"
)

// maxStatusLinks bounds the upstream links the status page lists one by
// one; every link is counted in its authority's row (an aggregation group
// keyed on a client field can make many links).
const maxStatusLinks = 100

// Status is what the status page shows: each part is a total or bounded
// (no list grows with the number of clients or resources).
type Status struct {
	Time    time.Time `json:"time"`
	UptimeS float64   `json:"uptime_s"`
	// Ready is "ready" or why /readyz answers 503.
	Ready       string            `json:"ready"`
	Authorities []AuthorityStatus `json:"authorities"`
	// Links are the first maxStatusLinks upstream links (by authority,
	// group); LinksTruncated says there are more (/debug/upstreams lists
	// them all).
	Links          []upstream.LinkStatus   `json:"links"`
	LinksTruncated bool                    `json:"links_truncated"`
	Clients        downstream.ClientCounts `json:"clients"`
	// ClientStates: the first csds.PageClients client streams, their
	// resources counted by type as synced, NACKed or pending (internal/csds).
	ClientStates csds.Page            `json:"client_states"`
	Cache        CacheStatus          `json:"cache"`
	Nacks        downstream.NacksList `json:"nacks"`
	// Delivery: held removals with their release action, the latest
	// invalid origin versions (internal/delivery; bounded).
	Delivery delivery.Page `json:"delivery"`
	// Propagation: the latest origin changes and their convergence
	// (internal/propagation).
	Propagation propagation.Summary `json:"propagation"`
}

// AuthorityStatus sums up an authority's upstream links.
type AuthorityStatus struct {
	Name      string   `json:"name"`
	Origins   []string `json:"origins"` // configured, in failover order
	Transport string   `json:"transport"`
	// Links counts its upstream links (the xdstp one and one per
	// aggregation group), States them by state; none while no client has
	// asked for anything of it.
	Links  int            `json:"links"`
	States map[string]int `json:"states"`
	// InUse: the origins its links use now.
	InUse []string `json:"in_use"`
	// LastError: the error of a link that has not recovered (the xdstp
	// link's first), and LastErrorAt when it happened; both clear once its
	// origin answers again.
	LastError   string     `json:"last_error,omitempty"`
	LastErrorAt *time.Time `json:"last_error_at,omitempty"`
	// OriginChecks: what is known of each origin (resolve, connect) besides
	// its links; a failed one shows even before any client came.
	OriginChecks []upstream.OriginCheck `json:"origin_checks"`
	// LastResponseAgeS: the newest response of any of its links, seconds
	// ago; absent when none came yet.
	LastResponseAgeS *float64 `json:"last_response_age_s,omitempty"`
	// Subscriptions: names its links ask for, by type label.
	Subscriptions map[string]int `json:"subscriptions"`
}

// CacheStatus is the cache's totals and hit ratio (0 to 1).
type CacheStatus struct {
	cache.Stats
	HitRatio float64 `json:"hit_ratio"`
}

// statusSources is where the status data comes from; built by AddPages.
type statusSources struct {
	Sources              // read-only after AddPages
	started time.Time    // read-only after AddPages
	ready   func() error // read-only after AddPages (Options.Ready)
}

// status gathers Status. Its cost is O(authorities + upstream links + the
// served types), whatever the number of clients or resources, plus the
// client table's, bounded by csds.PageClients and its entries, plus the
// held removals' (internal/delivery: a walk of the resources held).
func (s *statusSources) status() Status {
	now := time.Now()
	cfg := s.Config()
	st := Status{Time: now, UptimeS: now.Sub(s.started).Seconds(), Ready: "ready",
		Authorities: []AuthorityStatus{}, Links: []upstream.LinkStatus{}}
	if err := s.ready(); err != nil {
		st.Ready = err.Error()
	}
	links := s.Upstream.Status()
	byName := make(map[string]*AuthorityStatus, len(cfg.Authorities))
	for _, a := range cfg.Authorities {
		checks := s.Upstream.OriginChecks(a.Name)
		if checks == nil {
			checks = []upstream.OriginCheck{}
		}
		st.Authorities = append(st.Authorities, AuthorityStatus{Name: a.Name, Origins: a.Origins, Transport: a.Transport,
			States: map[string]int{}, InUse: []string{}, Subscriptions: map[string]int{}, OriginChecks: checks})
	}
	for i := range st.Authorities {
		byName[st.Authorities[i].Name] = &st.Authorities[i]
	}
	for _, l := range links {
		a := byName[l.Authority]
		if a == nil {
			continue // an authority a reload removed
		}
		a.Links++
		a.States[l.State]++
		if l.Origin != "" && !slices.Contains(a.InUse, l.Origin) {
			a.InUse = append(a.InUse, l.Origin)
		}
		if a.LastError == "" {
			a.LastError, a.LastErrorAt = l.LastError, l.LastErrorAt
		}
		if l.LastResponseAgeS != nil && (a.LastResponseAgeS == nil || *l.LastResponseAgeS < *a.LastResponseAgeS) {
			age := *l.LastResponseAgeS
			a.LastResponseAgeS = &age
		}
		for t, n := range l.Subscriptions {
			a.Subscriptions[xdstype.Label(t)] += n
		}
	}
	if len(links) > maxStatusLinks {
		links, st.LinksTruncated = links[:maxStatusLinks], true
	}
	st.Links = append(st.Links, links...)
	st.Clients = s.Clients.ClientCounts()
	st.ClientStates = s.CSDS.Page()
	stats := s.Cache.Stats()
	st.Cache = CacheStatus{Stats: stats, HitRatio: stats.HitRatio()}
	st.Nacks.Recent, st.Nacks.Total = s.Clients.Nacks()
	st.Delivery = s.Delivery.Page()
	st.Propagation = s.Ledger.Summary()
	return st
}

// sortedKeys is for the template: a map's keys in order.
func sortedKeys(m map[string]int) []string { return slices.Sorted(maps.Keys(m)) }
