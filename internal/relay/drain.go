package relay

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// drainStreams is a stream interceptor that gives every stream a context
// which also ends when Close begins. xDS streams never end by themselves, so
// without it a graceful stop would always wait out the whole grace period;
// with it, handlers that honour their stream's context (every xDS session)
// return at once and their clients see Unavailable and reconnect, to
// another relay. The grace period is left to unary calls and REST polls in
// flight, and to handlers that do not honour the context.
func (r *Relay) drainStreams(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	ctx, cancel := context.WithCancel(ss.Context())
	defer cancel()
	stop := context.AfterFunc(r.draining, cancel)
	defer stop()
	err := handler(srv, drainableStream{ServerStream: ss, ctx: ctx})
	if r.draining.Err() != nil && ss.Context().Err() == nil {
		// Ended by the shutdown, not by the client.
		return status.Error(codes.Unavailable, "relay shutting down")
	}
	return err
}

// drainableStream replaces a stream's context.
type drainableStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s drainableStream) Context() context.Context { return s.ctx }
