package relay

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/xds-relay/xds-relay/config"
	"github.com/xds-relay/xds-relay/internal/admin"
	"github.com/xds-relay/xds-relay/internal/cache"
	"github.com/xds-relay/xds-relay/internal/creds"
	"github.com/xds-relay/xds-relay/internal/csds"
)

// Relay is one relay process: the downstream gRPC server, the admin HTTP
// server and the components between them. New builds it, Start binds and
// serves, Close shuts it down.
type Relay struct {
	// cfg is the running config: set by New, replaced by a reload.
	cfg    atomic.Pointer[config.Config]
	lg     *zap.Logger                   // read-only after New
	m      *metrics                      // read-only after New
	grpc   *grpc.Server                  // read-only after New; services registered in New
	health *health.Server                // read-only after New
	admin  *admin.Server                 // read-only after New
	http   *http.Server                  // read-only after New
	runs   []func(context.Context) error // read-only after New; see goRun
	checks []func() error                // read-only after New; see readyCheck
	// stops are what New built, released in reverse by every way out of
	// New and by Close (onStop, lifecycle.go). Added to by New only.
	stops teardown
	rest  restListener // rest_listen (rest.go)
	csds  *csds.Server // read-only after New; csds_listen (csds.go)
	cache *cache.Cache // read-only after New; for tests only (Cache)
	// upCreds are the upstream credentials by setting (creds.Origins,
	// upstreamauth.go); used by New and by reloads (serialised by reloadMu).
	upCreds *creds.Origins
	// reloads are applied in order by a reload (reload.go); read-only
	// after New. reloadMu serialises reloads.
	reloads  []reloadHook
	reloadMu sync.Mutex
	// level is the logger's level when it can change (LogLevel); ok
	// false otherwise. read-only after New.
	level   zap.AtomicLevel
	levelOK bool
	// streams are the open downstream streams, ended in waves on Close
	// (drain.go).
	streams drainSet

	// life is where the relay is between New and Close, with its
	// transitions (lifecycle.go). Read-only after New.
	life *lifecycle
	wg   sync.WaitGroup // every goroutine Start starts

	mu       sync.Mutex   // guards the fields below
	xdsLis   net.Listener // guarded by mu; set by Start
	adminLis net.Listener // guarded by mu; set by Start
}

// New builds a relay from a validated config. lg is the process logger
// (see NewLogger); reg receives every component's metrics and is served on
// /metrics. Nothing is bound until Start.
func New(cfg *config.Config, lg *zap.Logger, reg *prometheus.Registry) (*Relay, error) {
	if cfg == nil {
		return nil, errors.New("relay: nil config")
	}
	if lg == nil {
		lg = zap.NewNop()
	}
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	opts, err := serverOptions(cfg.Downstream, lg.Named("downstream"))
	if err != nil {
		return nil, fmt.Errorf("relay: %w", err)
	}
	r := &Relay{
		lg:     lg.Named("relay"),
		m:      newMetrics(reg),
		health: health.NewServer(),
		life:   newLifecycle(),
	}
	if err := r.build(cfg, lg, reg, opts); err != nil {
		r.stops.run() // the one way back from a part-built relay
		return nil, fmt.Errorf("relay: %w", err)
	}
	return r, nil
}

