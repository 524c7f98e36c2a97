package upstream

import (
	"fmt"
	"maps"
	"slices"

	"go.uber.org/zap"

	"github.com/xds-relay/xds-relay/internal/cache"
)

// SetAuthorities replaces the authorities (a config reload), touching only
// the links of authorities that changed:
//   - unchanged (same origins, transport and glob mode): their links and
//     streams go on untouched;
//   - changed: each of its links ends its stream and starts over on the
//     new settings, from the new first origin, keeping what the cache
//     wants subscribed; what the cache has stays served meanwhile and
//     the new origin's answers replace it (versions come from content, so
//     clients are sent only what differs);
//   - removed: its links close, and every name the cache has or waits
//     for on them is made absent, so clients watching one are told it does
//     not exist (as a name of an unknown authority is answered); a later
//     Subscribe for it is ignored like any unknown authority's;
//   - added: served from the first Subscribe, as at start.
//
// It returns once the links of removed and changed authorities have
// stopped (restarted links run on). Validation is the caller's: every
// authority needs an origin.
func (m *Manager) SetAuthorities(auths []Authority) error {
	next := make(map[string]*authority, len(auths))
	for i, a := range auths {
		if len(a.Origins) == 0 {
			return fmt.Errorf("upstream: authorities[%d] %q: %w", i, a.Name, ErrNoOrigins)
		}
		next[a.Name] = newAuthority(a)
	}
	m.reloading.Lock()
	defer m.reloading.Unlock()

	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil
	}
	prev, closing, restarting := m.replaceAuthoritiesLocked(next, auths)
	m.mu.Unlock()

	m.logAuthorityChanges(prev, next)
	m.checkChangedOrigins(prev, next)
	for _, l := range closing {
		l.cancel()
		<-l.done
		l.answerAbsent()
	}
	for _, l := range restarting {
		m.restart(l, next[l.id.Authority])
	}
	m.metrics.setAuthorities(slices.Collect(maps.Keys(prev)), authorityNames(auths))
	return nil
}

// replaceAuthoritiesLocked makes next (built from auths) the authorities
// and returns the previous ones, the links to close (their authority is
// removed; dropped from m.links) and the links to restart (their authority
// changed).
func (m *Manager) replaceAuthoritiesLocked(next map[string]*authority, auths []Authority) (prev map[string]*authority, closing, restarting []*link) {
	prev = m.auths
	for id, l := range m.links {
		switch a := next[id.Authority]; {
		case a == nil:
			delete(m.links, id)
			closing = append(closing, l)
		case !sameAuthority(a, prev[id.Authority]):
			restarting = append(restarting, l)
		}
	}
	m.auths = next
	for _, a := range auths {
		m.addFileSourcesLocked(a)
	}
	return prev, closing, restarting
}

// logAuthorityChanges logs each authority removed, changed or added from
// prev to next.
func (m *Manager) logAuthorityChanges(prev, next map[string]*authority) {
	for name, a := range prev {
		switch b := next[name]; {
		case b == nil:
			m.lg.Info("authority removed: its links close", zap.String("authority", name))
		case !sameAuthority(a, b):
			m.lg.Info("authority changed: its links start over on the new settings", zap.String("authority", name),
				zap.Strings("origins", b.origins), zap.Bool("sotw", b.sotw), zap.Bool("emulated_globs", b.emulated))
		}
	}
	for _, a := range sortedAuthorities(next) {
		if prev[a.name] == nil {
			m.lg.Info("authority added", zap.String("authority", a.name))
		}
	}
}

// checkChangedOrigins checks the origins of the authorities added, or
// whose origins changed, from prev to next, and drops the checks of those
// removed.
func (m *Manager) checkChangedOrigins(prev, next map[string]*authority) {
	var check []*authority
	for _, a := range sortedAuthorities(next) {
		if prev[a.name] == nil || !slices.Equal(prev[a.name].origins, a.origins) {
			check = append(check, a)
		}
	}
	for name := range prev {
		if next[name] == nil {
			m.checks.drop(name)
		}
	}
	if len(check) > 0 {
		m.checkOrigins(check)
	}
}

// authorityNames are the names of auths.
func authorityNames(auths []Authority) []string {
	out := make([]string, len(auths))
	for i, a := range auths {
		out[i] = a.Name
	}
	return out
}

// sameAuthority: a and b would serve a link alike. Credentials compare
// by identity: the relay hands the same values to an authority whose
// TLS and token settings did not change.
func sameAuthority(a, b *authority) bool {
	return a != nil && b != nil && a.sotw == b.sotw && a.perType == b.perType && a.emulated == b.emulated && slices.Equal(a.origins, b.origins) &&
		a.creds == b.creds && a.perRPC == b.perRPC
}

// restart stops l's run goroutine and starts a new one on a, unless l was
// closed meanwhile (idle, or the Manager closing).
func (m *Manager) restart(l *link, a *authority) {
	l.cancel()
	<-l.done
	l.mu.Lock()
	// What an origin of the old settings refused says nothing of the new.
	clear(l.refused)
	clear(l.refusedNames)
	l.mu.Unlock()
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed || m.links[l.id] != l {
		return
	}
	l.auth = a
	m.startLocked(l)
}

// answerAbsent tells the cache that nothing of l's stream exists any more
// (its authority was removed): per type, every name it wanted is complete
// and absent, and every collection known empty.
func (l *link) answerAbsent() {
	l.mu.Lock()
	updates := make([]cache.Update, 0, len(l.desired))
	for t, names := range l.desired {
		u := cache.Update{Link: l.id, TypeURL: t, FullState: true, Unguarded: true}
		for n := range names {
			u.Complete = append(u.Complete, n)
		}
		updates = append(updates, u)
	}
	l.status.unavailable = false
	l.mu.Unlock()
	// Its names are absent now, not waiting for an origin.
	l.mgr.cache.SetLinkError(l.id, nil)
	for _, u := range updates {
		l.mgr.cache.Apply(u)
	}
}
