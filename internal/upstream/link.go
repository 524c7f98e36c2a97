package upstream

import (
	"context"
	"errors"
	"fmt"
	statuspb "google.golang.org/genproto/googleapis/rpc/status"
	"slices"
	"strings"
	"sync"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"go.uber.org/zap"

	"github.com/xds-relay/xds-relay/internal/cache"
)

// link is the relay's upstream for one cache.LinkID: the subscriptions
// the cache wants on it (desired), and the run goroutine that carries them
// to the authority's origins, one attempt after another (reconnect,
// failover, failback). It lives from the LinkID's first Subscribe until
// the Manager closes.
type link struct {
	id cache.LinkID // read-only
	// auth: the authority's settings. Read by the run goroutine only;
	// replaced (Manager.restart) while no run goroutine runs.
	auth *authority
	mgr  *Manager    // read-only
	lg   *zap.Logger // read-only
	// poke wakes the run goroutine after desired changed (1 slot: many
	// pokes, one wake-up).
	poke chan struct{}
	// cancel ends the run goroutine (an idle link, see idle.go); done is
	// closed when it has returned. Set under Manager.mu when a run
	// goroutine starts (Manager.startLocked).
	cancel context.CancelFunc
	done   chan struct{}
	// idleSweeps counts consecutive idle sweeps that found no client
	// watching a key of the link. Owned by the idle sweeper.
	idleSweeps int

	mu sync.Mutex
	// desired: type URL → names the cache wants (canonical names, canonical
	// glob URLs, cache.Wildcard). guarded by mu
	desired map[string]map[string]struct{}
	// node to present to the origin: the relay's own on xdstp links
	// (Group ""), the first Subscribe's on legacy groups: the aggregation
	// rule's node, or one built from the group key alone, so the same
	// whichever client subscribes first. guarded by mu
	node *corev3.Node
	// nodeFromSubscribe: node came from a Subscribe call. guarded by mu
	nodeFromSubscribe bool
	// removed: type → names the cache unsubscribed since the run goroutine
	// last synced; resub: of those, the names it subscribed again
	// meanwhile. The desired set shows no change for them, yet the cache
	// dropped what it had (it unsubscribes only what it evicts): the next
	// sync must have the origin send them again. guarded by mu
	removed map[string]map[string]struct{}
	resub   map[string]map[string]struct{}
	// refused: types the origin ended the stream over, not asked for
	// until the time given (refused.go). guarded by mu
	refused map[string]time.Time
	// status is what /debug/upstreams shows (status.go). guarded by mu
	status linkState
	// refusedNames: type → names the origin ended the stream over, likewise.
	// guarded by mu
	refusedNames map[string]map[string]time.Time
	// warnedOther: origins already logged at Warn for naming another
	// authority (authority.go); nil until one is. guarded by mu
	warnedOther map[string]bool
	// heldNacks: the NACK breaker's NACKs to send at the next sync, by
	// type (heldnack.go); nil until one is. guarded by mu
	heldNacks map[string]*statuspb.Status

	// sotwVersions: last accepted version_info per type, kept across
	// attempts on the same origin (sotwOrigin) so a SotW reconnect resends
	// it; a version from another origin means nothing and is not sent.
	// owned by the run goroutine
	sotwVersions map[string]string
	sotwOrigin   string
}

func newLink(m *Manager, id cache.LinkID, a *authority) *link {
	return &link{
		id:           id,
		auth:         a,
		mgr:          m,
		lg:           m.lg.With(zap.String("authority", id.Authority), zap.String("group", id.Group)),
		poke:         make(chan struct{}, 1),
		desired:      make(map[string]map[string]struct{}),
		removed:      make(map[string]map[string]struct{}),
		resub:        make(map[string]map[string]struct{}),
		refused:      make(map[string]time.Time),
		refusedNames: make(map[string]map[string]time.Time),
		node:         m.node,
		sotwVersions: make(map[string]string),
	}
}

