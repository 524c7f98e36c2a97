package relay

import (
	"fmt"

	"go.uber.org/zap"

	"github.com/xds-relay/xds-relay/config"
	"github.com/xds-relay/xds-relay/internal/creds"
	"github.com/xds-relay/xds-relay/internal/upstream"
)

// upstreamAuthorities turns cfg's authorities into upstream's, each with
// the TLS and bearer token that apply to it (its own, or upstream's), from
// oc: one credentials value per distinct setting, kept across reloads
// (creds.Origins).
func upstreamAuthorities(cfg *config.Config, oc *creds.Origins) ([]upstream.Authority, error) {
	auths := make([]upstream.Authority, 0, len(cfg.Authorities))
	for i, a := range cfg.Authorities {
		ua := upstream.Authority{Name: a.Name, Origins: a.Origins, Transport: a.Transport, GlobCollections: a.GlobCollections}
		if t := cfg.UpstreamTLS(a); t.Enabled {
			c, err := oc.TLS(t)
			if err != nil {
				return nil, fmt.Errorf("authorities[%d] %s: upstream TLS: %w", i, a.Name, err)
			}
			ua.Credentials = c
		}
		if file := cfg.BearerTokenFile(a); file != "" {
			p, err := oc.Token(file, cfg.Upstream.AllowPlaintextBearerToken)
			if err != nil {
				return nil, fmt.Errorf("authorities[%d] %s: %w", i, a.Name, err)
			}
			ua.PerRPC = p
		}
		auths = append(auths, ua)
	}
	return auths, nil
}

// filesNotReloaded logs a rotated CA, certificate pair or token file that
// did not load (the previous one stays in use). The errors name files,
// never a token.
func filesNotReloaded(lg *zap.Logger) func(error) {
	return func(err error) { lg.Warn("TLS or token file not reloaded; keeping the previous", zap.Error(err)) }
}
