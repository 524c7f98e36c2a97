package relay

import (
	"fmt"

	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/keepalive"

	"github.com/xds-relay/xds-relay/config"
)

// serverOptions turns the downstream section into grpc.Server options:
// keepalive both ways, message size limits and TLS.
func serverOptions(d config.Downstream, lg *zap.Logger) ([]grpc.ServerOption, error) {
	opts := []grpc.ServerOption{
		grpc.KeepaliveParams(keepalive.ServerParameters{
			Time:    d.Keepalive.Time,
			Timeout: d.Keepalive.Timeout,
		}),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{
			MinTime:             d.Keepalive.MinClientPingInterval,
			PermitWithoutStream: true,
		}),
		grpc.MaxRecvMsgSize(int(d.MaxRecvMsgSize)),
		grpc.MaxSendMsgSize(int(d.MaxSendMsgSize)),
	}
	tc, err := d.TLS.TLSConfig(tlsReloadError(lg))
	if err != nil {
		return nil, fmt.Errorf("downstream TLS: %w", err)
	}
	if tc != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(tc)))
	}
	return opts, nil
}

// tlsReloadError logs a rotated certificate pair that did not load (the
// previous pair stays in use).
func tlsReloadError(lg *zap.Logger) func(error) {
	return func(err error) { lg.Warn("TLS certificate not reloaded", zap.Error(err)) }
}
