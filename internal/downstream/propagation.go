package downstream

import (
	"slices"
	"strconv"
	"time"

	rpcstatus "google.golang.org/genproto/googleapis/rpc/status"

	"github.com/xds-relay/xds-relay/internal/cache"
	"github.com/xds-relay/xds-relay/internal/propagation"
	"github.com/xds-relay/xds-relay/internal/xdstype"
)

// The session's part of the propagation ledger (internal/propagation).
// A revision points to the record of the origin change that brought it
// (cache.Resource.Change). Per type, the session's Tracker (typeState.prop)
// keeps the changes sent that the client has not answered yet: a response
// that carries a version the client did not have notes its change
// (noteSentLocked), an answer settles them (settleLocked), the stream's end
// settles the rest as gone. What the client has of a name also keeps
// what it had before (sentRev.prevVersion and prevGap: the version and
// the response that carried it, in 20 bytes), so that a client sent a newer version, or one that NACKed
// it, can be told what it runs, even when its ACK of the older one came
// after the newer one was sent.
//
// On the fan-out path this costs, per client response, one Tracker entry
// written in place (no allocation while the client answers before the
// next change) and one atomic add on the change's record; per ACK, one
// more and the histograms' observations.

// noteSentLocked notes that response seq carries r for name to the client,
// which had h (ok: had anything): the version is new to it, so its change
// is pending with the client; what it had gives way (replacedLocked).
// It returns what the client had before (sentRev.withPrev).
func (ts *typeState) noteSentLocked(name string, h sentRev, ok bool, r *cache.Resource, seq uint64, now time.Time) prevSent {
	if ok && !h.absent && h.version() == r.Version {
		return h.prev() // the same version again (forced, a heartbeat)
	}
	prev := ts.replacedLocked(name, h, ok)
	ts.prop.Sent(r.Change, seq, 1, now) // nil-safe
	return prev
}

// replacedLocked notes that what the client had of name (h, ok) gives way
// to another state (a new version, a removal) in a new response: an
// unanswered revision of a change no longer counts for that change
// (Tracker.Replaced). It returns what the client had before the new
// state (sentRev.withPrev): h, unless the client NACKed it (then what h's own
// prev says).
func (ts *typeState) replacedLocked(name string, h sentRev, ok bool) prevSent {
	if !ok {
		return prevSent{}
	}
	if h.res != nil && h.res.Change != nil && h.seq > ts.answered {
		ts.prop.Replaced(h.res.Change)
	}
	if ts.nackedLocked(name, h) {
		return h.prev()
	}
	if h.absent || (h.seq == 0 && h.res == nil) {
		// Told it does not exist; or a version it only declared
		// (initial_resource_versions): a string of the client's, which
		// the relay does not keep past its answer.
		return prevSent{seq: h.seq}
	}
	return prevSent{version: h.version(), seq: h.seq}
}

// ackedVersionLocked is the version of name the client ACKed ("" when
// none is known), having h: h's own when it ACKed the response that
// carried it (or declared it), else what it had before once it ACKed
// that (an ACK may come after a newer version was sent).
func (ts *typeState) ackedVersionLocked(name string, h sentRev) string {
	switch {
	case ts.ackedLocked(name, h) && !h.absent:
		return h.version()
	case ts.ackedLocked(name, h):
		return ""
	case h.prev().seq <= ts.answered:
		return h.prevVersion()
	}
	return ""
}

// ackedLocked reports whether the client ACKed the response that carried
// h (a declared version, known by version only, counts as ACKed).
func (ts *typeState) ackedLocked(name string, h sentRev) bool {
	if h.seq == 0 {
		return true
	}
	return h.seq <= ts.answered && !ts.nackedLocked(name, h)
}

// nackedLocked reports whether the client NACKed the response that
// carried h (configstatus.go marks them).
func (ts *typeState) nackedLocked(name string, h sentRev) bool {
	return ts.nackOfLocked(name, h) != nil
}

// settleLocked settles the changes the client's answer to response seq of
// ts decides (Tracker.Answered): a NACK (detail) is attributed to the
// changes that response carried, each with the names it carried of them;
// over SotW, versionInfo is the last response the client accepted.
func (ss *session) settleLocked(ts *typeState, seq uint64, versionInfo string, detail *rpcstatus.Status) {
	if ts.prop.Empty() {
		return
	}
	var nack *propagation.Nack
	accepted := seq - 1 // delta: each response is answered on its own
	if detail != nil {
		nack = &propagation.Nack{Node: clientText(ss.node.GetId()), Code: detail.GetCode(), Message: ts.nacks.last,
			Names: ts.changeNamesLocked(seq)}
		if ss.variant == xdstype.SotW {
			accepted, _ = strconv.ParseUint(versionInfo, 10, 64) // 0 (nothing) when not one of ours
		}
	}
	ts.prop.Answered(seq, accepted, nack, time.Now())
}

// changeNamesLocked returns, by change, the names response seq carried
// (on a NACK only: a walk of the type's names).
func (ts *typeState) changeNamesLocked(seq uint64) map[*propagation.Change][]string {
	var out map[*propagation.Change][]string
	for name, h := range ts.sent.all() {
		if h.seq != seq || h.res == nil || h.res.Change == nil {
			continue
		}
		if out == nil {
			out = make(map[*propagation.Change][]string)
		}
		out[h.res.Change] = append(out[h.res.Change], name)
	}
	for _, names := range out {
		slices.Sort(names)
	}
	return out
}

// endPropagationLocked settles every change still pending with the
// stream as gone: it ended.
func (ss *session) endPropagationLocked() {
	for _, ts := range ss.types.all() {
		ts.prop.End()
	}
}
