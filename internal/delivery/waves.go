package delivery

import (
	"math"
	"slices"
	"time"

	"go.uber.org/zap"

	"github.com/xds-relay/xds-relay/config"
	"github.com/xds-relay/xds-relay/internal/access"
	"github.com/xds-relay/xds-relay/internal/cache"
)

// Waves (delivery.waves). A rollout with waves starts held from every
// client outside its first wave (cache.HoldWave); each next wave opens
// once the previous one has run its min_wait and its clients ACKed the
// rollout's versions (ack_share of them), then, past the last, everyone.
// A wave whose clients do not ACK within max_wait stops the rollout
// (stalled: held until released by hand); so does the breaker tripping on
// one of its versions.
//
// Membership is decided per rollout, from the clients connected when it
// starts: a wave of node clusters holds the clients whose cluster matches
// one of its patterns; a wave of a share holds the clients whose node id
// hashes (cache.ViewerOf, stable across reconnects and relays) into its
// slice of the hash range (the share waves' slices follow each other from
// 0), and, when no connected client does, the client nearest above its
// slice's start (a wave of a share holds at least one client). A client
// belongs to the first wave that holds it.

// wavePlan is who is in which wave, for one rollout. Immutable.
type wavePlan struct {
	waves []config.Wave
	// from, to: each share wave's slice of the hash range, as fractions.
	from, to []float64
	// globs: each node-cluster wave's patterns.
	globs [][]access.Pattern
	// extra: clients a share wave takes because no client hashes into it.
	extra map[string]int
}

// newWavePlan cuts s's waves from viewers, the connected clients.
func newWavePlan(s config.Delivery, viewers []cache.Viewer) *wavePlan {
	p := &wavePlan{waves: s.Waves, from: make([]float64, len(s.Waves)), to: make([]float64, len(s.Waves)),
		globs: make([][]access.Pattern, len(s.Waves))}
	at := 0.0
	for i, w := range s.Waves {
		for _, g := range w.NodeClusters {
			p.globs[i] = append(p.globs[i], access.Compile(g))
		}
		if len(w.NodeClusters) == 0 {
			p.from[i], p.to[i] = at, at+w.Share
			at += w.Share
		}
	}
	for i, w := range s.Waves {
		if len(w.NodeClusters) == 0 {
			p.fillLocked(i, viewers)
		}
	}
	return p
}

// fillLocked gives share wave i, when no viewer is in it, the viewer
// nearest above its slice's start among those in no earlier wave
// (preferring those in no wave at all). p is not shared yet.
func (p *wavePlan) fillLocked(i int, viewers []cache.Viewer) {
	best, bestDist, bestRest := -1, math.Inf(1), false
	for j, v := range viewers {
		w := p.waveOf(v)
		if w == i {
			return
		}
		if w < i {
			continue
		}
		rest := w == len(p.waves)
		dist := position(v) - p.from[i]
		if dist < 0 {
			dist++
		}
		if best < 0 || (rest && !bestRest) || (rest == bestRest && dist < bestDist) {
			best, bestDist, bestRest = j, dist, rest
		}
	}
	if best >= 0 {
		if p.extra == nil {
			p.extra = make(map[string]int)
		}
		p.extra[viewers[best].NodeID] = i
	}
}

// position is v's place in the hash range, from 0 to 1.
func position(v cache.Viewer) float64 { return float64(v.Hash) / math.Exp2(64) }

// waveOf is the wave v belongs to; len(waves): none (everyone else).
func (p *wavePlan) waveOf(v cache.Viewer) int {
	if w, ok := p.extra[v.NodeID]; ok {
		return w
	}
	pos := position(v)
	for i := range p.waves {
		if len(p.globs[i]) == 0 {
			if pos >= p.from[i] && pos < p.to[i] {
				return i
			}
			continue
		}
		for _, g := range p.globs[i] {
			if g.Match(v.Cluster) {
				return i
			}
		}
	}
	return len(p.waves)
}

// opened is p with its first n waves open.
func (p *wavePlan) opened(n int) *openWaves { return &openWaves{plan: p, open: n} }

// openWaves is cache.Waves: the clients of a plan's first open waves.
type openWaves struct {
	plan *wavePlan
	open int
}

// Admits reports whether v's wave is open.
func (o *openWaves) Admits(v cache.Viewer) bool { return o.plan.waveOf(v) < o.open }

// WaveProgress is one wave of a rollout: its clients that subscribe to
// the rollout's resources, how many hold the new versions, how many
// ACKed them.
type WaveProgress struct {
	Wave    int `json:"wave"` // from 1
	Clients int `json:"clients"`
	Sent    int `json:"sent"`
	Acked   int `json:"acked"`
}

// maxProgressKeys bounds the keys of a rollout whose holders are counted.
const maxProgressKeys = 16