// refuseOver says whether err, the end of an attempt, is the origin
// refusing one type or one name, and if so refuses it (refused.go): the
// origin is up, so the link asks again at once, without it, on the same
// origin.
func (l *link) refuseOver(err error) bool {
	if t := l.refusedType(err); t != "" {
		l.refuse(t, "", err)
		return true
	}
	if t, n := l.refusedName(err); n != "" {
		l.refuse(t, n, err) // likewise, one name
		return true
	}
	return false
}

// explainFailure returns err, the end of an attempt on origin that got no
// answer, with why origin cannot be reached in words, not gRPC's
// ("produced zero addresses"), when a check of it finds a cause; the
// cause is recorded for /debug/upstreams, not logged (the caller logs the
// attempt with it).
func (l *link) explainFailure(ctx context.Context, origin string, err error) error {
	if err == nil || errors.Is(err, ErrNoResponse) || strings.HasPrefix(origin, FileOriginPrefix) {
		return err
	}
	cerr := l.mgr.resolveOrigin(ctx, origin)
	if cerr == nil || ctx.Err() != nil {
		return err
	}
	l.mgr.checks.set(l.id.Authority, origin, cerr)
	l.mgr.metrics.originCheckFailures.WithLabelValues(l.id.Authority).Inc()
	return fmt.Errorf("upstream %s: %w (%v)", l.id.Authority, cerr, err)
}

// update changes the desired set and wakes the run goroutine; never blocks.
func (l *link) update(node *corev3.Node, typeURL string, names []string, add bool) {
	l.mu.Lock()
	if node != nil && !l.nodeFromSubscribe && (l.id.Group != "" || l.node == nil) {
		// The group's node (its rule's, or built from the group key
		// alone, so any client's Subscribe carries the same); an empty id
		// is the relay's own. Cloned (a rule's node is shared), with the
		// relay's client features.
		n := withClientFeatures(node)
		if n.GetId() == "" {
			n.Id = l.mgr.node.GetId()
		}
		l.node, l.nodeFromSubscribe = n, true
	}
	set := l.desired[typeURL]
	if set == nil {
		set = make(map[string]struct{})
		l.desired[typeURL] = set
	}
	for _, n := range names {
		if add {
			set[n] = struct{}{}
			if _, ok := l.removed[typeURL][n]; ok {
				delete(l.removed[typeURL], n)
				addName(l.resub, typeURL, n)
			}
		} else {
			delete(set, n)
			addName(l.removed, typeURL, n)
		}
	}
	l.mu.Unlock()
	l.wake()
}

// wake pokes the run goroutine (never blocks: many pokes, one wake-up).
func (l *link) wake() {
	select {
	case l.poke <- struct{}{}:
	default:
	}
}

// want is a copy of what to subscribe upstream for one type.
type want struct {
	// names to subscribe upstream: desired names, with emulated globs
	// replaced by one Wildcard.
	names map[string]struct{}
	// emulatedGlobs: desired globs served by the upstream Wildcard.
	emulatedGlobs []string
	// wildcardDesired: the cache itself watches Wildcard.
	wildcardDesired bool
}

// copyWants returns the node and, per type, a copy of what to subscribe upstream.
func (l *link) copyWants() (*corev3.Node, map[string]*want) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.copyWantsLocked()
}

// syncView is takeResubscribe and copyWants under one lock, as a sync needs
// them: taken apart, a name unsubscribed before the first and subscribed
// again before the second would be in neither (its removal forgotten, its
// return no change to the desired set), and the origin, never told to
// forget it, would never send again what the cache evicted.
func (l *link) syncView() (resub map[string][]string, node *corev3.Node, wants map[string]*want) {
	l.mu.Lock()
	defer l.mu.Unlock()
	resub = l.takeResubscribeLocked()
	node, wants = l.copyWantsLocked()
	return resub, node, wants
}

