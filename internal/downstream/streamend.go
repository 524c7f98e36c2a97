package downstream

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/grpc/status"
)

// Ending a stream from outside its handler. An idle stream's only
// goroutine is its handler, waiting in Recv; what must end the stream from
// elsewhere (the writer's failure, SetAccess, the relay's drain) has to
// wake it there, with the status the client is to see. Ending the
// stream's context is not enough: grpc-go's RecvMsg and SendMsg, when they
// fail, write the status of their own error to the client first
// (Canceled), and the handler's comes too late. So the stream's status is
// written first, by gRPC's transport stream (the ServerTransportStream in
// the handler's context, whose WriteStatus is what grpc-go calls after a
// handler returns, and from RecvMsg and SendMsg): once written, the
// stream's context ends, which wakes Recv, and a Send waiting on flow
// control returns. The client gets that status behind what was already
// queued for it; what the handler returns afterwards is not sent. Read in
// grpc-go v1.85: internal/transport's ServerStream.WriteStatus
// (http2_server.go writeStatus, finishStream), server.go
// processStreamingRPC, stream.go serverStream.RecvMsg / SendMsg. A stream
// whose context lacks it is refused (serve); TestEndStream,
// TestSlowClientDisconnected and TestSetAccessStopsRunningWriter check
// the statuses clients get.

// statusWriter is what gRPC's transport stream does beyond
// grpc.ServerTransportStream: end the stream with a status, from any
// goroutine (grpc-go calls it from RecvMsg and SendMsg, which a bidi
// handler runs in two goroutines: it takes the stream's header lock, and
// the first status written is the one sent).
type statusWriter interface {
	WriteStatus(*status.Status) error
}

// statusWriterOf returns the transport stream of ctx (a handler's context,
// or one made from it) as a statusWriter; nil when it is not one.
func statusWriterOf(ctx context.Context) statusWriter {
	w, _ := grpc.ServerTransportStreamFromContext(ctx).(statusWriter)
	return w
}

// EndStream ends the gRPC stream whose handler's context is ctx (or one
// made from it) with st, from any goroutine: the client gets st (unless
// the stream already ended), and the stream's context ends, which wakes a
// handler waiting in Recv. It is how the relay drains streams: a Server's
// handler waits in Recv and does not watch a context an interceptor gave
// it. false when ctx carries no gRPC transport stream.
func EndStream(ctx context.Context, st *status.Status) bool {
	w := statusWriterOf(ctx)
	if w == nil {
		return false
	}
	_ = w.WriteStatus(st) // fails only when the stream already ended
	return true
}
