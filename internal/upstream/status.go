package upstream

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.uber.org/zap"
	statuspb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"

	"github.com/xds-relay/xds-relay/internal/cache"
)

// LinkStatus is what /debug/upstreams shows of one link.
type LinkStatus struct {
	Authority string `json:"authority"`
	Group     string `json:"group,omitempty"`
	// Origin is the origin in use (or being tried).
	Origin string `json:"origin,omitempty"`
	// State: "unused" (a row of /debug/upstreams for an authority no
	// client has asked anything of yet: it has no link), "connecting" (an
	// attempt is opening), "open" (the origin has
	// answered on the current stream, or a liveness probe while silent
	// about the names asked for: it may not have them), "waiting" (the
	// stream is open, no answer yet), "backoff" (between attempts).
	State string `json:"state"`
	// LastError is why the last attempt ended, and LastErrorAt when; both
	// clear once an origin answers again.
	LastError   string     `json:"last_error,omitempty"`
	LastErrorAt *time.Time `json:"last_error_at,omitempty"`
	// Subscriptions counts the names the link asks for, by type URL.
	Subscriptions map[string]int `json:"subscriptions"`
	// LastResponseAgeS is the time since the last response from an origin,
	// in seconds; absent when none came yet.
	LastResponseAgeS *float64 `json:"last_response_age_s,omitempty"`
	// Origins: what is known of each of the authority's origins
	// (origincheck.go).
	Origins []OriginCheck `json:"origins,omitempty"`
}

// linkState is what a link's run goroutine records for LinkStatus.
// guarded by link.mu
type linkState struct {
	origin       string
	state        string
	lastErr      string
	lastErrAt    time.Time
	lastResponse time.Time
	// unavailable: the cache was told no origin answers the link
	// (noOriginAnswers), and not yet that one does.
	unavailable bool
}

func (l *link) setState(origin, state string) {
	l.mu.Lock()
	l.status.origin, l.status.state = origin, state
	l.mu.Unlock()
}

// currentOrigin is the origin the link's attempt is on (or was last).
func (l *link) currentOrigin() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.status.origin
}

func (l *link) setError(err error) {
	l.mu.Lock()
	l.status.state, l.status.lastErr, l.status.lastErrAt = "backoff", err.Error(), time.Now()
	l.mu.Unlock()
}

// answered records a response: the link is served, its error is over.
func (l *link) answered() {
	l.mu.Lock()
	l.status.state, l.status.lastResponse = "open", time.Now()
	l.status.lastErr, l.status.lastErrAt = "", time.Time{}
	clearUnavailable := l.status.unavailable
	l.status.unavailable = false
	l.mu.Unlock()
	if clearUnavailable {
		l.mgr.cache.SetStreamError(l.id, nil)
	}
}

// originAlive records an answered liveness probe (probe.go): the origin
// serves, though it said nothing of the names asked for.
func (l *link) originAlive() {
	l.mu.Lock()
	l.status.state = "open"
	l.status.lastErr, l.status.lastErrAt = "", time.Time{}
	clearUnavailable := l.status.unavailable
	l.status.unavailable = false
	l.mu.Unlock()
	if clearUnavailable {
		l.mgr.cache.SetStreamError(l.id, nil)
	}
}

// noOriginAnswers tells the cache that no origin of the authority answers
// the link (every one was tried and none answered, err the last attempt's
// error): the link's pending names get the relay's UNAVAILABLE
// (resource_errors), so clients learn it now rather than by their own
// timers. The next answer clears it (answered, originAlive).
func (l *link) noOriginAnswers(err error) {
	l.mu.Lock()
	already := l.status.unavailable
	l.status.unavailable = true
	l.mu.Unlock()
	if already {
		return
	}
	// The message names the authority only, not the group key, the
	// origins' addresses or the transport's error text (logged here):
	// every client of the link reads it.
	l.mgr.cache.SetStreamError(l.id, &statuspb.Status{
		Code:    int32(codes.Unavailable),
		Message: "xds-relay: no origin of authority " + l.id.Authority + " answers; the resource is requested and will be sent once one does",
	})
	l.lg.Debug("clients told no origin answers (UNAVAILABLE for pending names)", zap.Error(err))
}

func (l *link) describe(now time.Time) LinkStatus {
	l.mu.Lock()
	defer l.mu.Unlock()
	st := LinkStatus{Authority: l.id.Authority, Group: l.id.Group, Origin: l.status.origin,
		State: l.status.state, LastError: l.status.lastErr, Subscriptions: make(map[string]int)}
	if st.State == "" {
		st.State = "connecting"
	}
	for t, names := range l.desired {
		if len(names) > 0 {
			st.Subscriptions[t] = len(names)
		}
	}
	if !l.status.lastErrAt.IsZero() {
		at := l.status.lastErrAt.UTC().Truncate(time.Millisecond)
		st.LastErrorAt = &at
	}
	if !l.status.lastResponse.IsZero() {
		age := now.Sub(l.status.lastResponse).Seconds()
		st.LastResponseAgeS = &age
	}
	return st
}

