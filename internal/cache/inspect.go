package cache

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"

	statuspb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
)

// Bounds of a listing: how many entries one answer carries by default and
// at most, and the longest filter value accepted.
const (
	DefaultInspectLimit = 1000
	MaxInspectLimit     = 10000
	MaxInspectFilter    = 2048
)

// Stats are the cache's totals, O(1) to read: what the status page shows.
type Stats struct {
	// Resources and Bytes: present resources, and the bytes the cached
	// keys hold as max_bytes counts them, size.go
	// (xds_relay_cache_resources, xds_relay_cache_bytes).
	Resources int   `json:"resources"`
	Bytes     int64 `json:"bytes"`
	// Hits and Misses since start (xds_relay_cache_hits_total and
	// misses_total, every type).
	Hits   uint64 `json:"hits"`
	Misses uint64 `json:"misses"`
	// Keys: every key the cache knows (resources in any state and
	// collections); WatchedKeys: keys some client watches directly;
	// Unwatched, UnwatchedBytes: the LRU of keys nobody watches.
	Keys           int   `json:"keys"`
	WatchedKeys    int   `json:"watched_keys"`
	Unwatched      int   `json:"unwatched"`
	UnwatchedBytes int64 `json:"unwatched_bytes"`
}

// HitRatio is Hits / (Hits + Misses); 0 when nothing was watched yet.
func (s Stats) HitRatio() float64 {
	if s.Hits+s.Misses == 0 {
		return 0
	}
	return float64(s.Hits) / float64(s.Hits+s.Misses)
}

// Stats returns the cache's totals.
func (c *Cache) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.totals
	st.Keys = len(c.entries)
	st.WatchedKeys = len(c.watchers)
	st.Unwatched = c.lru.Len()
	st.UnwatchedBytes = c.lruBytes
	return st
}

// Filter selects the keys of a listing. Empty fields match everything.
type Filter struct {
	// Prefix the key's name starts with (xdstp names: canonical form).
	Prefix string
	// Authority and TypeURL, when set, must equal the key's.
	Authority string
	TypeURL   string
	// Limit bounds the entries returned (the first by authority, group,
	// type and name); 0 means DefaultInspectLimit.
	Limit int
}

// EntryInfo is what a listing shows of one key.
type EntryInfo struct {
	Authority string `json:"authority"`
	Group     string `json:"group,omitempty"`
	TypeURL   string `json:"type_url"`
	Name      string `json:"name"`
	// Collection: a glob or the type's wildcard; Members counts its present
	// members.
	Collection bool `json:"collection,omitempty"`
	Members    int  `json:"members,omitempty"`
	// State: pending, present or absent (a collection: present once the
	// origin answered it, absent when known empty).
	State string `json:"state"`
	// Version is the relay's (content) version, OriginVersion the origin's.
	Version       string `json:"version,omitempty"`
	OriginVersion string `json:"origin_version,omitempty"`
	Bytes         int    `json:"bytes"`
	// Watchers: client sessions watching this key itself (a member of a
	// watched glob or wildcard counts its watchers on the collection's
	// key); Held: some client watches it, directly or through a
	// collection (held keys are never evicted).
	Watchers int  `json:"watchers"`
	Held     bool `json:"held"`
	// Error is the key's resource error as Lookup reads it (the origin's,
	// or its stream's UNAVAILABLE while pending): "Code: message", the
	// message cut at 256 bytes.
	Error string `json:"error,omitempty"`
}

// Listing is one answer of Inspect.
type Listing struct {
	// Matched counts every key the filter selects; Entries holds the first
	// Limit of them, and Truncated says some were left out.
	Matched   int         `json:"matched"`
	Limit     int         `json:"limit"`
	Truncated bool        `json:"truncated"`
	Entries   []EntryInfo `json:"entries"`
}

func (f Filter) match(k Key) bool {
	return strings.HasPrefix(k.Name, f.Prefix) &&
		(f.Authority == "" || k.Link.Authority == f.Authority) &&
		(f.TypeURL == "" || k.TypeURL == f.TypeURL)
}

