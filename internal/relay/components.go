package relay

import (
	"fmt"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"

	"github.com/xds-relay/xds-relay/config"
	"github.com/xds-relay/xds-relay/internal/access"
	"github.com/xds-relay/xds-relay/internal/admin"
	"github.com/xds-relay/xds-relay/internal/cache"
	"github.com/xds-relay/xds-relay/internal/creds"
	"github.com/xds-relay/xds-relay/internal/delivery"
	"github.com/xds-relay/xds-relay/internal/downstream"
	"github.com/xds-relay/xds-relay/internal/propagation"
	"github.com/xds-relay/xds-relay/internal/snapshot"
	"github.com/xds-relay/xds-relay/internal/upstream"
)

// buildComponents builds the cache, the upstream as its Subscriber and the
// downstream server, plugs them into the relay's seams, and hands them to
// the admin pages (internal/admin).
func (r *Relay) buildComponents(cfg *config.Config, lg *zap.Logger, reg prometheus.Registerer) error {
	dl := r.buildDelivery(cfg, lg, reg)   // delivery.go
	ledger := r.buildLedger(cfg, lg, reg) // propagation.go; nil when off
	c := r.buildCache(cfg, lg, reg, dl, ledger)
	r.cache = c // Cache, for tests
	up, err := r.buildUpstream(cfg, lg, reg, c)
	if err != nil {
		return err
	}
	ds, err := r.buildDownstream(cfg, lg, reg, c, up, dl)
	if err != nil {
		return err
	}
	if err := r.buildCSDS(cfg, lg, reg, ds); err != nil { // csds.go
		return err
	}
	r.reloadComponents(c, up, ds, ledger) // reloadhooks.go
	r.addDelivery(dl, c, ds, up)          // after the hooks above: reads what they applied
	r.admin.AddPages(admin.Sources{Config: r.config, Cache: c, Upstream: up, Clients: ds, CSDS: r.csds, Delivery: dl, Ledger: ledger})
	return nil
}

// buildCache builds the cache, restored from its warm-restart snapshot
// when one is configured, and plugs it and the snapshot's writer into the
// relay's seams. Safe delivery (dl) screens every origin change it applies.
func (r *Relay) buildCache(cfg *config.Config, lg *zap.Logger, reg prometheus.Registerer, dl *delivery.Delivery, ledger *propagation.Ledger) *cache.Cache {
	c := cache.New(cache.Options{
		MaxResources: cfg.Cache.MaxResources,
		MaxBytes:     int64(cfg.Cache.MaxBytes),
		// do_not_cache refetches per name (internal/cache/refetch.go)
		RefetchInterval: cfg.Cache.RefetchInterval,
		Logger:          lg, // the cache names it, as upstream and downstream do
		Registry:        reg,
		Ledger:          ledger,
		Validator:       dl,
		Guard:           dl,
		Gate:            dl,
	})
	r.onStop(c.Close) // its TTL expiry timer; runs last (stops run in reverse)
	// Warm restart: restored now, before anything serves; written every
	// cache.snapshot_interval in which the cache changed, and once more at
	// Close, after the upstream stopped: its onStop runs just before c.Close.
	if s := snapshot.FromConfig(cfg, c, lg, reg); s != nil {
		s.Load()
		r.goRun(s.Run)
		r.onStop(s.Final)
		r.onReload(s.Reload)
	}
	return c
}

