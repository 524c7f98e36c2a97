package downstream

import (
	"slices"
	"sync/atomic"

	"github.com/xds-relay/xds-relay/internal/xdstype"
)

// ClientCounts are the open client streams by variant and by type: what
// the status page shows of a fleet, O(1) to read however many clients
// there are (it lists none of them; /debug/clients does).
type ClientCounts struct {
	// Streams: open client streams by variant ("sotw", "delta").
	Streams map[string]int64 `json:"streams"`
	Total   int64            `json:"total"`
	// ByType: streams that have requested each type (xdstype.Label: the
	// type URL without type.googleapis.com/, or "other"), by variant;
	// types no open stream requested are left out.
	ByType []TypeCount `json:"by_type"`
}

// TypeCount is one row of ClientCounts.ByType.
type TypeCount struct {
	Type  string `json:"type"`
	SotW  int64  `json:"sotw"`
	Delta int64  `json:"delta"`
}

// typeLabels are the rows of ClientCounts.ByType, in order: the served
// types' labels, then "other".
var typeLabels = func() []string {
	var out []string
	for _, t := range xdstype.Served() {
		out = append(out, xdstype.Label(t))
	}
	return append(out, xdstype.OtherLabel)
}()

// clientCounts keeps ClientCounts with atomics: sessions update it as
// they start, add a type and end, without a lock.
type clientCounts struct {
	streams [2]atomic.Int64 // by variantIndex
	// types[variantIndex][i] counts the streams that requested the type
	// labelled typeLabels[i].
	types [2][]atomic.Int64
}

func newClientCounts() *clientCounts {
	c := &clientCounts{}
	for v := range c.types {
		c.types[v] = make([]atomic.Int64, len(typeLabels))
	}
	return c
}

func variantIndex(variant string) int {
	if variant == variantDelta {
		return 1
	}
	return 0
}

func labelIndex(typeURL string) int {
	i := slices.Index(typeLabels, xdstype.Label(typeURL))
	if i < 0 {
		return len(typeLabels) - 1
	}
	return i
}

func (c *clientCounts) stream(variant string, d int64) { c.streams[variantIndex(variant)].Add(d) }

func (c *clientCounts) typ(variant, typeURL string, d int64) {
	c.types[variantIndex(variant)][labelIndex(typeURL)].Add(d)
}

func (c *clientCounts) read() ClientCounts {
	sotw, delta := c.streams[0].Load(), c.streams[1].Load()
	out := ClientCounts{Streams: map[string]int64{variantSotW: sotw, variantDelta: delta}, Total: sotw + delta, ByType: []TypeCount{}}
	for i, l := range typeLabels {
		tc := TypeCount{Type: l, SotW: c.types[0][i].Load(), Delta: c.types[1][i].Load()}
		if tc.SotW != 0 || tc.Delta != 0 {
			out.ByType = append(out.ByType, tc)
		}
	}
	return out
}

// ClientCounts returns the open client streams by variant and type.
func (s *Server) ClientCounts() ClientCounts { return s.counts.read() }

// countTypesDone takes the session's types out of the counts; called once,
// when its handler has returned (no request adds a type after that).
func (ss *session) countTypesDone() {
	ss.mu.Lock()
	types := make([]string, 0, len(ss.types))
	for t := range ss.types {
		types = append(types, t)
	}
	ss.mu.Unlock()
	for _, t := range types {
		ss.srv.counts.typ(ss.variant, t, -1)
	}
}
