package relay

import (
	"context"
	"fmt"
	"net"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/xds-relay/xds-relay/config"
	"github.com/xds-relay/xds-relay/internal/access"
	"github.com/xds-relay/xds-relay/internal/csds"
	"github.com/xds-relay/xds-relay/internal/downstream"
)

// buildCSDS wires Client Status Discovery (internal/csds) to the
// downstream server: its gRPC server for csds_listen, built with the
// downstream listener's own options (downstream.tls, client certificates
// required when ca_file is set; keepalive, message and stream limits);
// csds_allow, when set, is who may call it (by client certificate). Start
// binds the listener (bind, relay.go) and hands it to the server; Close
// ends it. Its page, /debug/csds, is internal/admin's.
func (r *Relay) buildCSDS(cfg *config.Config, lg *zap.Logger, reg prometheus.Registerer, ds *downstream.Server) error {
	var opts []grpc.ServerOption
	if cfg.CSDSListen != "" {
		o, err := serverOptions(cfg.Downstream, lg.Named("csds"))
		if err != nil {
			return fmt.Errorf("csds_listen: %w", err)
		}
		opts = o
	}
	// A response fits downstream.max_send_msg_size, which the listener
	// enforces, with room for what the size bound does not count.
	maxBytes := csds.DefaultMaxBytes
	if send := int(cfg.Downstream.MaxSendMsgSize); send > 0 {
		maxBytes = min(maxBytes, send*3/4)
	}
	var allow *access.Allowlist
	if len(cfg.CSDSAllow) > 0 {
		a, err := access.NewAllowlist(cfg.CSDSAllow)
		if err != nil {
			return fmt.Errorf("csds_allow: %w", err)
		}
		allow = a
	}
	s, err := csds.New(csds.Options{Source: ds, ServerOptions: opts, MaxBytes: maxBytes,
		Logger: lg, Registry: reg, OnFail: r.fail, Allow: allow, MaxStreamsPerCaller: cfg.CSDSMaxStreamsPerCaller})
	if err != nil {
		return err
	}
	r.csds = s
	r.onStop(func() { s.Close(context.Background()) }) // a relay never started, or New failing later
	return nil
}

// listenCSDS binds csds_listen (nil listener when it is off); serve hands
// it to the CSDS server.
func (r *Relay) listenCSDS(ctx context.Context) (net.Listener, error) {
	if r.config().CSDSListen == "" {
		return nil, nil
	}
	return listen(ctx, "csds_listen", r.config().CSDSListen)
}

// serveCSDS has the CSDS server serve l until Close; the server's own
// goroutine serves it. The server refuses l (and closes it) only once
// Close has stopped it, when fail ignores the error.
func (r *Relay) serveCSDS(l net.Listener) {
	if err := r.csds.Serve(l); err != nil {
		r.fail(fmt.Errorf("csds_listen %s: serve: %w", l.Addr(), err))
	}
}

// CSDSAddr is the bound csds_listen address ("" before Start, or when
// CSDS is off).
func (r *Relay) CSDSAddr() string {
	if r.csds == nil {
		return ""
	}
	return r.csds.Addr()
}