func (l *link) copyWantsLocked() (*corev3.Node, map[string]*want) {
	out := make(map[string]*want, len(l.desired))
	now := time.Now()
	for t, set := range l.desired {
		if l.refusedLocked(t, now) {
			continue // answered as absent (refused.go)
		}
		w := &want{names: make(map[string]struct{}, len(set))}
		for n := range set {
			if l.nameRefusedLocked(t, n, now) {
				continue // answered as absent (refused.go)
			}
			switch {
			case n == cache.Wildcard:
				w.wildcardDesired = true
				w.names[n] = struct{}{}
			case l.auth.emulated && isGlob(n):
				w.emulatedGlobs = append(w.emulatedGlobs, n)
				w.names[cache.Wildcard] = struct{}{}
			default:
				w.names[n] = struct{}{}
			}
		}
		out[t] = w
	}
	return l.node, out
}

// takeResubscribeLocked returns, per type, the upstream names (an emulated glob
// is the type's Wildcard) that were unsubscribed and subscribed again
// since the last call, and starts over: what the next sync must make the
// origin send again although the desired set did not change.
func (l *link) takeResubscribeLocked() map[string][]string {
	var out map[string][]string
	for t, names := range l.resub {
		seen := make(map[string]struct{}, len(names))
		for n := range names {
			if l.auth.emulated && isGlob(n) {
				n = cache.Wildcard
			}
			if _, dup := seen[n]; dup {
				continue
			}
			seen[n] = struct{}{}
			if out == nil {
				out = make(map[string][]string)
			}
			out[t] = append(out[t], n)
		}
		slices.Sort(out[t])
	}
	clear(l.removed)
	clear(l.resub)
	return out
}

func addName(m map[string]map[string]struct{}, typeURL, name string) {
	set := m[typeURL]
	if set == nil {
		set = make(map[string]struct{})
		m[typeURL] = set
	}
	set[name] = struct{}{}
}

// completeForWildcard lists what a wildcard answer completes on type t:
// the Wildcard itself and every emulated glob.
func (w *want) completeForWildcard() []string {
	return append([]string{cache.Wildcard}, w.emulatedGlobs...)
}

func isGlob(name string) bool {
	return cache.Key{Name: name}.IsCollection() && name != cache.Wildcard
}

// run makes attempts on the authority's origins until ctx ends. The first
// attempt is on the first origin; a failed attempt moves to the next one
// (wrapping around) after a jittered exponential wait. An attempt that got
// at least one response resets the wait, and the next attempt starts over
// at the first origin. An attempt on a later origin ends as soon as the
// first answers a probe (see failback.go), and the link moves back to it
// at once.
func (l *link) run(ctx context.Context) {
	b := newBackoff(l.mgr.backoff)
	idx := 0
	for {
		origin := l.auth.origins[idx]
		l.setState(origin, "connecting")
		healthy, back, err := l.attemptOrFailback(ctx, idx)
		if ctx.Err() != nil {
			return
		}
		if back {
			l.mgr.metrics.failbacks.WithLabelValues(l.id.Authority).Inc()
			l.lg.Info("first origin answers again; moving the stream back", zap.String("from", origin),
				zap.String("to", l.auth.origins[0]))
			b.reset()
			idx = 0
			continue
		}
		l.mgr.metrics.reconnects.WithLabelValues(l.id.Authority).Inc()
		if l.refuseOver(err) {
			healthy = true
		}
		if healthy {
			b.reset()
			idx = 0
		} else {
			idx = (idx + 1) % len(l.auth.origins)
			err = l.explainFailure(ctx, origin, err)
		}
		if err != nil {
			l.setError(err)
			if !healthy && idx == 0 {
				// Every origin was tried and none answered.
				l.noOriginAnswers(err)
			}
		}
		d := b.wait()
		l.lg.Warn("upstream stream lost; reconnecting", zap.String("origin", origin), zap.Error(err),
			zap.String("next_origin", l.auth.origins[idx]), zap.Duration("wait", d))
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}
