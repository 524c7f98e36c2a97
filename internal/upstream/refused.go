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

// A subscription an origin refuses. Some origins end the whole ADS stream
// over one subscription (go-control-plane, for a type it does not serve:
// "no cache defined for type_url ..."), which would cost every other
// subscription of the link its stream, again at every reconnect. When an
// attempt ends with an error that names a type the link subscribes (or,
// naming no type, one subscribed name), the link stops asking the origin
// for it for the failback interval: it is answered as absent (clients get
// does-not-exist) and everything else carries on. Then it is asked again.

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

// refusedName returns the subscription (type and name) that err names, when
// it names no type: the longest subscribed name that stands in the message
// as a word of its own (between quotes, spaces or punctuation), at least
// minRefusedName bytes long so that a short name cannot match by chance.
func (l *link) refusedName(err error) (typeURL, name string) {
	if err == nil {
		return "", ""
	}
	msg := err.Error()
	l.mu.Lock()
	defer l.mu.Unlock()
	for t, names := range l.desired {
		for n := range names {
			if len(n) >= minRefusedName && len(n) > len(name) && standsAlone(msg, n) {
				typeURL, name = t, n
			}
		}
	}
	return typeURL, name
}

// minRefusedName is the shortest name refusedName matches.
const minRefusedName = 8

// standsAlone reports whether word occurs in msg not as part of a longer
// name: the bytes around it are not name bytes.
func standsAlone(msg, word string) bool {
	for from := 0; ; {
		i := strings.Index(msg[from:], word)
		if i < 0 {
			return false
		}
		i += from
		end := i + len(word)
		if (i == 0 || !nameByte(msg[i-1])) && (end == len(msg) || !nameByte(msg[end])) {
			return true
		}
		from = i + 1
	}
}

// nameByte: b may continue a name (only white space, quotes and the
// punctuation error messages put around names end one).
func nameByte(b byte) bool {
	return strings.IndexByte(" \t\n\"'`,;:()[]{}<>", b) < 0
}

// refuse stops asking the origin for typeURL (name "": the whole type) or
// for one name of it, until the failback interval has passed.
func (l *link) refuse(typeURL, name string, err error) {
	until := time.Now().Add(l.mgr.failback)
	l.mu.Lock()
	if name == "" {
		l.refused[typeURL] = until
	} else {
		if l.refusedNames[typeURL] == nil {
			l.refusedNames[typeURL] = make(map[string]time.Time)
		}
		l.refusedNames[typeURL][name] = until
	}
	l.mu.Unlock()
	l.mgr.metrics.refusedTypes.WithLabelValues(l.id.Authority, xdstype.Label(typeURL)).Inc()
	l.lg.Warn("origin ended the stream over a subscription; it is answered as absent until it is asked again",
		zap.String("type_url", typeURL), zap.String("name", name), zap.Time("until", until), zap.Error(err))
}

// nameRefusedLocked reports whether name of typeURL is refused now,
// forgetting a refusal whose time is up.
func (l *link) nameRefusedLocked(typeURL, name string, now time.Time) bool {
	until, ok := l.refusedNames[typeURL][name]
	if !ok {
		return false
	}
	if now.After(until) {
		delete(l.refusedNames[typeURL], name)
		return false
	}
	return true
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
		updates = append(updates, cache.Update{Link: l.id, TypeURL: t, Removed: slices.Sorted(maps.Keys(l.desired[t]))})
	}
	for _, t := range slices.Sorted(maps.Keys(l.refusedNames)) {
		var gone []string
		for n := range l.refusedNames[t] {
			if _, desired := l.desired[t][n]; desired && l.nameRefusedLocked(t, n, now) {
				gone = append(gone, n)
			}
		}
		if len(gone) > 0 {
			slices.Sort(gone)
			updates = append(updates, cache.Update{Link: l.id, TypeURL: t, Removed: gone})
		}
	}
	l.mu.Unlock()
	for _, u := range updates {
		l.mgr.cache.Apply(u)
	}
}
