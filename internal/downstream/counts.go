package downstream

import (
	"slices"
	"strings"
	"sync"
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
	// Parked: streams parked now, waiting on a client that does not read
	// (downstream.slow_clients).
	Parked int64 `json:"parked"`
	// ByType: streams that have requested each type (xdstype.Label: the
	// type URL without type.googleapis.com/ for served and listed types,
	// or "other"), by variant;
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
	// listed counts the types an operator listed beyond the served ones
	// (xdstype.List): label → *[2]atomic.Int64 by variantIndex. Bounded
	// by the configuration, as their labels are.
	listed sync.Map
	parked atomic.Int64 // streams parked now (park.go)
}

func newClientCounts() *clientCounts {
	c := &clientCounts{}
	for v := range c.types {
		c.types[v] = make([]atomic.Int64, len(typeLabels))
	}
	return c
}

func variantIndex(variant xdstype.Variant) int {
	if variant == xdstype.Delta {
		return 1
	}
	return 0
}

func (c *clientCounts) stream(variant xdstype.Variant, d int64) {
	c.streams[variantIndex(variant)].Add(d)
}

// typ counts d streams of variant that requested a type labelled l.
func (c *clientCounts) typ(variant xdstype.Variant, l string, d int64) {
	if i := slices.Index(typeLabels, l); i >= 0 {
		c.types[variantIndex(variant)][i].Add(d)
		return
	}
	v, _ := c.listed.LoadOrStore(l, new([2]atomic.Int64))
	v.(*[2]atomic.Int64)[variantIndex(variant)].Add(d)
}

func (c *clientCounts) read() ClientCounts {
	sotw, delta := c.streams[0].Load(), c.streams[1].Load()
	out := ClientCounts{Streams: map[string]int64{string(xdstype.SotW): sotw, string(xdstype.Delta): delta}, Total: sotw + delta, ByType: []TypeCount{},
		Parked: c.parked.Load()}
	for i, l := range typeLabels {
		tc := TypeCount{Type: l, SotW: c.types[0][i].Load(), Delta: c.types[1][i].Load()}
		if tc.SotW != 0 || tc.Delta != 0 {
			out.ByType = append(out.ByType, tc)
		}
	}
	var listed []TypeCount
	c.listed.Range(func(l, v any) bool {
		n := v.(*[2]atomic.Int64)
		if tc := (TypeCount{Type: l.(string), SotW: n[0].Load(), Delta: n[1].Load()}); tc.SotW != 0 || tc.Delta != 0 {
			listed = append(listed, tc)
		}
		return true
	})
	slices.SortFunc(listed, func(a, b TypeCount) int { return strings.Compare(a.Type, b.Type) })
	// Before "other", the last row.
	at := len(out.ByType)
	if at > 0 && out.ByType[at-1].Type == xdstype.OtherLabel {
		at--
	}
	out.ByType = slices.Insert(out.ByType, at, listed...)
	return out
}

// ClientCounts returns the open client streams by variant and type.
func (s *Server) ClientCounts() ClientCounts { return s.counts.read() }

// countTypesDone takes the session's types out of the counts; called once,
// when its handler has returned (no request adds a type after that).
func (ss *session) countTypesDone() {
	ss.mu.Lock()
	labels := make([]string, 0, ss.types.len())
	for _, ts := range ss.types.all() {
		labels = append(labels, ts.label)
	}
	ss.mu.Unlock()
	for _, l := range labels {
		ss.srv.counts.typ(ss.variant, l, -1)
	}
}
