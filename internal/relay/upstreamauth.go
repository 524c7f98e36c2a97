package relay

import (
	"fmt"

	"go.uber.org/zap"
	"google.golang.org/grpc/credentials"

	"github.com/xds-relay/xds-relay/config"
	"github.com/xds-relay/xds-relay/internal/upstream"
)

// upstreamAuthorities turns the authorities into upstream's, each with the
// TLS and bearer token that apply to it (its own, or upstream's). Files are
// read now (an error if they do not load) and followed afterwards: a
// rotated CA, client certificate or token is used by the next connection
// or stream. Authorities with equal TLS settings share one credentials
// value, hence connections to an origin they have in common; others get
// their own.
func upstreamAuthorities(cfg *config.Config, lg *zap.Logger) ([]upstream.Authority, error) {
	creds := map[config.ClientTLS]credentials.TransportCredentials{}
	tokens := map[string]credentials.PerRPCCredentials{}
	auths := make([]upstream.Authority, 0, len(cfg.Authorities))
	for i, a := range cfg.Authorities {
		ua := upstream.Authority{Name: a.Name, Origins: a.Origins, Transport: a.Transport, GlobCollections: a.GlobCollections}
		if t := cfg.UpstreamTLS(a); t.Enabled {
			c, ok := creds[t]
			if !ok {
				src, err := t.Source(filesNotReloaded(lg))
				if err != nil {
					return nil, fmt.Errorf("authorities[%d] %s: upstream TLS: %w", i, a.Name, err)
				}
				c = upstream.TLSCredentials(src.Config)
				creds[t] = c
			}
			ua.Credentials = c
		}
		if file := cfg.BearerTokenFile(a); file != "" {
			p, ok := tokens[file]
			if !ok {
				src, err := config.NewBearerTokenSource(file, filesNotReloaded(lg))
				if err != nil {
					return nil, fmt.Errorf("authorities[%d] %s: %w", i, a.Name, err)
				}
				p = upstream.BearerCredentials(src.Token, cfg.Upstream.AllowPlaintextBearerToken)
				tokens[file] = p
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
