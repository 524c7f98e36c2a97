package relay

import (
	"fmt"

	"go.uber.org/zap"
	"google.golang.org/grpc/credentials"

	"github.com/xds-relay/xds-relay/config"
	"github.com/xds-relay/xds-relay/internal/creds"
	"github.com/xds-relay/xds-relay/internal/upstream"
)

// upstreamCreds holds the upstream credentials built so far, one per
// distinct TLS setting and token file, so that authorities with equal
// settings share one value (hence connections to an origin they have in
// common), and a reload hands an authority whose settings did not change
// the very value it had (its links are not restarted). Used by New and by
// reloads, which are serialised; never by two goroutines at once.
type upstreamCreds struct {
	lg     *zap.Logger
	tls    map[config.ClientTLS]credentials.TransportCredentials
	tokens map[string]credentials.PerRPCCredentials
}

func newUpstreamCreds(lg *zap.Logger) *upstreamCreds {
	return &upstreamCreds{
		lg:     lg,
		tls:    map[config.ClientTLS]credentials.TransportCredentials{},
		tokens: map[string]credentials.PerRPCCredentials{},
	}
}

// authorities turns cfg's authorities into upstream's, each with the TLS
// and bearer token that apply to it (its own, or upstream's). Files of a
// setting seen for the first time are read now (an error if they do not
// load) and followed afterwards (internal/creds): a rotated CA, client
// certificate or token is used by the next connection or stream.
func (uc *upstreamCreds) authorities(cfg *config.Config) ([]upstream.Authority, error) {
	auths := make([]upstream.Authority, 0, len(cfg.Authorities))
	for i, a := range cfg.Authorities {
		ua := upstream.Authority{Name: a.Name, Origins: a.Origins, Transport: a.Transport, GlobCollections: a.GlobCollections}
		if t := cfg.UpstreamTLS(a); t.Enabled {
			c, ok := uc.tls[t]
			if !ok {
				src, err := creds.NewRotatingClientTLS(t, filesNotReloaded(uc.lg))
				if err != nil {
					return nil, fmt.Errorf("authorities[%d] %s: upstream TLS: %w", i, a.Name, err)
				}
				c = creds.TLSCredentials(src.Config)
				uc.tls[t] = c
			}
			ua.Credentials = c
		}
		if file := cfg.BearerTokenFile(a); file != "" {
			p, ok := uc.tokens[file]
			if !ok {
				src, err := creds.NewRotatingToken(file, filesNotReloaded(uc.lg))
				if err != nil {
					return nil, fmt.Errorf("authorities[%d] %s: %w", i, a.Name, err)
				}
				p = creds.BearerCredentials(src.Token, cfg.Upstream.AllowPlaintextBearerToken)
				uc.tokens[file] = p
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
