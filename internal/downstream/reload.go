package downstream

import (
	"errors"
	"fmt"
	"slices"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
)

// Settings that change at run time (a config reload). Each takes effect
// for what happens next and never ends a stream:
//   - SetResolver: names resolved from now on (new subscriptions, Fetch,
//     REST polls) use the new resolver; what a stream already subscribed
//     stays on the key it resolved to.
//   - SetLimits: checked on the next stream, request or name. A stream
//     already past a lowered bound keeps what it has; its next request
//     that adds names is refused. Streams over a lowered max_streams stay;
//     new ones are refused until enough have ended.
//   - SetSendTimeout: the next Send of each stream.
//   - SetAuthorities: the authorities' metric series.

// resolverBox lets an interface value live in an atomic.Pointer.
type resolverBox struct{ r Resolver }

// SetResolver makes r resolve every name from now on.
func (s *Server) SetResolver(r Resolver) error {
	if r == nil {
		return errors.New("downstream: SetResolver: nil resolver")
	}
	s.resolverNow.Store(&resolverBox{r})
	return nil
}

// SetLimits replaces the limits; every field is required.
func (s *Server) SetLimits(l Limits) error {
	if err := l.validate(); err != nil {
		return err
	}
	s.limitsNow.Store(&l)
	return nil
}

// SetSendTimeout replaces Options.SendTimeout.
func (s *Server) SetSendTimeout(d time.Duration) error {
	if d <= 0 {
		return fmt.Errorf("downstream: send timeout %v must be positive (the config's downstream.send_timeout)", d)
	}
	s.sendTimeoutNs.Store(int64(d))
	return nil
}

// currentResolver is the resolver in use.
func (s *Server) currentResolver() Resolver { return s.resolverNow.Load().r }

// resolve resolves with the resolver in use.
func (s *Server) resolve(typeURL, name string, node *corev3.Node) (Resolution, error) {
	return s.currentResolver().Resolve(typeURL, name, node)
}

// limits are the limits in use; read them once per check.
func (s *Server) limits() *Limits { return s.limitsNow.Load() }

// sendTimeout is the send timeout in use.
func (s *Server) sendTimeout() time.Duration { return time.Duration(s.sendTimeoutNs.Load()) }

// SetAuthorities makes the metric series of the authorities named exist,
// at zero, and deletes those of authorities no longer named.
func (s *Server) SetAuthorities(names []string) {
	s.authMu.Lock()
	defer s.authMu.Unlock()
	s.m.setAuthorities(s.authorities, names)
	s.authorities = slices.Clone(names)
}