// buildUpstream builds the upstream, the cache's Subscriber, and plugs it
// into the relay's seams: readiness, Close.
func (r *Relay) buildUpstream(cfg *config.Config, lg *zap.Logger, reg prometheus.Registerer, c *cache.Cache) (*upstream.Manager, error) {
	dial, err := upstreamDialOptions(cfg.Upstream)
	if err != nil {
		return nil, err
	}
	r.upCreds = creds.NewOrigins(filesNotReloaded(lg.Named("upstream")))
	auths, err := upstreamAuthorities(cfg, r.upCreds) // upstreamauth.go
	if err != nil {
		return nil, err
	}
	up, err := upstream.New(upstream.Options{
		Authorities: auths,
		Node:        &corev3.Node{Id: cfg.Node.ID, Cluster: cfg.Node.Cluster},
		Backoff: upstream.Backoff{
			Initial: cfg.Upstream.Backoff.Initial, Max: cfg.Upstream.Backoff.Max,
			Multiplier: cfg.Upstream.Backoff.Multiplier, Jitter: cfg.Upstream.Backoff.Jitter,
		},
		ConnectTimeout:   cfg.Upstream.ConnectTimeout,
		FailbackInterval: cfg.Upstream.FailbackInterval,
		MaxRequestSize:   int(cfg.Upstream.MaxRequestSize),
		IdleTimeout:      cfg.Upstream.IdleTimeout,
		ResponseTimeout:  cfg.Upstream.ResponseTimeout,
		DialOptions:      dial,
		Cache:            c,
		Logger:           lg,
		Registry:         reg,
	})
	if err != nil {
		return nil, fmt.Errorf("upstream: %w", err)
	}
	c.SetUpstream(up)
	r.readyCheck(up.Ready)
	r.onStop(up.Close)
	return up, nil
}

// buildDownstream builds the downstream server on c and up, registers it
// on the relay's gRPC server and plugs it into the relay's seams: REST,
// Close.
func (r *Relay) buildDownstream(cfg *config.Config, lg *zap.Logger, reg prometheus.Registerer, c *cache.Cache, up *upstream.Manager,
	breaker downstream.NackReporter) (*downstream.Server, error) {
	res, err := newResolver(cfg) // reloadhooks.go, as a reload builds it
	if err != nil {
		return nil, err
	}
	pol, err := access.New(cfg.AccessOptions())
	if err != nil {
		return nil, fmt.Errorf("access: %w", err)
	}
	ds, err := downstream.New(downstream.Options{
		Cache:       c,
		Resolver:    res,
		SendTimeout: cfg.Downstream.SendTimeout,
		SlowClients: downstream.SlowClients(cfg.Downstream.SlowClients),
		FetchWait:   cfg.Downstream.FetchWait,
		OriginState: up.OriginState,
		Links:       up, // downstream.limits' group limits
		Logger:      lg,
		Registry:    reg,
		// serverOptions installs downstream.Codec.
		SharedEncoding: true,
		Access:         pol,
		Limits:         downstreamLimits(cfg),
		ControlPlaneID: cfg.ControlPlaneIdentifier(),
		Authorities:    cfg.AuthorityNames(),
		GatherWindow:   cfg.Downstream.GatherWindow,
		MaxSendMsgSize: int(cfg.Downstream.MaxSendMsgSize), // the grpc.Server's too (serverOptions)
		Breaker:        breaker,                            // safe delivery's NACK breaker
	})
	if err != nil {
		return nil, err
	}
	ds.Register(r.grpc)
	r.onStop(ds.Wait)
	r.rest.handler = ds.RESTHandler() // rest_listen (rest.go); the admin listener serves no configuration
	return ds, nil
}

// upstreamDialOptions turns the upstream section into dial options:
// keepalive and message size limits. TLS is per authority
// (upstreamAuthorities).
func upstreamDialOptions(u config.Upstream) ([]grpc.DialOption, error) {
	opts := []grpc.DialOption{
		// No pings without streams: gRPC servers by default count those as
		// abuse and close the connection (as grpc-go's xDS client, too).
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: u.Keepalive.Time, Timeout: u.Keepalive.Timeout}),
	}
	if u.MaxRecvMsgSize > 0 {
		opts = append(opts, grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(int(u.MaxRecvMsgSize))))
	}
	if u.MaxSendMsgSize > 0 {
		opts = append(opts, grpc.WithDefaultCallOptions(grpc.MaxCallSendMsgSize(int(u.MaxSendMsgSize))))
	}
	return opts, nil
}
