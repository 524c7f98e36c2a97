package upstream

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
)

// attempt serves the link from origin until that fails or ctx ends: a
// delta or SotW ADS stream, or a file source. healthy says it received at
// least one response (for a file source: that it started).
func (l *link) attempt(ctx context.Context, origin string) (healthy bool, err error) {
	if strings.HasPrefix(origin, FileOriginPrefix) {
		fs := l.mgr.fileSource(origin)
		if fs == nil {
			return false, errors.New("file source not started")
		}
		return l.fileAttempt(ctx, fs)
	}
	if l.auth.sotw {
		return l.sotwAttempt(ctx, origin)
	}
	return l.deltaAttempt(ctx, origin)
}

// attemptOps is what a transport does on an open stream. Both run on the
// link's run goroutine, which owns the transport's state for the attempt.
type attemptOps[Resp any] struct {
	// sync tells the origin what the cache wants that it was not told yet:
	// once when the stream opens, then after every poke.
	sync func() error
	// handle validates one response, applies it to the cache and ACKs or
	// NACKs it.
	handle func(*Resp) error
	// probe, when the origin has not answered within response_timeout,
	// sends a request it must answer if its silence may be that of an
	// origin with nothing new (probe.go); false: nothing to probe on the
	// stream, the liveness probe decides. nil: never.
	probe func() (bool, error)
}

// wildcardRequest builds a transport's first request subscribing the
// wildcard of one type, as node (the liveness probe, probe.go).
type wildcardRequest[Req any] func(node *corev3.Node, typeURL string) *Req

// runAttempt dials origin, opens one stream of transport on it (ADS, or
// per-type streams seen as one: pertype.go) and serves it with the ops
// newOps builds for that stream, until the stream fails or ctx ends.
// healthy says at least one response arrived. While the stream is open it
// counts in xds_relay_upstream_streams.
func runAttempt[Req, Resp any](ctx context.Context, l *link, origin, transport string, open streamOpener[Req, Resp],
	wildcard wildcardRequest[Req], newOps func(grpc.BidiStreamingClient[Req, Resp]) attemptOps[Resp]) (healthy bool, err error) {
	conn, putConn, err := l.mgr.conns.get(origin, l.auth.creds)
	if err != nil {
		return false, fmt.Errorf("upstream %s: dial %s: %w", l.id.Authority, origin, err)
	}
	defer putConn()
	actx, cancel := context.WithCancel(ctx)
	defer cancel()
	ads, err := open(conn, actx, l.auth.callOpts...)
	if err != nil {
		return false, fmt.Errorf("upstream %s: open %s stream to %s: %w", l.id.Authority, transport, origin, err)
	}
	if pt, ok := ads.(interface{ wait() }); ok {
		defer pt.wait() // per-type streams' receivers (pertype.go), after cancel
	}
	l.mgr.metrics.streams.WithLabelValues(l.id.Authority).Inc()
	defer l.mgr.metrics.streams.WithLabelValues(l.id.Authority).Dec()
	l.lg.Info("upstream stream open", zap.String("origin", origin), zap.String("transport", transport))
	l.setState(origin, "waiting")
	startProbe := func(probes *sync.WaitGroup) <-chan error {
		return startLiveness(actx, l, conn, open, wildcard, probes)
	}
	return serveAttempt(actx, cancel, l, origin, transport, ads, startProbe, newOps)
}

// serveAttempt serves ads, the open stream of an attempt on origin, with
// the ops newOps builds for it, until the stream fails or actx ends; on
// the way out it calls cancel, which ends actx (the streams, hence the
// receiver and the liveness probe startProbe starts), and waits for them.
// healthy says at least one response arrived.
func serveAttempt[Req, Resp any](actx context.Context, cancel context.CancelFunc, l *link, origin, transport string,
	ads grpc.BidiStreamingClient[Req, Resp], startProbe func(*sync.WaitGroup) <-chan error,
	newOps func(grpc.BidiStreamingClient[Req, Resp]) attemptOps[Resp]) (healthy bool, err error) {
	recv, errc, wait := recvLoop(actx, ads.Recv)
	defer wait()
	var probes sync.WaitGroup // the liveness probe (probe.go)
	defer probes.Wait()
	defer cancel() // ends the streams, hence the receiver and the probe, before waiting
	sends := &countingSender[Req, Resp]{BidiStreamingClient: ads}
	silence := &silenceWatch{timeout: l.mgr.responseTimeout}
	defer silence.stop()

	ops := newOps(sends)
	if err := ops.sync(); err != nil {
		return false, err
	}
	silence.arm(healthy, sends.n)
	for {
		select {
		case <-actx.Done():
			return healthy, actx.Err()
		case err := <-errc:
			return healthy, fmt.Errorf("upstream %s: %s stream to %s: %w", l.id.Authority, transport, origin, err)
		case <-silence.deadline:
			probing, err := silence.probe(ops.probe, func() <-chan error { return startProbe(&probes) })
			if err != nil {
				return false, err
			}
			if probing {
				continue
			}
			l.mgr.metrics.responseTimeouts.WithLabelValues(l.id.Authority).Inc()
			return false, fmt.Errorf("upstream %s: %s stream to %s: %w (%v, nor to a liveness probe)", l.id.Authority, transport, origin, ErrNoResponse, l.mgr.responseTimeout)
		case err := <-silence.alive:
			silence.alive = nil
			if err != nil {
				return false, fmt.Errorf("upstream %s: liveness probe on %s: %w", l.id.Authority, origin, err)
			}
			// The origin answers: it is alive, and silent only about the
			// names asked for (it may not have them). No failover.
			healthy, silence.deadline = true, nil
			l.probeAnswered(origin)
		case <-l.poke:
			if err := ops.sync(); err != nil {
				return healthy, err
			}
			silence.arm(healthy, sends.n)
		case r := <-recv:
			if !healthy {
				l.mgr.checks.set(l.id.Authority, origin, nil)
			}
			healthy = true
			silence.deadline = nil // the origin answers: alive
			l.answered()
			if err := ops.handle(r); err != nil {
				return healthy, err
			}
		}
	}
}