// build builds what New returns, adding each part that must be let go to
// r.stops as soon as it exists, so that an error part way needs no
// clean-up of its own.
func (r *Relay) build(cfg *config.Config, lg *zap.Logger, reg *prometheus.Registry, opts []grpc.ServerOption) error {
	r.cfg.Store(cfg)
	r.level, r.levelOK = LogLevel(lg)
	r.m.lastReloadSuccess.Set(float64(time.Now().UnixNano()) / 1e9)
	r.onStop(r.streams.endAll) // released last: ends any stream left
	r.grpc = grpc.NewServer(append(opts, grpc.ChainStreamInterceptor(r.drainStreams))...)
	r.onStop(r.grpc.Stop) // after every component's stop (a no-op once Close stopped it)
	r.admin = r.newAdmin(cfg, lg, reg)
	r.http = &http.Server{
		Handler:           r.admin,
		ReadHeaderTimeout: admin.ReadHeaderTimeout,
		ErrorLog:          zap.NewStdLog(lg.Named("admin")),
	}
	r.health.SetServingStatus("", healthpb.HealthCheckResponse_NOT_SERVING)
	healthpb.RegisterHealthServer(r.grpc, r.health)

	// --- components ---------------------------------------------------
	// Cache, upstream and downstream are built here, in dependency order
	// (cache, then upstream as the cache's Subscriber, then downstream),
	// from cfg and lg (each names its own logger: "cache", "upstream",
	// "downstream"), registering their metrics on reg. The seams:
	//   - r.grpc: register the xDS services on it (downstream).
	//   - internal/admin: every admin route and page; buildComponents
	//     hands it the components (admin.Sources) once they are built.
	//   - r.goRun(fn): a long-running loop (upstream streams); its context
	//     ends when Close begins, and Close waits for it to return.
	//   - r.onStop(fn): called by Close after the servers have stopped, in
	//     reverse order (e.g. waiting for a component's goroutines); also
	//     by Close before Start and when New fails after fn was added.
	//   - r.readyCheck(fn): /readyz answers 503 while fn returns an error.
	// --------------------------------------------------------------------
	if err := r.buildComponents(cfg, lg, reg); err != nil {
		return err
	}
	if err := r.buildREST(lg.Named("rest")); err != nil {
		return err
	}
	return r.watchConfig(cfg, lg)
}

// newAdmin builds the admin listener's handler (internal/admin) with the
// relay's own operations: readiness, the Host allow list, reload and the
// log level. buildComponents adds the components' pages.
func (r *Relay) newAdmin(cfg *config.Config, lg *zap.Logger, reg *prometheus.Registry) *admin.Server {
	o := admin.Options{Registry: reg, Logger: lg, Ready: r.readiness, Pprof: cfg.AdminPprof,
		AllowedHosts: func() []string { return r.config().AdminAllowedHosts },
		Reload:       r.Reload, ReloadRefused: ErrReloadInvalid}
	if r.levelOK {
		o.Level = &r.level
	}
	return admin.New(o)
}

// goRun makes fn run from Start until Close; Close cancels its context and
// waits for it. An error returned before Close stops the relay (Failed).
func (r *Relay) goRun(fn func(ctx context.Context) error) { r.runs = append(r.runs, fn) }

// onStop adds fn to what is released, in reverse order, on every way out:
// by Close once both servers have stopped (or before Start), and by New
// when it fails after fn was added.
func (r *Relay) onStop(fn func()) { r.stops.add(fn) }

// readyCheck adds a condition for /readyz.
func (r *Relay) readyCheck(fn func() error) { r.checks = append(r.checks, fn) }

// Start binds the downstream listener and the admin server and starts
// serving. It returns once both addresses are bound: a busy port fails at
// once ("listen 127.0.0.1:18000: address already in use"). ctx bounds only
// the start; the relay runs until Close.
func (r *Relay) Start(ctx context.Context) error {
	if err := r.life.startable(); err != nil {
		return err
	}
	ls, bound, err := r.bind(ctx)
	if err != nil {
		return err
	}
	runCtx, cancel := context.WithCancel(context.Background())
	bound.add(cancel)

	err = r.life.start(cancel, func() {
		r.mu.Lock()
		r.xdsLis, r.adminLis = ls.xds, ls.admin
		r.mu.Unlock()
		// Added under the lifecycle's lock so that Close, which takes it
		// first, never Waits before these Adds.
		r.wg.Add(2 + len(r.runs))
		if ls.rest != nil {
			r.wg.Add(1)
		}
	})
	if err != nil { // Close or another Start raced with this one
		bound.run()
		return err
	}

	r.serve(runCtx, ls)
	r.m.ready.Set(1)
	r.health.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	r.lg.Info("relay serving", zap.String("listen", ls.xds.Addr().String()), zap.String("admin", ls.admin.Addr().String()),
		zap.String("rest_listen", r.RESTAddr()), zap.String("csds_listen", r.CSDSAddr()))
	return nil
}