func compareKeys(a, b Key) int {
	return cmp.Or(strings.Compare(a.Link.Authority, b.Link.Authority),
		strings.Compare(a.Link.Group, b.Link.Group),
		strings.Compare(a.TypeURL, b.TypeURL),
		strings.Compare(a.Name, b.Name))
}

// Inspect lists the keys f selects, sorted, at most f.Limit of them. The
// lock is held to collect the matching keys (no sorting or formatting
// under it) and again to describe the ones returned; a key dropped in
// between is left out.
func (c *Cache) Inspect(f Filter) Listing {
	if f.Limit <= 0 {
		f.Limit = DefaultInspectLimit
	}
	var keys []Key
	c.mu.Lock()
	for k := range c.entries {
		if f.match(k) {
			keys = append(keys, k)
		}
	}
	c.mu.Unlock()

	out := Listing{Matched: len(keys), Limit: f.Limit, Entries: []EntryInfo{}}
	slices.SortFunc(keys, compareKeys)
	if len(keys) > f.Limit {
		keys, out.Truncated = keys[:f.Limit], true
	}

	c.mu.Lock()
	now := c.now()
	for _, k := range keys {
		e := c.entries[k]
		if e == nil {
			continue
		}
		info := EntryInfo{Authority: k.Link.Authority, Group: k.Link.Group, TypeURL: k.TypeURL, Name: k.Name,
			Collection: e.collection, Watchers: c.watchers[k].size(), Held: c.heldLocked(e)}
		st := c.streamErr[k.Link]
		if e.collection {
			info.State = c.collectionStateLocked(e).String()
			if info.State != StatePending.String() {
				st = nil
			}
			for _, m := range c.membersLocked(k) {
				if m.visibleState(now) == StatePresent {
					info.Members++
				}
			}
		} else {
			info.State = e.visibleState(now).String()
			if info.State != StatePending.String() {
				st = nil
			}
			info.OriginVersion = e.originVersion
			if e.state == StatePresent {
				info.Version, info.Bytes = e.res.Version, int(e.size())
			}
		}
		if e.err != nil {
			st = e.err
		}
		if st != nil {
			info.Error = describeError(st)
		}
		out.Entries = append(out.Entries, info)
	}
	c.mu.Unlock()
	return out
}

// ParseFilter reads a Filter from a listing's query parameters: prefix,
// authority, type (a type URL) and limit (1 to MaxInspectLimit, default
// DefaultInspectLimit). The error names the parameter.
func ParseFilter(q map[string][]string) (Filter, error) {
	get := func(name string) (string, error) {
		v := ""
		if vs := q[name]; len(vs) > 0 {
			v = vs[0]
		}
		if len(v) > MaxInspectFilter {
			return "", fmt.Errorf("%s: %d bytes, at most %d", name, len(v), MaxInspectFilter)
		}
		return v, nil
	}
	var f Filter
	var err error
	if f.Prefix, err = get("prefix"); err != nil {
		return Filter{}, err
	}
	if f.Authority, err = get("authority"); err != nil {
		return Filter{}, err
	}
	if f.TypeURL, err = get("type"); err != nil {
		return Filter{}, err
	}
	limit, err := get("limit")
	if err != nil {
		return Filter{}, err
	}
	f.Limit = DefaultInspectLimit
	if limit != "" {
		n, err := strconv.Atoi(limit)
		if err != nil || n < 1 || n > MaxInspectLimit {
			return Filter{}, fmt.Errorf("limit: %q is not an integer from 1 to %d", limit, MaxInspectLimit)
		}
		f.Limit = n
	}
	return f, nil
}

// describeError is a resource error as /debug/cache shows it: its code and
// message, the message cut at 256 bytes (an origin chose it).
func describeError(st *statuspb.Status) string {
	msg := st.GetMessage()
	if len(msg) > 256 {
		msg = strings.ToValidUTF8(msg[:256], "") + "…"
	}
	return codes.Code(st.GetCode()).String() + ": " + msg
}