// silenceWatch is an attempt's watch on origin liveness: once the attempt
// has asked the origin for anything, its first response must come within
// timeout. Silence is not yet a stall: the origin may not have the names
// asked for (an origin need not answer those). So it is probed once
// (probe.go): on the stream when it was told every version, else with a
// wildcard on a stream of its own. An origin that answers neither within
// another timeout is failed over, not waited on. Owned by the link's run
// goroutine.
type silenceWatch struct {
	timeout time.Duration
	timer   *time.Timer
	// deadline fires when the origin was silent for timeout; nil: not
	// armed, or the origin answers.
	deadline <-chan time.Time
	probed   bool         // the silence was probed once
	alive    <-chan error // the liveness probe's result (probe.go)
}

// arm starts the deadline, unless it was started once, the origin
// answered (healthy) or the attempt sent nothing yet.
func (w *silenceWatch) arm(healthy bool, sent int) {
	if w.timer == nil && !healthy && sent > 0 {
		w.restart()
	}
}

// restart starts the deadline anew.
func (w *silenceWatch) restart() {
	w.timer = time.NewTimer(w.timeout)
	w.deadline = w.timer.C
}

// stop stops the deadline's timer, if any.
func (w *silenceWatch) stop() {
	if w.timer != nil {
		w.timer.Stop()
	}
}

// probe decides what the deadline passing means. The first time, the
// silence is probed: with onStream, the transport's probe on the stream
// (nil: none), else with the liveness probe startProbe starts, and the
// deadline restarts; probing says so. Else, or when there is nothing to
// probe with, it is a stall (false).
func (w *silenceWatch) probe(onStream func() (bool, error), startProbe func() <-chan error) (probing bool, err error) {
	if w.probed {
		return false, nil
	}
	w.probed = true
	ok := false
	if onStream != nil {
		if ok, err = onStream(); err != nil {
			return false, err
		}
	}
	if !ok {
		w.alive = startProbe()
	}
	if ok || w.alive != nil {
		w.restart()
		return true, nil
	}
	return false, nil
}

// probeAnswered notes that origin answered a liveness probe: it is alive,
// whatever it did not answer on the attempt's stream.
func (l *link) probeAnswered(origin string) {
	l.mgr.checks.set(l.id.Authority, origin, nil)
	l.lg.Info("origin answered a liveness probe; it has not answered the names asked for (it may not have them)",
		zap.String("origin", origin))
	l.originAlive()
}

// countingSender counts the requests an attempt sends (origin liveness).
// Used by the link's run goroutine only.
type countingSender[Req, Resp any] struct {
	grpc.BidiStreamingClient[Req, Resp]
	n int
}

func (c *countingSender[Req, Resp]) Send(r *Req) error {
	c.n++
	return c.BidiStreamingClient.Send(r)
}

// recvLoop calls recv in its own goroutine, the only caller of recv, until
// recv fails (the error goes to the second channel) or ctx ends. What recv
// returns goes to the first channel, unbuffered. The caller owns the
// goroutine: it ends ctx (which must also make recv return, as a stream's
// context does), then calls wait.
func recvLoop[T any](ctx context.Context, recv func() (T, error)) (<-chan T, <-chan error, func()) {
	out := make(chan T)
	errc := make(chan error, 1)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			m, err := recv()
			if err != nil {
				errc <- err
				return
			}
			select {
			case out <- m:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out, errc, wg.Wait
}