// Status returns every link's state, by authority then group.
func (m *Manager) Status() []LinkStatus {
	m.mu.Lock()
	links := make([]*link, 0, len(m.links))
	for _, l := range m.links {
		links = append(links, l)
	}
	m.mu.Unlock()
	now := time.Now()
	out := make([]LinkStatus, 0, len(links))
	origins := make(map[string][]OriginCheck)
	for _, l := range links {
		st := l.describe(now)
		o, ok := origins[st.Authority]
		if !ok {
			o = m.OriginChecks(st.Authority)
			origins[st.Authority] = o
		}
		st.Origins = o
		out = append(out, st)
	}
	slices.SortFunc(out, func(a, b LinkStatus) int {
		if c := strings.Compare(a.Authority, b.Authority); c != 0 {
			return c
		}
		return strings.Compare(a.Group, b.Group)
	})
	return out
}

// Links is what /debug/upstreams shows (internal/admin serves it): Status, with an "unused" row (its
// origin checks) for each authority that has no link yet, by authority.
func (m *Manager) Links() []LinkStatus {
	out := m.Status()
	m.mu.Lock()
	auths := sortedAuthorities(m.auths)
	m.mu.Unlock()
	linked := make(map[string]bool, len(auths))
	for _, st := range out {
		linked[st.Authority] = true
	}
	for _, a := range auths {
		if !linked[a.name] {
			out = append(out, LinkStatus{Authority: a.name, State: "unused", Subscriptions: map[string]int{},
				Origins: m.OriginChecks(a.name)})
		}
	}
	slices.SortStableFunc(out, func(a, b LinkStatus) int { return strings.Compare(a.Authority, b.Authority) })
	return out
}

// Ready returns why some link cannot serve yet (for /readyz): it has no
// evidence that its origin is alive and the cache holds nothing of it.
// nil when every link has that evidence (aliveOrigin) or cached state to
// serve; a link nobody asked for does not exist yet and does not count.
func (m *Manager) Ready() error {
	var errs []error
	for _, st := range m.Status() {
		if aliveOrigin(st) || m.cache.Cached(cache.LinkID{Authority: st.Authority, Group: st.Group}) {
			continue
		}
		errs = append(errs, fmt.Errorf("%w and nothing is cached", notAnswered(st)))
	}
	return errors.Join(errs...)
}

// aliveOrigin says whether what st's link knows is evidence that its
// origin is alive: it answered anything on the current stream (any name,
// "does not exist" included) or a liveness probe ("open"), or it accepted
// the connection and the stream ("waiting": gRPC opens a stream only on a
// connection that is ready) and the link has not failed since its last
// answer. An origin need not answer names it lacks, so a client asking
// only for those leaves the link waiting until the liveness probe
// (response_timeout); that says nothing against the origin. A link whose
// last attempt failed (refused, stalled: LastError) needs an answer again.
func aliveOrigin(st LinkStatus) bool {
	return st.State == "open" || st.State == "waiting" && st.LastError == ""
}

// OriginState returns why no origin answers on the link of s (its state
// and last error, for a REST poll or Fetch that found nothing); nil when
// one does, when the link's stream is open to an origin that has not
// failed and is within its response_timeout (a silent origin may simply
// not have the names asked for: silence is how a go-control-plane origin
// says so, and gRPC clients are not told otherwise either), or when s
// has no link.
func (m *Manager) OriginState(s cache.LinkID) error {
	m.mu.Lock()
	l := m.links[s]
	m.mu.Unlock()
	if l == nil {
		return nil
	}
	st := l.describe(time.Now())
	if st.State == "open" || (st.State == "waiting" && st.LastError == "") {
		return nil
	}
	return notAnswered(st)
}

// notAnswered says that st's link has no answering origin, and why.
func notAnswered(st LinkStatus) error {
	where := "upstream " + st.Authority
	if st.Group != "" {
		where += " group " + st.Group
	}
	reason := st.State
	if st.LastError != "" {
		reason += ", last error"
		if st.LastErrorAt != nil {
			reason += " at " + st.LastErrorAt.Format(time.TimeOnly) + " UTC"
		}
		reason += ": " + st.LastError
	}
	return fmt.Errorf("%s: no origin has answered (%s)", where, reason)
}
