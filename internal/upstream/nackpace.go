package upstream

import (
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
)

// NACK pacing (SotW). A SotW NACK asks again at the last version accepted,
// and a SotW origin answers it with what it has: an origin whose state
// the relay refuses (another authority's name in its wildcard, a
// duplicate) would be NACKed as fast as it answers (go-control-plane: over
// 20,000 NACKs a second of one type, measured). So consecutive NACKs of
// one type on one SotW attempt are paced by the link's upstream.backoff:
// the first goes at once, each next one after the next backoff wait (up
// to backoff.max); an ACK starts over. A NACK queued is sent by the
// attempt's sync once due (a timer pokes the link); any request of the
// type sent meanwhile (a changed name list) replaces it. Delta needs no
// pacing: a delta origin does not resend what it sent.

// nackPace is one type's pacing on one SotW attempt. Owned by the link's
// run goroutine.
type nackPace struct {
	b      *backoff                      // nil until a NACK since the last ACK
	queued *discoveryv3.DiscoveryRequest // the NACK queued; nil: none
	due    time.Time                     // when queued is sent
	timer  *time.Timer                   // pokes the link at due
}

// delay returns how long the NACK about to be sent waits: 0 for the first
// since the last ACK.
func (p *nackPace) delay(cfg Backoff) time.Duration {
	if p.b == nil {
		p.b = newBackoff(cfg)
		return 0
	}
	return p.b.wait()
}

// queue keeps nack until d from now and arranges for poke to run then.
func (p *nackPace) queue(nack *discoveryv3.DiscoveryRequest, d time.Duration, poke func()) {
	p.drop()
	p.queued, p.due = nack, time.Now().Add(d)
	p.timer = time.AfterFunc(d, poke) // poke only signals: never blocks
}

// takeDue returns the queued NACK once it is due, and forgets it.
func (p *nackPace) takeDue(now time.Time) *discoveryv3.DiscoveryRequest {
	if p.queued == nil || now.Before(p.due) {
		return nil
	}
	n := p.queued
	p.drop()
	return n
}

// drop forgets a queued NACK (a request of the type is sent instead).
func (p *nackPace) drop() {
	if p.timer != nil {
		p.timer.Stop()
		p.timer = nil
	}
	p.queued = nil
}

// acked: an ACK was sent; the next NACK goes at once.
func (p *nackPace) acked() { p.b = nil }

// stopPacing stops the timers of an ended attempt's queued NACKs.
func stopPacing(types map[string]*sotwType) {
	for _, t := range types {
		t.pace.drop()
	}
}
