package delivery

import (
	"fmt"
	"strings"
	"time"

	"go.uber.org/zap"
	statuspb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"

	"github.com/xds-relay/xds-relay/internal/cache"
	"github.com/xds-relay/xds-relay/internal/xdstype"
)

// The NACK breaker (delivery.nack_breaker). Each client NACK of a response
// is attributed to the versions that response carried new to the client
// (internal/downstream, rollout.go). Once nack_breaker.clients distinct
// clients (node ids) NACKed a version during its rollout, or one relay
// below whose own breaker tripped on it did, the breaker trips: the
// version is held from every client (cache.HoldBreaker): no further
// client is sent it, and every client is served the last accepted
// version (sent back to those that were sent the held one); without one,
// a client keeps what it holds and a client that holds nothing is sent
// nothing. The origin is NACKed once, with the clients' errors. The trip
// lasts until released by hand, or until the origin sends another version
// of the resource (it starts afresh), or the resource goes.

// nacker is one client that NACKed a version.
type nacker struct {
	node    string
	message string
	at      time.Time
}

// trip is the breaker's hold of a version.
type trip struct {
	since   time.Time
	nackers []nacker // the clients that tripped it
	relay   bool     // a relay below's breaker NACK tripped it
}

// maxNackMessage bounds a client's NACK message as the breaker keeps it.
const maxNackMessage = 512

// Nacked is downstream's NackReporter: a client NACKed a response that
// carried n.Revisions. Each of them that rolls out counts the client once;
// those that reach their authority's nack_breaker.clients trip.
func (d *Delivery) Nacked(n cache.Nack) {
	now := d.now()
	s := d.settings.Load()
	var tripped []*version
	d.mu.Lock()
	for _, r := range n.Revisions {
		name, err := cache.CanonicalName(r.Name)
		if err != nil {
			continue
		}
		v := d.versions[versionID{typeURL: n.TypeURL, name: name, version: r.Version}]
		if v == nil || v.trip != nil || v.released {
			continue // not rolling out (settled, replaced), or held, or released by hand
		}
		limit := s.of(v.key.Link.Authority).NackBreaker.Clients
		if limit == 0 {
			continue
		}
		if !v.counts(n.Node) && len(v.nackers) < limit {
			v.nackers = append(v.nackers, nacker{node: n.Node, message: truncate(n.Detail.GetMessage(), maxNackMessage), at: now})
		}
		if len(v.nackers) >= limit || n.Relay {
			v.trip = &trip{since: now, nackers: v.nackers, relay: n.Relay}
			d.trips[v] = struct{}{}
			tripped = append(tripped, v)
		}
	}
	d.mu.Unlock()
	if len(tripped) > 0 {
		d.tripped(tripped)
	}
}

// counts reports whether node's NACK of v is counted already.
func (v *version) counts(node string) bool {
	for _, n := range v.nackers {
		if n.node == node {
			return true
		}
	}
	return false
}

// tripped holds vs from every client, counts and logs each trip, and
// NACKs their origins: one NACK per link and type.
func (d *Delivery) tripped(vs []*version) {
	groups := make(map[cache.LinkID]map[string][]*version)
	for _, v := range vs {
		byType := groups[v.key.Link]
		if byType == nil {
			byType = make(map[string][]*version)
			groups[v.key.Link] = byType
		}
		byType[v.key.TypeURL] = append(byType[v.key.TypeURL], v)
	}
	for link, byType := range groups {
		for typeURL, tvs := range byType {
			revs := make([]cache.Revision, len(tvs))
			for i, v := range tvs {
				revs[i] = v.rev()
			}
			d.held.SetHold(revs, &cache.Hold{Reason: cache.HoldBreaker, Since: d.now()})
			for _, v := range tvs {
				d.m.breakerTrips.WithLabelValues(link.Authority, xdstype.Label(typeURL)).Inc()
				d.lg.Warn("version held by the NACK breaker: clients NACKed it; no further client is sent it, clients are sent the last accepted version ("+d.releasePath+" releases it)",
					append(v.fields(), zap.Int("clients", len(v.trip.nackers)), zap.Bool("relay_below", v.trip.relay),
						zap.String("nack", firstNack(v.trip)))...)
			}
			if d.origins != nil {
				d.origins.NackHeld(link, typeURL, breakerDetail(typeURL, tvs))
			}
		}
	}
	d.poke()
}

// firstNack is the first client error that tripped t.
func firstNack(t *trip) string {
	if len(t.nackers) == 0 {
		return ""
	}
	return t.nackers[0].message
}

// maxBreakerDetail bounds the message of the origin's NACK.
const maxBreakerDetail = 4096

// breakerDetail is the error_detail of the NACK the origin gets for vs,
// versions of typeURL the breaker holds: each version with the clients'
// errors, and the ErrorInfo a relay above recognises (xdstype).
func breakerDetail(typeURL string, vs []*version) *statuspb.Status {
	var b strings.Builder
	fmt.Fprintf(&b, "%d version(s) of %s held by the relay's NACK breaker (delivery.nack_breaker)", len(vs), typeURL)
	versions := make(map[string]string, len(vs))
	clients := 0
	for i, v := range vs {
		versions[v.key.Name] = v.res.Version
		clients = max(clients, len(v.trip.nackers))
		part := fmt.Sprintf("; resource %q (version %s) NACKed by %d client(s)", v.key.Name, v.res.OriginVersion, len(v.trip.nackers))
		for _, n := range v.trip.nackers {
			part += fmt.Sprintf(", %q: %s", n.node, n.message)
		}
		if b.Len()+len(part) > maxBreakerDetail {
			fmt.Fprintf(&b, "; and %d more", len(vs)-i)
			break
		}
		b.WriteString(part)
	}
	st := &statuspb.Status{Code: int32(codes.InvalidArgument), Message: b.String()}
	return xdstype.BreakerDetail(st, versions, clients)
}

// checkTrips ends the trips whose version is no longer its key's newest
// (removed, expired, evicted, or replaced without an Apply telling us),
// and returns when to look again (zero: nothing is held).
func (d *Delivery) checkTrips() time.Time {
	d.mu.Lock()
	vs := make([]*version, 0, len(d.trips))
	for v := range d.trips {
		vs = append(vs, v)
	}
	d.mu.Unlock()
	if len(vs) == 0 {
		return time.Time{}
	}
	var gone []*version
	settled := d.now().Add(-time.Second) // a trip this recent may not be held yet (tripped)
	for _, v := range vs {
		if v.trip.since.After(settled) {
			continue
		}
		if ok, h := d.held.Rolling(v.rev()); !ok || h == nil || h.Reason != cache.HoldBreaker {
			gone = append(gone, v)
		}
	}
	d.mu.Lock()
	for _, v := range gone {
		d.forgetLocked(v)
	}
	d.mu.Unlock()
	d.logEnded(gone, "the resource is gone")
	return d.now().Add(time.Second)
}

// releaseTrips releases the trips of authority ("": every one) and type
// URL ("": every type): every client is sent the versions. They are no
// longer counted (their rollout goes on).
func (d *Delivery) releaseTrips(authority, typeURL string) []*version {
	d.mu.Lock()
	var vs []*version
	for v := range d.trips {
		if (authority == "" || v.key.Link.Authority == authority) && (typeURL == "" || v.key.TypeURL == typeURL) {
			vs = append(vs, v)
			delete(d.trips, v)
			v.released = true // its rollout's waves: Release's releaseWaves
		}
	}
	d.mu.Unlock()
	for _, v := range vs {
		d.held.SetHold([]cache.Revision{v.rev()}, nil)
	}
	return vs
}
