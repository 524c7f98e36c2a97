package relay

import (
	"fmt"

	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/keepalive"

	"github.com/xds-relay/xds-relay/config"
	"github.com/xds-relay/xds-relay/internal/creds"
	"github.com/xds-relay/xds-relay/internal/downstream"
)

// serverOptions turns the downstream section into grpc.Server options:
// keepalive both ways, message size limits, pooled write buffers and TLS.
func serverOptions(d config.Downstream, lg *zap.Logger) ([]grpc.ServerOption, error) {
	opts := []grpc.ServerOption{
		grpc.KeepaliveParams(keepalive.ServerParameters{
			Time:    d.Keepalive.Time,
			Timeout: d.Keepalive.Timeout,
			// 0 is "off" for both, in gRPC as in the config. gRPC
			// jitters the age by ±10% per connection (getJitter in its
			// http2_server.go), so connections made together do not
			// all get their GOAWAY together.
			MaxConnectionAge:      d.MaxConnectionAge,
			MaxConnectionAgeGrace: d.MaxConnectionAgeGrace,
		}),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{
			MinTime:             d.Keepalive.MinClientPingInterval,
			PermitWithoutStream: true,
		}),
		grpc.MaxRecvMsgSize(int(d.MaxRecvMsgSize)),
		grpc.MaxSendMsgSize(int(d.MaxSendMsgSize)),
		grpc.MaxConcurrentStreams(uint32(d.Limits.MaxStreamsPerConnection)),
		// A connection takes its 32 KiB write buffer from a shared pool
		// while it writes and gives it back once flushed, instead of
		// holding one for life: an idle client (one connection each, as
		// Envoy and grpc-go connect) then costs no write buffer. Writes
		// are batched and flushed as before.
		grpc.SharedWriteBuffer(true),
		// Responses that carry one origin change's shared encoding are
		// sent as those bytes (downstream.Options.SharedEncoding).
		grpc.ForceServerCodecV2(downstream.Codec()),
		// Stop returns once every handler has: then no session can start
		// a goroutine the downstream Server's Wait would race with.
		grpc.WaitForHandlers(true),
	}
	tc, err := creds.ServerTLSConfig(d.TLS, tlsReloadError(lg))
	if err != nil {
		return nil, fmt.Errorf("downstream TLS: %w", err)
	}
	if tc != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(tc)))
	}
	return opts, nil
}

// tlsReloadError logs a rotated certificate pair or CA file that did not
// load (the previous one stays in use).
func tlsReloadError(lg *zap.Logger) func(error) {
	return func(err error) { lg.Warn("TLS file not reloaded; keeping the previous", zap.Error(err)) }
}
