package upstream

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"go.uber.org/zap"

	"github.com/xds-relay/xds-relay/internal/cache"
)

// stream is one upstream stream: a StreamID's subscriptions, carried to the
// authority's origins by the run goroutine, which reconnects and fails over.
type stream struct {
	id   cache.StreamID // read-only
	auth *authority     // read-only
	m    *Manager       // read-only
	lg   *zap.Logger    // read-only
	// poke wakes the run goroutine after desired changed (1 slot: many
	// pokes, one wake-up).
	poke chan struct{}

	mu sync.Mutex
	// desired: type URL → names the cache wants (canonical names, canonical
	// glob URLs, cache.Wildcard). guarded by mu
	desired map[string]map[string]struct{}
	// node to present to the origin: the relay's own on xdstp streams
	// (Group ""), the first Subscribe's on legacy groups (the aggregation
	// rule's node or the group's first client's). guarded by mu
	node *corev3.Node
	// nodeFromSubscribe: node came from a Subscribe call. guarded by mu
	nodeFromSubscribe bool

	// sotwVersions: last accepted version_info per type, kept across
	// sessions to the same origin (sotwOrigin) so a SotW reconnect resends
	// it; a version from another origin means nothing and is not sent.
	// owned by the run goroutine
	sotwVersions map[string]string
	sotwOrigin   string
}

func newStream(m *Manager, id cache.StreamID, a *authority) *stream {
	return &stream{
		id:           id,
		auth:         a,
		m:            m,
		lg:           m.lg.With(zap.String("authority", id.Authority), zap.String("group", id.Group)),
		poke:         make(chan struct{}, 1),
		desired:      make(map[string]map[string]struct{}),
		node:         m.node,
		sotwVersions: make(map[string]string),
	}
}

// update changes the desired set and wakes the run goroutine; never blocks.
func (s *stream) update(node *corev3.Node, typeURL string, names []string, add bool) {
	s.mu.Lock()
	if node != nil && !s.nodeFromSubscribe && (s.id.Group != "" || s.node == nil) {
		s.node, s.nodeFromSubscribe = node, true
	}
	set := s.desired[typeURL]
	if set == nil {
		set = make(map[string]struct{})
		s.desired[typeURL] = set
	}
	for _, n := range names {
		if add {
			set[n] = struct{}{}
		} else {
			delete(set, n)
		}
	}
	s.mu.Unlock()
	select {
	case s.poke <- struct{}{}:
	default:
	}
}

// want is a snapshot of what to subscribe upstream for one type.
type want struct {
	// names to subscribe upstream: desired names, with emulated globs
	// replaced by one Wildcard.
	names map[string]struct{}
	// emulatedGlobs: desired globs served by the upstream Wildcard.
	emulatedGlobs []string
	// wildcardDesired: the cache itself watches Wildcard.
	wildcardDesired bool
}

// snapshot returns the node and, per type, what to subscribe upstream.
func (s *stream) snapshot() (*corev3.Node, map[string]*want) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]*want, len(s.desired))
	for t, set := range s.desired {
		w := &want{names: make(map[string]struct{}, len(set))}
		for n := range set {
			switch {
			case n == cache.Wildcard:
				w.wildcardDesired = true
				w.names[n] = struct{}{}
			case s.auth.emulated && isGlob(n):
				w.emulatedGlobs = append(w.emulatedGlobs, n)
				w.names[cache.Wildcard] = struct{}{}
			default:
				w.names[n] = struct{}{}
			}
		}
		out[t] = w
	}
	return s.node, out
}

// completeForWildcard lists what a wildcard answer completes on type t:
// the Wildcard itself and every emulated glob.
func (w *want) completeForWildcard() []string {
	return append([]string{cache.Wildcard}, w.emulatedGlobs...)
}

func isGlob(name string) bool {
	return cache.Key{Name: name}.IsCollection() && name != cache.Wildcard
}

// run connects to the authority's origins until ctx ends. Each session
// starts at the first origin; a failed attempt moves to the next one
// (wrapping around) after a jittered exponential wait. A session that got
// at least one response resets the wait, and the next attempt starts over
// at the first origin. A session on a later origin ends as soon as the
// first answers a probe (see failback.go), and the stream moves back to it
// at once.
func (s *stream) run(ctx context.Context) {
	b := newBackoff(s.m.backoff)
	idx := 0
	for {
		origin := s.auth.origins[idx]
		healthy, back, err := s.sessionOrFailback(ctx, idx)
		if ctx.Err() != nil {
			return
		}
		if back {
			s.m.m.failbacks.WithLabelValues(s.id.Authority).Inc()
			s.lg.Info("first origin answers again; moving the stream back", zap.String("from", origin),
				zap.String("to", s.auth.origins[0]))
			b.reset()
			idx = 0
			continue
		}
		s.m.m.reconnects.WithLabelValues(s.id.Authority).Inc()
		if healthy {
			b.reset()
			idx = 0
		} else {
			idx = (idx + 1) % len(s.auth.origins)
		}
		d := b.wait()
		s.lg.Warn("upstream stream lost; reconnecting", zap.String("origin", origin), zap.Error(err),
			zap.String("next_origin", s.auth.origins[idx]), zap.Duration("wait", d))
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// session runs one connection to origin; healthy says it received at least
// one response (or, for a file source, that it started).
func (s *stream) session(ctx context.Context, origin string) (healthy bool, err error) {
	if strings.HasPrefix(origin, FileOriginPrefix) {
		fs := s.m.files[origin]
		if fs == nil {
			return false, errors.New("file source not started")
		}
		return s.fileSession(ctx, fs)
	}
	if s.auth.sotw {
		return s.sotwSession(ctx, origin)
	}
	return s.deltaSession(ctx, origin)
}
