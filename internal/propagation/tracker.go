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
	one  pending   // the oldest pending change; one.ch nil: none
	more []pending // the others, oldest first; nil when none
}

// pending is one change pending with a stream.
type pending struct {
	ch     *Change
	seq    uint64 // the latest response that carried some of it
	sentAt int64  // unix ns, when that response was built
	names  uint32 // what the stream was sent of it and still holds; 0: all replaced
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
	p := pending{ch: ch, seq: seq, sentAt: now.UnixNano(), names: uint32(names)}
	if t.one.ch == nil {
		t.one = p
		return
	}
	if len(t.more)+1 >= MaxPending {
		t.one.ch.dropped.Add(1)
		t.popOldest()
		if t.one.ch == nil {
			t.one = p
			return
		}
	}
	t.more = append(t.more, p)
}

// Replaced notes that the stream's revision of one resource of ch, not
// answered yet, gives way to a newer state in a later response.
func (t *Tracker) Replaced(ch *Change) {
	if ch == nil || t.one.ch == nil {
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
	if t.one.ch == nil {
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
func (t *Tracker) Empty() bool { return t.one.ch == nil }

// PendingChange is one change pending with a stream, as the client page
// shows it.
type PendingChange struct {
	Change *Change
	Seq    uint64    // the latest response that carried it
	SentAt time.Time // when that response was built
}

// Pending returns the changes pending with the stream, oldest first.
func (t *Tracker) Pending() []PendingChange {
	if t.one.ch == nil {
		return nil
	}
	out := make([]PendingChange, 0, 1+len(t.more))
	for _, p := range append([]pending{t.one}, t.more...) {
		out = append(out, PendingChange{Change: p.ch, Seq: p.seq, SentAt: time.Unix(0, p.sentAt)})
	}
	return out
}

// find returns ch's entry, nil when it is not pending.
func (t *Tracker) find(ch *Change) *pending {
	if t.one.ch == ch {
		return &t.one
	}
	for i := range t.more {
		if t.more[i].ch == ch {
			return &t.more[i]
		}
	}
	return nil
}

// settle removes each entry done reports settled, keeping the others in
// order.
func (t *Tracker) settle(done func(*pending) bool) {
	if t.one.ch == nil {
		return
	}
	kept := t.more[:0]
	oneDone := done(&t.one)
	for i := range t.more {
		if !done(&t.more[i]) {
			kept = append(kept, t.more[i])
		}
	}
	clear(t.more[len(kept):])
	t.more = kept
	if oneDone {
		t.one = pending{}
		t.popOldest()
	}
	if len(t.more) == 0 {
		t.more = nil // an idle stream keeps no array
	}
}

// popOldest moves the oldest of more into one (which must be empty, or is
// overwritten).
func (t *Tracker) popOldest() {
	if len(t.more) == 0 {
		t.one = pending{}
		return
	}
	t.one = t.more[0]
	copy(t.more, t.more[1:])
	t.more[len(t.more)-1] = pending{}
	t.more = t.more[:len(t.more)-1]
}
