package propagation

import (
	"encoding/json"
	"fmt"
	"strconv"
)

// Reason says, in words, why a client's version of one resource is not
// the newest the relay has, or that it is (InSync). Every case a
// resource can be in has one: there is no "unknown" (downstream decides
// which applies, and its test enumerates them against Reasons()).
//
// The list grows: add a constant before reasonCount, its code and words
// below, and the case that produces it (downstream's reasonOf).
type Reason uint8

const (
	// InSync: the client ACKed the newest version the relay has (or
	// was told, and ACKed, that the resource does not exist).
	InSync Reason = iota
	// WaitingForOrigin: the relay has no answer from the origin for it
	// yet (a new subscription; an origin that does not answer; a
	// do_not_cache resource the origin owes afresh).
	WaitingForOrigin
	// GatherWindow: kept back by the gather window, to go out with the
	// other names its request subscribed once they arrive
	// (downstream.gather_window).
	GatherWindow
	// NotWritten: the relay has a newer version that the client's
	// writer has not sent yet: it is still sending earlier responses to a
	// client that reads slowly, or is about to.
	NotWritten
	// AwaitingAck: sent; the client has not answered the response yet.
	AwaitingAck
	// Nacked: the client rejected (NACKed) the response that carried the
	// version it was sent; it runs the version it ACKed before.
	Nacked
	// Denied: the access rules deny the client this name.
	Denied
	// NotServed: the relay does not serve the name (its authority has no
	// configuration, or does not carry its type).
	NotServed
	// HeldByWave: the newest version rolls out in waves (delivery.waves)
	// and the client's wave has not opened; it keeps the last accepted
	// version.
	HeldByWave
	// HeldByBreaker: the NACK breaker tripped on the newest version
	// (delivery.nack_breaker): no client is sent it; the client keeps, or
	// is sent back, the last accepted version.
	HeldByBreaker
	// HeldByDeletionGuard: the origin removed the resource and the
	// deletion guard holds the removal (delivery.deletion_guard): the
	// client keeps it until it is released.
	HeldByDeletionGuard

	reasonCount // not a reason: the number of them
)

// reasonText: each reason's code (JSON, logs) and words.
var reasonText = [reasonCount]struct{ code, words string }{
	InSync:              {"in_sync", "in sync: the client ACKed the newest version the relay has"},
	WaitingForOrigin:    {"waiting_for_origin", "waiting for the origin: the relay has no version of it from the origin yet"},
	GatherWindow:        {"gather_window", "kept back by the gather window, to be sent with the other names its request subscribed"},
	NotWritten:          {"not_written", "not yet written: the relay has a newer version it has not sent this client yet (the client reads slowly, or it is about to be sent)"},
	AwaitingAck:         {"awaiting_ack", "sent; the client has not answered the response yet"},
	Nacked:              {"nacked", "NACKed: the client rejected the response that carried it, and runs the version it ACKed before"},
	Denied:              {"denied", "denied by the access rules"},
	NotServed:           {"not_served", "not served by this relay: its authority has no configuration, or does not carry its type"},
	HeldByWave:          {"held_by_wave", "held by a wave: the newest version rolls out in waves and this client's has not opened; it keeps the last accepted version"},
	HeldByBreaker:       {"held_by_breaker", "held by the NACK breaker: clients rejected the newest version, so no client is sent it; this one keeps (or was sent back) the last accepted version"},
	HeldByDeletionGuard: {"held_by_deletion_guard", "held by the deletion guard: the origin removed it, and the removal is held until released (the client keeps the resource)"},
}

// Reasons returns every reason, in order.
func Reasons() []Reason {
	out := make([]Reason, reasonCount)
	for i := range out {
		out[i] = Reason(i)
	}
	return out
}

// String is the reason's code: in_sync, waiting_for_origin, …
func (r Reason) String() string {
	if r < reasonCount {
		return reasonText[r].code
	}
	return "reason(" + strconv.Itoa(int(r)) + ")"
}

// Words is the reason as a sentence for an operator.
func (r Reason) Words() string {
	if r < reasonCount {
		return reasonText[r].words
	}
	return r.String()
}

// MarshalJSON writes the reason's code.
func (r Reason) MarshalJSON() ([]byte, error) { return json.Marshal(r.String()) }

// UnmarshalJSON reads a reason's code.
func (r *Reason) UnmarshalJSON(b []byte) error {
	var code string
	if err := json.Unmarshal(b, &code); err != nil {
		return err
	}
	for i, t := range reasonText {
		if t.code == code {
			*r = Reason(i)
			return nil
		}
	}
	return fmt.Errorf("propagation: unknown reason %q", code)
}
