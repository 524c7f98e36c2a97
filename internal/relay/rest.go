package relay

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"

	"go.uber.org/zap"

	"github.com/xds-relay/xds-relay/internal/admin"
	"github.com/xds-relay/xds-relay/internal/creds"
)

// restListener is the optional listener of REST-JSON polling (config
// rest_listen): downstream's REST handler behind downstream.tls (client
// certificates included, so the access rules see the same identities as
// on xDS). The admin listener serves no configuration content.
type restListener struct {
	handler http.Handler // set by buildComponents; read-only after New
	srv     *http.Server // nil when rest_listen is ""; read-only after New

	mu  sync.Mutex   // guards lis
	lis net.Listener // guarded by mu; set by Start
}

// buildREST builds the REST server when rest_listen is set.
func (r *Relay) buildREST(lg *zap.Logger) error {
	if r.config().RESTListen == "" || r.rest.handler == nil {
		return nil
	}
	tc, err := creds.ServerTLSConfig(r.config().Downstream.TLS, tlsReloadError(lg))
	if err != nil {
		return fmt.Errorf("rest_listen TLS: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/v3/", r.rest.handler) // POST /v3/discovery:<kind>; other paths 404
	rt := r.config().Downstream.REST
	r.rest.srv = &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: min(admin.ReadHeaderTimeout, rt.ReadTimeout),
		// A poll that stalls its body, its response or an idle keep-alive
		// connection holds a goroutine and a socket: each is bounded.
		ReadTimeout:  rt.ReadTimeout,
		WriteTimeout: rt.WriteTimeout,
		IdleTimeout:  rt.IdleTimeout,
		TLSConfig:    tc,
		ErrorLog:     zap.NewStdLog(lg),
	}
	return nil
}

// listenREST binds rest_listen (nil listener when it is off).
func (r *Relay) listenREST(ctx context.Context) (net.Listener, error) {
	if r.rest.srv == nil {
		return nil, nil
	}
	l, err := listen(ctx, "rest_listen", r.config().RESTListen)
	if err != nil {
		return nil, err
	}
	if tc := r.rest.srv.TLSConfig; tc != nil {
		l = tls.NewListener(l, tc)
	}
	r.rest.mu.Lock()
	r.rest.lis = l
	r.rest.mu.Unlock()
	return l, nil
}

// serveREST serves l until Close; owned by the relay's wait group.
func (r *Relay) serveREST(l net.Listener) {
	if err := r.rest.srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
		r.fail(fmt.Errorf("rest_listen %s: serve: %w", l.Addr(), err))
	}
}

// shutdownREST ends the REST server: polls in flight get until ctx ends.
func (r *Relay) shutdownREST(ctx context.Context) error {
	if r.rest.srv == nil {
		return nil
	}
	if err := r.rest.srv.Shutdown(ctx); err != nil {
		_ = r.rest.srv.Close()
		if !errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("rest_listen: shutdown: %w", err)
		}
	}
	return nil
}

// RESTAddr is the bound rest_listen address ("" before Start, or when
// REST-JSON polling is off).
func (r *Relay) RESTAddr() string {
	r.rest.mu.Lock()
	defer r.rest.mu.Unlock()
	if r.rest.lis == nil {
		return ""
	}
	return r.rest.lis.Addr().String()
}
