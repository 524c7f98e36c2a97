package downstream

import (
	"sync"
	"time"
)

// RecentNacks is how many of the latest client NACKs the relay keeps: a
// fixed ring, whatever the fleet sends.
const RecentNacks = 50

// NackInfo is one client NACK as /debug/nacks and the status page show it.
// Every string the client chose is cut to maxClientText bytes (clientText).
type NackInfo struct {
	Time    time.Time `json:"time"`
	NodeID  string    `json:"node_id"`
	Cluster string    `json:"cluster"`
	Variant string    `json:"variant"` // sotw or delta
	TypeURL string    `json:"type_url"`
	Nonce   string    `json:"nonce"`
	// VersionInfo is the SotW version the client says it still holds.
	VersionInfo string `json:"version_info,omitempty"`
	// ErrorCode and ErrorDetail are the client's error_detail status.
	ErrorCode   int32  `json:"error_code"`
	ErrorDetail string `json:"error_detail"`
}

// nackRing keeps the latest RecentNacks NACKs. Its mutex is a leaf: add
// is called with a session's mu held and takes no other lock.
type nackRing struct {
	mu    sync.Mutex
	ring  [RecentNacks]NackInfo // guarded by mu
	next  int                   // guarded by mu; where the next one goes
	total uint64                // guarded by mu; NACKs since start
}

func (r *nackRing) add(n NackInfo) {
	r.mu.Lock()
	r.ring[r.next] = n
	r.next = (r.next + 1) % RecentNacks
	r.total++
	r.mu.Unlock()
}

// recent returns the kept NACKs, newest first, and the total since start.
func (r *nackRing) recent() ([]NackInfo, uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := min(r.total, RecentNacks)
	out := make([]NackInfo, 0, n)
	for i := 1; i <= int(n); i++ {
		out = append(out, r.ring[(r.next-i+RecentNacks)%RecentNacks])
	}
	return out, r.total
}

// Nacks returns the latest client NACKs (at most RecentNacks), newest
// first, and how many there were since start.
func (s *Server) Nacks() ([]NackInfo, uint64) { return s.nacks.recent() }

// NacksList is the JSON of /debug/nacks.
type NacksList struct {
	// Total counts every client NACK since start; Recent holds the latest
	// RecentNacks, newest first.
	Total  uint64     `json:"total"`
	Recent []NackInfo `json:"recent"`
}

// NacksPage is what /debug/nacks shows (internal/admin serves it): the recent NACKs and their total.
func (s *Server) NacksPage() NacksList {
	recent, total := s.Nacks()
	return NacksList{Total: total, Recent: recent}
}
