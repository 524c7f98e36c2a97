package delivery

import (
	"fmt"
	"net/url"
	"slices"
	"time"

	"github.com/xds-relay/xds-relay/config"
	"github.com/xds-relay/xds-relay/internal/cache"
)

// Page is what /debug/delivery serves and the status page's Delivery
// section shows: the holds, the invalid versions, the settings. Bounded:
// one row per link, type and reason held, the latest maxRecent invalid
// versions, one row per authority.
type Page struct {
	Held []HeldRemoval `json:"held"`
	// Versions: the versions the NACK breaker holds (the first
	// maxShownHeld); Rollouts: the rollouts whose waves are not all open
	// (the first maxShownHeld).
	Versions []HeldVersion `json:"versions"`
	Rollouts []RolloutView `json:"rollouts"`
	Invalid  InvalidList   `json:"invalid"`
	// Settings: per authority (nack_breaker and waves in effect too).
	Settings []AuthoritySettings `json:"settings"`
}

// maxShownHeld bounds the held versions and the rollouts the page lists.
const maxShownHeld = 20

// HeldVersion is one version the NACK breaker holds.
type HeldVersion struct {
	Authority     string `json:"authority"`
	Group         string `json:"group,omitempty"`
	Type          string `json:"type"`
	Name          string `json:"name"`
	Version       string `json:"version"`
	OriginVersion string `json:"origin_version"`
	Reason        string `json:"reason"`
	// Since: when it tripped; AgeS how long ago.
	Since time.Time `json:"since"`
	AgeS  float64   `json:"age_s"`
	// Nackers: the clients whose NACKs tripped it (RelayBelow: a relay
	// below's own breaker did), and Nack the first one's error.
	Nackers    []NackerView `json:"nackers"`
	RelayBelow bool         `json:"relay_below,omitempty"`
	Nack       string       `json:"nack"`
	// Holders: how many clients hold which version of the resource.
	Holders []VersionHolders `json:"holders"`
	Release string           `json:"release"`
}

// NackerView is one client that NACKed a held version.
type NackerView struct {
	Node    string    `json:"node"`
	At      time.Time `json:"at"`
	Message string    `json:"message"`
}

// VersionHolders is how many clients (streams) hold one version of a
// resource, and how many of them ACKed it. Which: "held" (the version
// held), "last_accepted" (the one clients are served instead), "absent"
// (told it does not exist) or "other".
type VersionHolders struct {
	Version string `json:"version"`
	Which   string `json:"which"`
	Clients int    `json:"clients"`
	Acked   int    `json:"acked"`
}

// RolloutView is one rollout going wave by wave, or stopped.
type RolloutView struct {
	Authority string    `json:"authority"`
	Group     string    `json:"group,omitempty"`
	Type      string    `json:"type"`
	Versions  int       `json:"versions"`
	Names     []string  `json:"names"`
	Arrived   time.Time `json:"arrived"`
	AgeS      float64   `json:"age_s"`
	// Open: the waves open (of Waves); Stalled: a wave's clients did not
	// ACK within max_wait, or the breaker tripped: only a release moves
	// it on.
	Open    int  `json:"open"`
	Waves   int  `json:"waves"`
	Stalled bool `json:"stalled"`
	// Progress: per wave, and everyone else last.
	Progress []WaveProgress `json:"progress"`
	Release  string         `json:"release"`
}

// HeldRemoval is one link's held removals of one type and reason.
type HeldRemoval struct {
	Authority string `json:"authority"`
	Group     string `json:"group,omitempty"`
	Type      string `json:"type"`
	Reason    string `json:"reason"`
	// Resources counts the resources held; Names are the first 10, each
	// cut at 256 bytes.
	Resources int      `json:"resources"`
	Names     []string `json:"names"`
	// Since is when the oldest was held, AgeS how long ago.
	Since time.Time `json:"since"`
	AgeS  float64   `json:"age_s"`
	// ReleaseAt is when release_after releases the oldest; absent: only
	// by hand.
	ReleaseAt *time.Time `json:"release_at,omitempty"`
	// Release is the request that releases them (and the authority's
	// other links' of the type).
	Release string `json:"release"`
}

