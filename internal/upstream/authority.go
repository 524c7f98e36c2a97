package upstream

import (
	"fmt"

	"go.uber.org/zap"

	"github.com/xds-relay/xds-relay/internal/cache"
)

// No origin writes outside its authority. A link accepts only the names
// its LinkID owns (cache.LinkID.Owns: plain names, and xdstp names of the
// link's own authority), whichever kind of link it is: an authority's
// xdstp link (Group "") or one of its plain-name groups. A response that
// names another authority anywhere (a resource, a removal, an alias, a
// resource error) is NACKed as a whole, the last good state kept, its
// error_detail naming the name and both authorities; it is counted in
// xds_relay_upstream_nacks_total{reason="other_authority"} and logged at
// Warn once per origin of the link (then at Debug).

// ownedName returns a NACK reason when link id does not own name (what
// names the field of the response it comes from).
func ownedName(id cache.LinkID, what, name string) error {
	if id.Owns(name) {
		return nil
	}
	other, _ := cache.AuthorityOf(name)
	return fmt.Errorf("%w: %w: %s %q is of authority %q; this stream serves authority %q (its xdstp names and plain names) and takes no other authority's names",
		errRejected, errOtherAuthority, what, name, other, id.Authority)
}

// ownedResource checks a resource's name and its aliases (ownedName).
func ownedResource(id cache.LinkID, name string, aliases []string) error {
	if err := ownedName(id, "resource", name); err != nil {
		return err
	}
	for _, a := range aliases {
		if err := ownedName(id, fmt.Sprintf("alias of resource %q", name), a); err != nil {
			return err
		}
	}
	return nil
}

// logRejected logs a NACKed response: at Warn, except a refusal of
// another authority's names from an origin already warned of (once per
// origin, not per response: such an origin repeats itself).
func (l *link) logRejected(t, nonce string, err error, otherAuthority bool) {
	lg := l.lg.With(zap.String("type_url", t), zap.String("nonce", nonce), zap.Error(err))
	if !otherAuthority {
		lg.Warn("origin response rejected (NACK)")
		return
	}
	origin := l.currentOrigin()
	l.mu.Lock()
	warned := l.warnedOther[origin]
	if !warned {
		if l.warnedOther == nil {
			l.warnedOther = make(map[string]bool)
		}
		l.warnedOther[origin] = true
	}
	l.mu.Unlock()
	if warned {
		lg.Debug("origin response names another authority; rejected (NACK)", zap.String("origin", origin))
		return
	}
	lg.Warn("origin response names another authority; rejected (NACK), and every such response of this origin will be (logged once per origin)",
		zap.String("origin", origin))
}