// startListeners are the listeners Start binds; rest is nil without
// rest_listen, csds without csds_listen.
type startListeners struct {
	xds, admin, rest, csds net.Listener
}

// bind binds the downstream, admin, REST and CSDS listeners, in that
// order, each through listen (one error message for all). bound are what
// it bound, to let go of in reverse on every way out of Start that does
// not serve; on an error it has let go of them already.
func (r *Relay) bind(ctx context.Context) (startListeners, teardown, error) {
	cfg := r.config()
	var ls startListeners
	var bound teardown
	keep := func(l net.Listener, err error) (net.Listener, error) {
		if err != nil {
			bound.run()
			return nil, err
		}
		if l != nil {
			bound.add(func() { _ = l.Close() })
		}
		return l, nil
	}
	var err error
	if ls.xds, err = keep(listen(ctx, "listen", cfg.Listen)); err != nil {
		return ls, nil, err
	}
	if ls.admin, err = keep(listen(ctx, "admin", cfg.Admin)); err != nil {
		return ls, nil, err
	}
	if ls.rest, err = keep(r.listenREST(ctx)); err != nil { // rest.go
		return ls, nil, err
	}
	if ls.csds, err = keep(r.listenCSDS(ctx)); err != nil { // csds.go
		return ls, nil, err
	}
	return ls, bound, nil
}

// serve starts the goRun loops on runCtx and the servers on ls, each in a
// goroutine r.wg waits for (Start added them). A loop's error, or a
// server's, stops the relay (Failed).
func (r *Relay) serve(runCtx context.Context, ls startListeners) {
	for _, fn := range r.runs {
		go func() {
			defer r.wg.Done()
			if err := fn(runCtx); err != nil && runCtx.Err() == nil {
				r.fail(fmt.Errorf("component stopped: %w", err))
			}
		}()
	}
	go func() {
		defer r.wg.Done()
		if err := r.grpc.Serve(ls.xds); err != nil {
			r.fail(fmt.Errorf("listen %s: serve: %w", ls.xds.Addr(), err))
		}
	}()
	go func() {
		defer r.wg.Done()
		if err := r.http.Serve(ls.admin); err != nil && !errors.Is(err, http.ErrServerClosed) {
			r.fail(fmt.Errorf("admin %s: serve: %w", ls.admin.Addr(), err))
		}
	}()

	if ls.rest != nil {
		go func() {
			defer r.wg.Done()
			r.serveREST(ls.rest)
		}()
	}
	if ls.csds != nil {
		r.serveCSDS(ls.csds) // its goroutine is the CSDS server's own (csds.go)
	}
}

// listen binds addr; its error is a ListenError naming the config key:
// "listen 127.0.0.1:18000: address already in use".
func listen(ctx context.Context, key, addr string) (net.Listener, error) {
	var lc net.ListenConfig
	l, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		var sysErr *os.SyscallError
		if errors.As(err, &sysErr) {
			err = sysErr.Err
		}
		return nil, &ListenError{Key: key, Addr: addr, Err: err}
	}
	return l, nil
}

// fail records the first unexpected stop for Failed.
func (r *Relay) fail(err error) {
	if r.life.stopping() {
		return
	}
	r.lg.Error("relay stopped unexpectedly", zap.Error(err))
	select {
	case r.life.failed <- err:
	default:
	}
}

// Failed delivers the first error that stopped a server or component
// before Close (a process should then Close and exit non-zero).
func (r *Relay) Failed() <-chan error { return r.life.failed }

// XDSAddr is the bound downstream address ("" before Start).
func (r *Relay) XDSAddr() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.xdsLis == nil {
		return ""
	}
	return r.xdsLis.Addr().String()
}

// AdminAddr is the bound admin address ("" before Start).
func (r *Relay) AdminAddr() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.adminLis == nil {
		return ""
	}
	return r.adminLis.Addr().String()
}