// InvalidList is the invalid versions: every one counted since start,
// the latest listed (oldest first).
type InvalidList struct {
	Total  int       `json:"total"`
	Recent []Invalid `json:"recent"`
}

// AuthoritySettings is an authority's delivery settings in effect.
type AuthoritySettings struct {
	Authority     string             `json:"authority"`
	Validate      bool               `json:"validate"`
	DeletionGuard DeletionGuardShown `json:"deletion_guard"`
	// NackBreakerClients: 0 is off. Waves: each "share 0.01, min_wait 10s"
	// or "node_clusters [canary-*], min_wait 10s".
	NackBreakerClients int      `json:"nack_breaker_clients"`
	Waves              []string `json:"waves"`
	AckShare           float64  `json:"ack_share"`
	MaxWait            string   `json:"max_wait"`
}

// DeletionGuardShown is config.DeletionGuard as the page shows it.
type DeletionGuardShown struct {
	MaxRemovedShare float64 `json:"max_removed_share"`
	MinResources    int     `json:"min_resources"`
	// ReleaseAfter: "0s" releases only by hand.
	ReleaseAfter string `json:"release_after"`
}

// Page gathers the page. Its cost is that of walking the held resources.
func (d *Delivery) Page() Page {
	s := d.settings.Load()
	now := d.now()
	p := Page{Held: []HeldRemoval{}, Settings: make([]AuthoritySettings, 0, len(s.authorities))}
	for _, h := range d.held.Deferrals() {
		names := make([]string, len(h.Names))
		for i, n := range h.Names {
			names[i] = truncate(n, maxShownName)
		}
		row := HeldRemoval{Authority: h.Link.Authority, Group: h.Link.Group, Type: h.TypeURL, Reason: h.Reason,
			Resources: h.Count, Names: names, Since: h.Since, AgeS: now.Sub(h.Since).Seconds(),
			Release: "POST " + d.releaseURL(h.Link.Authority, h.TypeURL)}
		if after := s.of(h.Link.Authority).DeletionGuard.ReleaseAfter; after > 0 {
			at := h.Since.Add(after)
			row.ReleaseAt = &at
		}
		p.Held = append(p.Held, row)
	}
	d.mu.Lock()
	p.Invalid = InvalidList{Total: d.invalidTotal, Recent: append([]Invalid{}, d.recent...)}
	d.mu.Unlock()
	p.Versions, p.Rollouts = d.heldVersionsPage(now), d.rolloutsPage(now)
	for _, a := range s.authorities {
		p.Settings = append(p.Settings, settingsShown(a, s.of(a)))
	}
	return p
}

// settingsShown is authority a's settings s as the page shows them.
func settingsShown(a string, s config.Delivery) AuthoritySettings {
	g := s.DeletionGuard
	out := AuthoritySettings{Authority: a, Validate: s.Validate,
		DeletionGuard:      DeletionGuardShown{MaxRemovedShare: g.MaxRemovedShare, MinResources: g.MinResources, ReleaseAfter: g.ReleaseAfter.String()},
		NackBreakerClients: s.NackBreaker.Clients, Waves: []string{}, AckShare: s.AckShare, MaxWait: s.MaxWait.String()}
	for _, w := range s.Waves {
		if len(w.NodeClusters) > 0 {
			out.Waves = append(out.Waves, fmt.Sprintf("node_clusters %v, min_wait %s", w.NodeClusters, w.MinWait))
		} else {
			out.Waves = append(out.Waves, fmt.Sprintf("share %g, min_wait %s", w.Share, w.MinWait))
		}
	}
	return out
}