// progress counts, per wave of ro (and everyone else, last), the clients
// (nodes) that subscribe to ro's resources, hold its versions and ACKed
// them (the first maxProgressKeys keys looked at).
func (d *Delivery) progress(ro *rollout) []WaveProgress {
	d.mu.Lock()
	var keys []cache.Key
	var versions []string
	for v := range ro.live {
		if len(keys) == maxProgressKeys {
			break
		}
		keys, versions = append(keys, v.key), append(versions, v.res.Version)
	}
	plan := ro.waves
	d.mu.Unlock()
	out := make([]WaveProgress, len(plan.waves)+1)
	for i := range out {
		out[i].Wave = i + 1
	}
	if d.fleet == nil || len(keys) == 0 {
		return out
	}
	type client struct {
		wave        int
		sent, acked bool
	}
	clients := make(map[string]*client)
	d.fleet.Holdings(keys, func(v cache.Viewer, key int, version string, acked bool) {
		c := clients[v.NodeID]
		if c == nil {
			c = &client{wave: plan.waveOf(v), acked: true}
			clients[v.NodeID] = c
		}
		if version == versions[key] {
			c.sent = true
		}
		c.acked = c.acked && version == versions[key] && acked
	})
	for _, c := range clients {
		w := &out[c.wave]
		w.Clients++
		if c.sent {
			w.Sent++
		}
		if c.acked {
			w.Acked++
		}
	}
	return out
}

// done reports whether wave w ACKed: ack_share of its clients (none: it
// is done).
func (w WaveProgress) done(ackShare float64) bool {
	return w.Clients == 0 || float64(w.Acked) >= ackShare*float64(w.Clients)
}

// wavePoll is how often a wave that ran its min_wait is looked at while
// its clients' ACKs are awaited.
const wavePoll = 50 * time.Millisecond

// stepWaves moves ro's waves on (see above). waiting: its waves are not
// all open (at: when to look again; zero: only a release moves it on).
func (d *Delivery) stepWaves(ro *rollout, s config.Delivery, now time.Time) (at time.Time, waiting bool) {
	d.mu.Lock()
	if ro.waves == nil || ro.open > len(ro.waves.waves) {
		d.mu.Unlock()
		return time.Time{}, false
	}
	if ro.stalled || d.trippedLocked(ro) {
		ro.stalled = true
		d.mu.Unlock()
		return time.Time{}, true
	}
	w, openedAt := ro.open-1, ro.openedAt
	d.mu.Unlock()
	if end := openedAt.Add(s.Waves[min(w, len(s.Waves)-1)].MinWait); now.Before(end) {
		return end, true
	}
	if d.progress(ro)[w].done(s.AckShare) {
		if d.openNext(ro, now) {
			return time.Time{}, false
		}
		return now, true
	}
	if !now.Before(openedAt.Add(s.MaxWait)) {
		d.stall(ro, w)
		return time.Time{}, true
	}
	return min2(now.Add(wavePoll), openedAt.Add(s.MaxWait)), true
}

// trippedLocked reports whether the breaker holds a version of ro.
func (d *Delivery) trippedLocked(ro *rollout) bool {
	for v := range ro.live {
		if v.trip != nil && !v.released {
			return true
		}
	}
	return false
}

// openNext opens ro's next wave (past the last: everyone) and reports
// whether every client may now have its versions.
func (d *Delivery) openNext(ro *rollout, now time.Time) (all bool) {
	d.mu.Lock()
	ro.open++
	ro.openedAt = now
	n := ro.open
	all = n > len(ro.waves.waves)
	var h *cache.Hold
	if !all {
		h = &cache.Hold{Reason: cache.HoldWave, Waves: ro.waves.opened(n), Since: ro.arrived}
	}
	revs := liveRevs(ro)
	d.mu.Unlock()
	d.held.SetHold(revs, h)
	d.lg.Info("rollout wave opened", zap.String("authority", ro.link.Authority), zap.String("type_url", ro.typeURL),
		zap.Int("wave", n), zap.Bool("everyone", all), zap.Int("versions", len(revs)))
	return all
}

// liveRevs is ro's live versions as the cache knows them. Call with
// Delivery.mu held.
func liveRevs(ro *rollout) []cache.Revision {
	revs := make([]cache.Revision, 0, len(ro.live))
	for v := range ro.live {
		revs = append(revs, v.rev())
	}
	slices.SortFunc(revs, func(a, b cache.Revision) int {
		switch {
		case a.Key.Name < b.Key.Name:
			return -1
		case a.Key.Name > b.Key.Name:
			return 1
		}
		return 0
	})
	return revs
}

// stall stops ro at wave w (its clients did not ACK within max_wait): its
// versions stay held from the later waves until released by hand.
func (d *Delivery) stall(ro *rollout, w int) {
	d.mu.Lock()
	ro.stalled = true
	n := len(ro.live)
	d.mu.Unlock()
	d.lg.Warn("rollout stopped: a wave's clients did not ACK within max_wait; the later waves keep the last accepted version until released ("+d.releasePath+")",
		zap.String("authority", ro.link.Authority), zap.String("type_url", ro.typeURL), zap.Int("wave", w+1), zap.Int("versions", n))
}