// Cache is the relay's cache, for tests only: integration's upstream
// suites watch and read it directly, in place of a downstream client, on
// the relay the process wiring built. Nothing in the process calls it.
func (r *Relay) Cache() *cache.Cache { return r.cache }

// config is the running config.
func (r *Relay) config() *config.Config { return r.cfg.Load() }

// readiness is nil while the relay serves and every readiness check passes.
func (r *Relay) readiness() error {
	if !r.life.is(phaseServing) {
		return errors.New("not serving")
	}
	for _, check := range r.checks {
		if err := check(); err != nil {
			return err
		}
	}
	return nil
}

// Close shuts the relay down: /readyz and gRPC health turn to not serving
// at once, and for downstream.drain_delay nothing else changes (streams,
// old and new, are served) so that load balancers notice. Then components
// are cancelled, the listener stops accepting (GOAWAY), and the streams
// are ended in downstream.drain_waves waves spread over
// downstream.drain_duration (at most half the shutdown grace period; see
// drain.go): clients see Unavailable and reconnect, to another relay, not
// all at the same instant. Unary calls and admin requests in flight get up
// to the shutdown grace period (counted from the GOAWAY); then whatever is
// left is cut. Close returns once every goroutine has ended; it may be
// called more than once (later calls wait for the first), and before
// Start.
func (r *Relay) Close() error {
	prev, cancel := r.life.close()
	switch prev {
	case phaseNew:
		defer r.life.closed()
		r.stops.run() // components built in New may run goroutines
		return nil
	case phaseServing:
	default:
		<-r.life.done // another Close is under way or done: wait for it
		return nil
	}
	defer r.life.closed()

	// A reload under way finishes first; none starts after (life: draining).
	r.reloadMu.Lock()
	cfg := r.config()
	r.reloadMu.Unlock()

	r.unready(cfg.Downstream.DrainDelay)
	r.life.stop()
	cancel()

	grace := cfg.ShutdownGracePeriod
	ctx, stop := context.WithTimeout(context.Background(), grace)
	defer stop()
	err := r.shutdownServers(ctx, cfg, grace)
	r.wg.Wait()
	r.stops.run()
	r.lg.Info("relay stopped")
	return err
}

// unready makes the relay answer not ready (/readyz, gRPC health) and
// serves on for drainDelay, so that load balancers notice first.
func (r *Relay) unready(drainDelay time.Duration) {
	r.m.ready.Set(0)
	r.health.Shutdown()
	if d := drainDelay; d > 0 {
		r.lg.Info("draining: not ready; serving on until load balancers notice", zap.Duration("drain_delay", d))
		time.Sleep(d) // nothing to wait on: the delay is the point
	}
}

// shutdownServers stops the gRPC, admin, REST and CSDS servers within ctx
// (the grace period): the downstream streams end in waves, whatever is
// left when ctx ends is cut. It returns the admin's and REST's shutdown
// errors.
func (r *Relay) shutdownServers(ctx context.Context, cfg *config.Config, grace time.Duration) error {
	grpcStopped := make(chan struct{})
	go func() {
		r.grpc.GracefulStop()
		close(grpcStopped)
	}()
	r.endInWaves(ctx, cfg.Downstream.DrainWaves, min(cfg.Downstream.DrainDuration, grace/2))
	r.streams.endAll() // whatever is left, and any stream opened since
	var errs []error
	if err := r.http.Shutdown(ctx); err != nil {
		_ = r.http.Close()
		if !errors.Is(err, context.DeadlineExceeded) {
			errs = append(errs, fmt.Errorf("admin: shutdown: %w", err))
		}
	}
	if err := r.shutdownREST(ctx); err != nil {
		errs = append(errs, err)
	}
	r.csds.Close(ctx) // its streams end at once; unary calls get the grace period
	select {
	case <-grpcStopped:
	case <-ctx.Done():
		r.lg.Warn("shutdown grace period over, closing remaining streams", zap.Duration("grace", grace))
		r.grpc.Stop()
		<-grpcStopped
	}
	return errors.Join(errs...)
}
