package delivery

import (
	"net/url"
	"time"
)

// Page is what /debug/delivery serves and the status page's Delivery
// section shows: the holds, the invalid versions, the settings. Bounded:
// one row per link, type and reason held, the latest maxRecent invalid
// versions, one row per authority.
type Page struct {
	Held     []HeldRemoval       `json:"held"`
	Invalid  InvalidList         `json:"invalid"`
	Settings []AuthoritySettings `json:"settings"`
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
			Release: "POST " + ReleaseURL(h.Link.Authority, h.TypeURL)}
		if after := s.of(h.Link.Authority).DeletionGuard.ReleaseAfter; after > 0 {
			at := h.Since.Add(after)
			row.ReleaseAt = &at
		}
		p.Held = append(p.Held, row)
	}
	d.mu.Lock()
	p.Invalid = InvalidList{Total: d.invalidTotal, Recent: append([]Invalid{}, d.recent...)}
	d.mu.Unlock()
	for _, a := range s.authorities {
		g := s.of(a).DeletionGuard
		p.Settings = append(p.Settings, AuthoritySettings{Authority: a, Validate: s.of(a).Validate,
			DeletionGuard: DeletionGuardShown{MaxRemovedShare: g.MaxRemovedShare, MinResources: g.MinResources, ReleaseAfter: g.ReleaseAfter.String()}})
	}
	return p
}

// ReleaseURL is the path and query that release authority's held
// removals of typeURL ("" for either: all).
func ReleaseURL(authority, typeURL string) string {
	q := url.Values{}
	if authority != "" {
		q.Set("authority", authority)
	}
	if typeURL != "" {
		q.Set("type", typeURL)
	}
	if len(q) == 0 {
		return ReleasePath
	}
	return ReleasePath + "?" + q.Encode()
}
