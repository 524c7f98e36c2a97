package relay

import (
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/keepalive"

	"github.com/xds-relay/xds-relay/config"
)

// serverOptions turns the downstream section into grpc.Server options:
// keepalive both ways, message size limits and TLS.
func serverOptions(d config.Downstream) ([]grpc.ServerOption, error) {
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
	tc, err := d.TLS.TLSConfig()
	if err != nil {
		return nil, fmt.Errorf("downstream TLS: %w", err)
	}
	if tc != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(tc)))
	}
	return opts, nil
}
