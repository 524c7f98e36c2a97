package upstream

import (
	"context"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
)

// attemptOrFailback makes one attempt on the authority's origin idx. On an
// origin other than the first (when the first is a control plane, not a
// file source), a prober goroutine owned by this call probes the first
// origin every Options.FailbackInterval and ends the attempt when it
// answers: back reports that, so the caller reconnects to the first origin
// at once.
func (l *link) attemptOrFailback(ctx context.Context, idx int) (healthy, back bool, err error) {
	origin, first := l.auth.origins[idx], l.auth.origins[0]
	if idx == 0 || strings.HasPrefix(first, FileOriginPrefix) {
		healthy, err = l.attempt(ctx, origin)
		return healthy, false, err
	}
	actx, cancel := context.WithCancel(ctx)
	defer cancel()
	answered := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if l.probeUntilAnswer(actx, first) {
			close(answered)
			cancel()
		}
	}()
	healthy, err = l.attempt(actx, origin)
	cancel()
	wg.Wait()
	select {
	case <-answered:
		return healthy, ctx.Err() == nil, err
	default:
		return healthy, false, err
	}
}

// probeUntilAnswer probes origin every failback interval until it answers
// (true) or ctx ends (false).
func (l *link) probeUntilAnswer(ctx context.Context, origin string) bool {
	t := time.NewTicker(l.mgr.failback)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
		}
		if l.probe(ctx, origin) {
			return true
		}
		l.lg.Debug("first origin still does not answer", zap.String("origin", origin))
	}
}

// probe reports whether origin accepts a gRPC connection (the channel
// becomes Ready) within the connect timeout. It opens no stream.
func (l *link) probe(ctx context.Context, origin string) bool {
	conn, err := grpc.NewClient(origin, l.mgr.conns.dialOptions(l.auth.creds)...)
	if err != nil {
		return false
	}
	defer conn.Close()
	pctx, cancel := context.WithTimeout(ctx, l.mgr.connect)
	defer cancel()
	conn.Connect()
	for {
		st := conn.GetState()
		switch st {
		case connectivity.Ready:
			return true
		case connectivity.TransientFailure, connectivity.Shutdown:
			return false
		}
		if !conn.WaitForStateChange(pctx, st) {
			return false
		}
	}
}
