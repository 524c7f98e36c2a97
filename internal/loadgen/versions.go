package loadgen

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// ClientVersion is one version of a resource and how many clients have it
// now. Ordinal numbers a name's versions in the order the fleet first
// received them: v1 is the first the fleet saw (its initial state), v2 the
// next, so an edit at the origin shows as a new ordinal climbing to every
// client.
type ClientVersion struct {
	Type    string `json:"type"` // short (eds, cds, lds, rds, sds) or the type URL
	Name    string `json:"name"`
	Version string `json:"version"` // as the server sent it (delta: the resource's; SotW: the response's)
	Ordinal int    `json:"ordinal"`
	Clients int    `json:"clients"`
}

// Short is the version for a progress line: the name's last path segment,
// its ordinal and clients ("backend-a v2: 100/100 clients").
func (h ClientVersion) Short(clients int) string {
	name := h.Name
	if i := strings.LastIndexByte(strings.SplitN(name, "?", 2)[0], '/'); i >= 0 && i < len(name)-1 {
		name = name[i+1:]
	}
	return fmt.Sprintf("%s v%d: %d/%d clients", name, h.Ordinal, h.Clients, clients)
}

// clientVersions counts, per resource version, the clients having it
// now. The Fleet's mu guards it.
type clientVersions struct {
	byVersion map[resourceVersion]*ClientVersion
	seen      map[resourceKey]int // per resource: how many versions the fleet has seen
	newest    resourceVersion     // the version first seen last
}

// resourceKey is a resource: plain names of different types may be equal.
type resourceKey struct{ typeURL, name string }

// resourceVersion is a version of a resource.
type resourceVersion struct {
	resourceKey
	version string
}

// versionMoved records that a client now has version of name (of
// typeURL) instead of old (when had).
func (f *Fleet) versionMoved(typeURL, name, old string, had bool, version string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	h := &f.clientVersions
	r := resourceKey{typeURL, name}
	if had {
		h.dropLocked(r, old)
	}
	k := resourceVersion{r, version}
	v := h.byVersion[k]
	if v == nil {
		if h.byVersion == nil {
			h.byVersion, h.seen = make(map[resourceVersion]*ClientVersion), make(map[resourceKey]int)
		}
		h.seen[r]++
		v = &ClientVersion{Type: shortType(typeURL), Name: name, Version: version, Ordinal: h.seen[r]}
		h.byVersion[k] = v
		h.newest = k
	}
	v.Clients++
}

// versionDropped records that a client no longer has version of name
// (of typeURL).
func (f *Fleet) versionDropped(typeURL, name, version string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.clientVersions.dropLocked(resourceKey{typeURL, name}, version)
}

func (h *clientVersions) dropLocked(r resourceKey, version string) {
	if v := h.byVersion[resourceVersion{r, version}]; v != nil {
		v.Clients--
	}
}

// newestLocked is the version the fleet first saw last, nil before any.
func (h *clientVersions) newestLocked() *ClientVersion {
	v := h.byVersion[h.newest]
	if v == nil {
		return nil
	}
	cp := *v
	return &cp
}

// latestLocked is the newest version of every resource, by type and
// name.
func (h *clientVersions) latestLocked() []ClientVersion {
	var out []ClientVersion
	for k, v := range h.byVersion {
		if v.Ordinal == h.seen[k.resourceKey] {
			out = append(out, *v)
		}
	}
	slices.SortFunc(out, func(a, b ClientVersion) int { return cmp.Or(cmp.Compare(a.Type, b.Type), cmp.Compare(a.Name, b.Name)) })
	return out
}

// UpdatedClients returns how many clients have received at least n
// updates since they synced: versions that replaced one they had.
func (f *Fleet) UpdatedClients(n int) int {
	k := 0
	for _, c := range f.clients {
		if c.counts.changes.Load() >= int64(n) {
			k++
		}
	}
	return k
}
