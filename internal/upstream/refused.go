package upstream

import (
	"maps"
	"slices"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/xds-relay/xds-relay/internal/cache"
	"github.com/xds-relay/xds-relay/internal/xdstype"
)

// A type an origin refuses. Some origins end the whole ADS stream over one
// subscription of a type they do not serve (go-control-plane: "no cache
// defined for type_url ..."), which would cost every other subscription of
// the link its stream, again at every reconnect. When an attempt ends with
// an error that names a type the link subscribes, the link stops asking
// the origin for that type for the failback interval: its names are
// answered as absent (clients get does-not-exist) and the other types
// carry on. Then it is asked for again.

// refusedType returns the type of the link's subscriptions that err names
// (the first mentioned, when it names several), or "".
func (l *link) refusedType(err error) string {
	if err == nil {
		return ""
	}
	msg := err.Error()
	l.mu.Lock()
	defer l.mu.Unlock()
	best, at := "", -1
	for t, names := range l.desired {
		if len(names) == 0 {
			continue
		}
		if i := strings.Index(msg, t); i >= 0 && (at < 0 || i < at) {
			best, at = t, i
		}
	}
	return best
}

// refuse stops asking the origin for typeURL until the failback interval
// has passed.
func (l *link) refuse(typeURL string, err error) {
	until := time.Now().Add(l.mgr.failback)
	l.mu.Lock()
	l.refused[typeURL] = until
	l.mu.Unlock()
	l.mgr.metrics.refusedTypes.WithLabelValues(l.id.Authority, xdstype.Label(typeURL)).Inc()
	l.lg.Warn("origin ended the stream over a type; its subscriptions are answered as absent until it is asked again",
		zap.String("type_url", typeURL), zap.Time("until", until), zap.Error(err))
}

// refusedLocked reports whether typeURL is refused now, forgetting a
// refusal whose time is up.
func (l *link) refusedLocked(typeURL string, now time.Time) bool {
	until, ok := l.refused[typeURL]
	if !ok {
		return false
	}
	if now.After(until) {
		delete(l.refused, typeURL)
		return false
	}
	return true
}

// answerRefused tells the cache that the names the link subscribes of a
// refused type do not exist (a repeat changes nothing and notifies no
// one). Called by the run goroutine before each sync.
func (l *link) answerRefused() {
	now := time.Now()
	l.mu.Lock()
	var updates []cache.Update
	for _, t := range slices.Sorted(maps.Keys(l.refused)) {
		if !l.refusedLocked(t, now) || len(l.desired[t]) == 0 {
			continue
		}
		updates = append(updates, cache.Update{Stream: l.id, TypeURL: t, Removed: slices.Sorted(maps.Keys(l.desired[t]))})
	}
	l.mu.Unlock()
	for _, u := range updates {
		l.mgr.cache.Apply(u)
	}
}
