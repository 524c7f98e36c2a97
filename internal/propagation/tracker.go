package propagation

import "time"

// Tracker is what one client stream keeps, for one type, to settle the
// changes it was sent: the changes whose responses it has not answered
// yet, each with the latest response that carried some of it. A few words
// per stream and type (one pending change inline; more only while a
// client has several unanswered), never one per change it was ever sent.
//
// The attribution rules, written once here for both variants (the
// session passes response sequence numbers: SotW version_info, delta
// nonce, both counted per type):
//   - Sent: a response carries new revisions of a change. A change already
//     pending with the stream moves to the later response (it settles
//     when the client has answered everything of it it was sent).
//   - Replaced: one resource of a pending change is replaced, in a later
//     response, by a newer state before the client answered; once none of
//     what the stream was sent of it is left, the change is superseded
//     for this stream when an answer to a later response settles it (a
//     late answer to its own response still counts as that answer).
//   - Answered, an ACK of response n: the client accepted the state as of
//     n, so every pending change carried by n or before is ACKed (or
//     superseded, above).
//   - Answered, a NACK of n: the changes n carried are NACKed; those
//     carried before are ACKed up to the response the client says it
//     accepted (SotW version_info; delta: each response is answered on
//     its own, so they are ACKed) and NACKed after it.
//   - End: the stream ended; what is pending is gone.
//
// A Tracker is guarded by its session's mutex; the Change methods it calls
// take no lock but the change's own (a leaf) and do no I/O.
type Tracker struct {
	// few keeps the oldest pending changes (nfew of them), in place: a
	// client that answers each change before the next two arrive never
	// makes the Tracker allocate. more keeps the others, oldest first;
	// nil when none.
	few  [inlinePending]pending
	nfew uint8
	more []pending
}

// inlinePending is how many pending changes a Tracker keeps without an
// allocation: a change sent while the ACK of the previous one is on its
// way makes two.
const inlinePending = 2

// pending is one change pending with a stream.
type pending struct {
	ch     *Change
	seq    uint64 // the latest response that carried some of it
	sentAt int64  // unix ns, when that response was built
	names  uint32 // what the stream was sent of it and still has; 0: all replaced
}

// MaxPending bounds the changes a stream may leave unanswered on one type:
// past it, the oldest is no longer followed (counted as dropped).
const MaxPending = 16

// Sent notes that response seq carries names new revisions of change ch.
func (t *Tracker) Sent(ch *Change, seq uint64, names int, now time.Time) {
	if ch == nil {
		return
	}
	if p := t.find(ch); p != nil {
		p.seq, p.sentAt = seq, now.UnixNano()
		p.names += uint32(names)
		return
	}
	ch.sentTo()
	if t.len() == MaxPending {
		oldest := t.at(0).ch
		oldest.dropped.Add(1)
		t.settle(func(p *pending) bool { return p.ch == oldest })
	}
	p := pending{ch: ch, seq: seq, sentAt: now.UnixNano(), names: uint32(names)}
	if int(t.nfew) < inlinePending && len(t.more) == 0 {
		t.few[t.nfew] = p
		t.nfew++
		return
	}
	t.more = append(t.more, p)
}

// Replaced notes that the stream's revision of one resource of ch, not
// answered yet, gives way to a newer state in a later response.
func (t *Tracker) Replaced(ch *Change) {
	if ch == nil || t.nfew == 0 {
		return
	}
	p := t.find(ch)
	if p == nil {
		return
	}
	if p.names > 0 {
		p.names-- // at 0, an answer to a later response supersedes it
	}
}

// Answered settles what the client's answer to response seq decides:
// nack nil is an ACK; for a NACK, accepted is the last response the
// client says it accepted (see Tracker).
func (t *Tracker) Answered(seq, accepted uint64, nack *Nack, now time.Time) {
	if t.nfew == 0 {
		return
	}
	t.settle(func(p *pending) bool {
		switch {
		case p.seq > seq:
			return false
		case p.names == 0 && p.seq < seq:
			p.ch.superseded.Add(1)
		case nack == nil || (p.seq < seq && p.seq <= accepted):
			p.ch.ack(now)
		default:
			p.ch.nack(nack, now)
		}
		return true
	})
}

// End settles everything pending as gone: the stream ended.
func (t *Tracker) End() {
	t.settle(func(p *pending) bool {
		p.ch.gone.Add(1)
		return true
	})
}

// Empty reports whether nothing is pending.
func (t *Tracker) Empty() bool { return t.nfew == 0 }

// PendingChange is one change pending with a stream, as the client page
// shows it.
type PendingChange struct {
	Change *Change
	Seq    uint64    // the latest response that carried it
	SentAt time.Time // when that response was built
}

// Pending returns the changes pending with the stream, oldest first.
func (t *Tracker) Pending() []PendingChange {
	if t.nfew == 0 {
		return nil
	}
	out := make([]PendingChange, 0, t.len())
	for i := range t.len() {
		p := t.at(i)
		out = append(out, PendingChange{Change: p.ch, Seq: p.seq, SentAt: time.Unix(0, p.sentAt)})
	}
	return out
}

// len is how many changes are pending; at(i) the i-th, oldest first.
func (t *Tracker) len() int { return int(t.nfew) + len(t.more) }

func (t *Tracker) at(i int) *pending {
	if i < int(t.nfew) {
		return &t.few[i]
	}
	return &t.more[i-int(t.nfew)]
}

// find returns ch's entry, nil when it is not pending.
func (t *Tracker) find(ch *Change) *pending {
	for i := range t.len() {
		if p := t.at(i); p.ch == ch {
			return p
		}
	}
	return nil
}

// settle removes each entry done reports settled, keeping the others in
// order: few first (so a Tracker that empties keeps no array), then more.
func (t *Tracker) settle(done func(*pending) bool) {
	n := t.len()
	kept := 0
	for i := range n {
		p := t.at(i)
		if done(p) {
			continue
		}
		if kept != i {
			*t.at(kept) = *p // kept < i: overwrites only what was read
		}
		kept++
	}
	for i := kept; i < n; i++ {
		*t.at(i) = pending{} // drop the references
	}
	t.nfew = uint8(min(kept, inlinePending))
	if rest := kept - int(t.nfew); rest > 0 {
		t.more = t.more[:rest]
	} else {
		t.more = nil // an idle stream keeps no array
	}
}
