package upstream

import (
	"context"
	"time"

	"go.uber.org/zap"
)

// Idle links. A link lives as long as some client watches one of its keys,
// and a while after: the keys nobody watches stay cached and subscribed in
// the cache's LRU, warm for clients that come back (a reconnect storm costs
// the origin nothing). A link that no client has watched for IdleTimeout
// (found so at two sweeps IdleTimeout apart) is closed: the cache forgets
// what it cached for it (ForgetLink, which refuses if a client watches
// anything of it by then), its run goroutine ends and its connection is
// given back. A client that asks for one of its keys later is a miss that
// opens a new link. This is what bounds per-group links: aggregation
// groups keyed on client fields (a node id) otherwise accumulate one link,
// one stream and one connection per client that ever came.

// sweepIdle closes idle links every IdleTimeout until ctx ends.
func (m *Manager) sweepIdle(ctx context.Context) {
	t := time.NewTicker(m.idle)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			m.closeIdle()
		}
	}
}

// closeIdle closes the links no client watched at this sweep and the last.
func (m *Manager) closeIdle() {
	var closing []*link
	m.mu.Lock()
	m.sweepReservedLocked()
	for id, l := range m.links {
		if m.cache.Watched(id) {
			l.idleSweeps = 0
			continue
		}
		if l.idleSweeps++; l.idleSweeps < 2 {
			continue
		}
		// Under m.mu: a Subscribe for id waits, then opens a new link.
		if !m.cache.ForgetLink(id) {
			l.idleSweeps = 0
			continue
		}
		delete(m.links, id)
		closing = append(closing, l)
	}
	m.mu.Unlock()
	for _, l := range closing {
		l.cancel()
		<-l.done
		m.metrics.idleCloses.WithLabelValues(l.id.Authority).Inc()
		l.lg.Info("upstream link idle: closed, its connection given back", zap.Duration("idle_timeout", m.idle))
	}
}
