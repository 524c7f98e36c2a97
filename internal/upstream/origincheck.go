package upstream

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"go.uber.org/zap"
)

// Origin checks. An unreachable or misspelt origin would otherwise be
// silent until the first client's link tried it. So each origin is
// checked once when the Manager starts (and when a reload adds or changes
// its authority), without delaying anything: a control plane is resolved
// and sent a TCP connection, a file source's directory is looked at.
// What fails is logged, counted (xds_relay_upstream_origin_check_failures_total)
// and shown in /debug/upstreams and on the status page, in words
// ("resolve origin.example: no such host"). A link attempt that fails
// without an answer resolves its origin again (quick: no connection, which
// gRPC's error already describes), so the link's error says why in the
// same words rather than gRPC's ("produced zero addresses"); an origin
// that answers an attempt is "ok" again.

// OriginCheck is what the relay knows of one origin of an authority,
// besides its links.
type OriginCheck struct {
	Origin string `json:"origin"`
	// State: "checking", "ok" (resolved and accepted a connection, or a
	// file source's directory exists, or it answered a link) or "failed".
	State string `json:"state"`
	// Error says why it failed; At is when State was set.
	Error string     `json:"error,omitempty"`
	At    *time.Time `json:"at,omitempty"`
	// FileProblems: for a file source, what is wrong with its files now
	// (skipped; their last good content is served), with file and line.
	FileProblems []FileProblem `json:"file_problems,omitempty"`
}

// originChecks has every authority's OriginChecks.
type originChecks struct {
	mu sync.Mutex
	by map[string][]OriginCheck // authority → its origins in order; guarded by mu
}

// reset starts the checks of authority over: every origin "checking".
func (c *originChecks) reset(authority string, origins []string) {
	out := make([]OriginCheck, len(origins))
	for i, o := range origins {
		out[i] = OriginCheck{Origin: o, State: "checking"}
	}
	c.mu.Lock()
	c.by[authority] = out
	c.mu.Unlock()
}

// drop forgets authority's checks (a reload removed it).
func (c *originChecks) drop(authority string) {
	c.mu.Lock()
	delete(c.by, authority)
	c.mu.Unlock()
}

// set records err (nil: ok) for origin of authority.
func (c *originChecks) set(authority, origin string, err error) {
	now := time.Now().UTC().Truncate(time.Millisecond)
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := range c.by[authority] {
		ch := &c.by[authority][i]
		if ch.Origin != origin {
			continue
		}
		if err == nil && ch.State == "ok" {
			return // keeps the time it became ok
		}
		ch.State, ch.Error, ch.At = "ok", "", &now
		if err != nil {
			ch.State, ch.Error = "failed", err.Error()
		}
	}
}

// get returns a copy of authority's checks.
func (c *originChecks) get(authority string) []OriginCheck {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.by[authority])
}

// OriginChecks returns what is known of each origin of authority, in
// failover order, with a file source's file problems; nil for an unknown
// authority.
func (m *Manager) OriginChecks(authority string) []OriginCheck {
	out := m.checks.get(authority)
	for i := range out {
		if fs := m.fileSource(out[i].Origin); fs != nil {
			out[i].FileProblems = fs.problemList()
		}
	}
	return out
}

// checkOrigins checks every origin of auths once, in a goroutine the
// Manager owns; it returns at once.
func (m *Manager) checkOrigins(auths []*authority) {
	for _, a := range auths {
		m.checks.reset(a.name, a.origins)
		m.metrics.originCheckFailures.WithLabelValues(a.name) // the series exists from start, at 0
	}
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		for _, a := range auths {
			for _, o := range a.origins {
				if m.ctx.Err() != nil {
					return
				}
				m.recordCheck(a.name, o, m.checkOrigin(m.ctx, o))
			}
		}
	}()
}

// recordCheck records, logs and counts the outcome of a check.
func (m *Manager) recordCheck(authority, origin string, err error) {
	m.checks.set(authority, origin, err)
	if err == nil {
		m.lg.Debug("origin check passed", zap.String("authority", authority), zap.String("origin", origin))
		return
	}
	m.metrics.originCheckFailures.WithLabelValues(authority).Inc()
	m.lg.Warn("origin check failed", zap.String("authority", authority), zap.String("origin", origin), zap.Error(err))
}

// checkOrigin resolves origin and connects to it (TCP only: the link's
// attempt does TLS and gRPC), or looks at a file source's directory,
// within the connect timeout. The error says what failed in words.
func (m *Manager) checkOrigin(ctx context.Context, origin string) error {
	if dir, ok := strings.CutPrefix(origin, FileOriginPrefix); ok {
		fi, err := os.Stat(dir)
		if err != nil {
			return fmt.Errorf("file source: %w", err)
		}
		if !fi.IsDir() {
			return fmt.Errorf("file source: %s is not a directory", dir)
		}
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, m.connect)
	defer cancel()
	if err := m.resolveOrigin(ctx, origin); err != nil {
		return err
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", origin)
	if err != nil {
		return fmt.Errorf("connect %s: %s", origin, reason(err, m.connect))
	}
	_ = conn.Close() // it answered; nothing more to say
	return nil
}

// resolveOrigin resolves origin's host (nothing to do for an IP
// address) within the connect timeout.
func (m *Manager) resolveOrigin(ctx context.Context, origin string) error {
	host, _, err := net.SplitHostPort(origin)
	if err != nil {
		return fmt.Errorf("origin %q: %w", origin, err)
	}
	if net.ParseIP(host) != nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, m.connect)
	defer cancel()
	addrs, err := net.DefaultResolver.LookupHost(ctx, host)
	if err != nil {
		return fmt.Errorf("resolve %s: %s", host, reason(err, m.connect))
	}
	if len(addrs) == 0 {
		return fmt.Errorf("resolve %s: no addresses", host)
	}
	return nil
}

// reason is the gist of a resolve or connect error: "no such host",
// "connection refused", "no answer within 5s".
func reason(err error, timeout time.Duration) string {
	var dnsErr *net.DNSError
	var sysErr *os.SyscallError
	switch {
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded):
		return fmt.Sprintf("no answer within %v", timeout)
	case errors.As(err, &dnsErr):
		if dnsErr.IsTimeout {
			return fmt.Sprintf("no answer within %v", timeout)
		}
		return dnsErr.Err
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.As(err, &sysErr):
		return sysErr.Err.Error()
	}
	return err.Error()
}

// sortedAuthorities lists auths by name.
func sortedAuthorities(auths map[string]*authority) []*authority {
	out := make([]*authority, 0, len(auths))
	for _, name := range slices.Sorted(maps.Keys(auths)) {
		out = append(out, auths[name])
	}
	return out
}