// heldVersionsPage lists the versions the breaker holds (the first
// maxShownHeld, oldest first), with how many clients hold which version.
func (d *Delivery) heldVersionsPage(now time.Time) []HeldVersion {
	d.mu.Lock()
	vs := make([]*version, 0, len(d.trips))
	for v := range d.trips {
		vs = append(vs, v)
	}
	slices.SortFunc(vs, func(a, b *version) int { return a.trip.since.Compare(b.trip.since) })
	vs = vs[:min(len(vs), maxShownHeld)]
	out := make([]HeldVersion, 0, len(vs))
	keys := make([]cache.Key, 0, len(vs))
	for _, v := range vs {
		h := HeldVersion{Authority: v.key.Link.Authority, Group: v.key.Link.Group, Type: v.key.TypeURL,
			Name: truncate(v.key.Name, maxShownName), Version: v.res.Version, OriginVersion: truncate(v.res.OriginVersion, maxShownName),
			Reason: ReasonBreaker, Since: v.trip.since, AgeS: now.Sub(v.trip.since).Seconds(), RelayBelow: v.trip.relay,
			Nack: firstNack(v.trip), Nackers: make([]NackerView, 0, len(v.trip.nackers)), Holders: []VersionHolders{},
			Release: "POST " + d.releaseURL(v.key.Link.Authority, v.key.TypeURL)}
		for _, n := range v.trip.nackers {
			h.Nackers = append(h.Nackers, NackerView{Node: truncate(n.node, maxShownName), At: n.at, Message: n.message})
		}
		out = append(out, h)
		keys = append(keys, v.key)
	}
	d.mu.Unlock()
	d.countHolders(out, keys)
	return out
}

// countHolders fills each held version's Holders from what the clients
// hold of keys (one per version, in order).
func (d *Delivery) countHolders(out []HeldVersion, keys []cache.Key) {
	if d.fleet == nil || len(keys) == 0 {
		return
	}
	accepted := make([]string, len(keys))
	for i, k := range keys {
		if _, _, _, ro := d.held.LookupRollout(k); ro.Accepted != nil {
			accepted[i] = ro.Accepted.Version
		}
	}
	d.fleet.Holdings(keys, func(_ cache.Viewer, i int, version string, acked bool) {
		which := "other"
		switch {
		case version == "":
			which = "absent"
		case version == out[i].Version:
			which = "held"
		case version == accepted[i]:
			which = "last_accepted"
		}
		hs := out[i].Holders
		j := slices.IndexFunc(hs, func(h VersionHolders) bool { return h.Version == version })
		if j < 0 {
			hs = append(hs, VersionHolders{Version: version, Which: which})
			j = len(hs) - 1
		}
		hs[j].Clients++
		if acked {
			hs[j].Acked++
		}
		out[i].Holders = hs
	})
}

// rolloutsPage lists the rollouts whose waves are not all open (the first
// maxShownHeld, oldest first), with each wave's progress.
func (d *Delivery) rolloutsPage(now time.Time) []RolloutView {
	d.mu.Lock()
	var ros []*rollout
	for ro := range d.rollouts {
		if ro.waves != nil && ro.open <= len(ro.waves.waves) {
			ros = append(ros, ro)
		}
	}
	slices.SortFunc(ros, func(a, b *rollout) int { return a.arrived.Compare(b.arrived) })
	ros = ros[:min(len(ros), maxShownHeld)]
	out := make([]RolloutView, 0, len(ros))
	for _, ro := range ros {
		revs := liveRevs(ro)
		out = append(out, RolloutView{Authority: ro.link.Authority, Group: ro.link.Group, Type: ro.typeURL, Versions: len(revs),
			Names: revNames(revs), Arrived: ro.arrived, AgeS: now.Sub(ro.arrived).Seconds(), Open: ro.open, Waves: len(ro.waves.waves),
			Stalled: ro.stalled, Release: "POST " + d.releaseURL(ro.link.Authority, ro.typeURL)})
	}
	d.mu.Unlock()
	for i, ro := range ros {
		out[i].Progress = d.progress(ro)
	}
	return out
}

// releaseURL is the path and query that release authority's held
// removals of typeURL ("" for either: all).
func (d *Delivery) releaseURL(authority, typeURL string) string {
	q := url.Values{}
	if authority != "" {
		q.Set("authority", authority)
	}
	if typeURL != "" {
		q.Set("type", typeURL)
	}
	if len(q) == 0 {
		return d.releasePath
	}
	return d.releasePath + "?" + q.Encode()
}
