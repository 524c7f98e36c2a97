package csds

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"

	statusv3 "github.com/envoyproxy/go-control-plane/envoy/service/status/v3"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/reflection"
	"google.golang.org/grpc/status"

	"github.com/xds-relay/xds-relay/internal/access"
	"github.com/xds-relay/xds-relay/internal/downstream"
)

// The bounds of one response (FetchClientStatus, each StreamClientStatus
// answer, GET /debug/csds), whatever the fleet and whatever the caller
// asks: clients are listed by stream id, oldest first.
const (
	// DefaultMaxClients: at most this many client configs per response;
	// the others that match are only counted (the truncation note).
	DefaultMaxClients = 1000
	// DefaultMaxResources: at most this many resource entries
	// (generic_xds_configs) per response, over all its clients; a client
	// listed after they are spent is listed with none (its node only).
	DefaultMaxResources = 20000
	// DefaultMaxBytes: at most about this many encoded bytes per response
	// (an upper bound of each entry's and node's size): under gRPC's
	// default receive limit of 4 MiB, so a caller with default options
	// can take any response.
	DefaultMaxBytes = 3 << 20
	// maxBuilding: reports built at once, over every caller; the others
	// wait their turn (or their deadline).
	maxBuilding = 2
	// DefaultMaxStreamsPerCaller: StreamClientStatus streams one caller
	// may hold open at once (config's csds_max_streams_per_caller default).
	DefaultMaxStreamsPerCaller = 4
)

// TruncatedHeader is the response metadata that says a response was cut
// at its bounds: "<listed> of <matched> clients; <n> resource entries
// left out". Fetch: a header. Stream: the header when the first answer is
// cut, and the trailer (the note of every cut answer, in order).
const TruncatedHeader = "x-xds-relay-csds-truncated"

// Source is what CSDS reports on: the connected clients
// (downstream.Server).
type Source interface {
	ConfigStatus(downstream.StatusQuery) downstream.StatusReport
}

// Options configure a Server.
type Options struct {
	// Source is required.
	Source Source
	// ServerOptions are the listener's gRPC options (the downstream TLS,
	// keepalive and message limits). The listener itself is bound by the
	// relay (csds_listen) and handed to Serve; without one, Debug and Page
	// still work.
	ServerOptions []grpc.ServerOption
	// MaxClients, MaxResources and MaxBytes bound each response; 0:
	// the defaults.
	MaxClients   int
	MaxResources int
	MaxBytes     int
	Logger       *zap.Logger
	Registry     prometheus.Registerer
	// OnFail is told when the listener stops serving before Close.
	OnFail func(error)
	// Allow, when set, is who may call the service (csds_allow): a
	// caller whose verified client certificate it does not allow gets
	// PermissionDenied. Nil: every caller the listener admits.
	Allow *access.Allowlist
	// MaxStreamsPerCaller bounds the StreamClientStatus streams one caller
	// holds open (csds_max_streams_per_caller; see callers.go); 0:
	// DefaultMaxStreamsPerCaller.
	MaxStreamsPerCaller int
}

// Server serves envoy.service.status.v3.ClientStatusDiscoveryService and
// /debug/csds.
type Server struct {
	statusv3.UnimplementedClientStatusDiscoveryServiceServer

	src          Source      // read-only after New
	lg           *zap.Logger // read-only after New
	m            *metrics    // read-only after New
	maxClients   int         // read-only after New
	maxResources int         // read-only after New
	maxBytes     int         // read-only after New
	// slots bounds the reports built at once (maxBuilding).
	slots chan struct{}
	// closing is closed by Close: open streams end, waiting calls give up.
	closing   chan struct{}
	closeOnce sync.Once
	// wg owns the stream pumps and the serve goroutine.
	wg sync.WaitGroup

	// callers counts each caller's open streams (callers.go).
	callers *callers

	gs     *grpc.Server      // read-only after New
	onFail func(error)       // read-only after New
	allow  *access.Allowlist // read-only after New; nil: open
	mu     sync.Mutex        // guards lis, state
	lis    net.Listener      // guarded by mu; set by Start
	state  lifecycle         // guarded by mu
}

// lifecycle: new → started (Start) → closed (Close); Close also from new.
type lifecycle int

const (
	stateNew lifecycle = iota
	stateStarted
	stateClosed
)

// New builds a Server; nothing is served until Serve.
func New(o Options) (*Server, error) {
	if o.Source == nil {
		return nil, errors.New("csds: no source")
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	if o.MaxClients <= 0 {
		o.MaxClients = DefaultMaxClients
	}
	if o.MaxResources <= 0 {
		o.MaxResources = DefaultMaxResources
	}
	if o.MaxBytes <= 0 {
		o.MaxBytes = DefaultMaxBytes
	}
	if o.MaxStreamsPerCaller <= 0 {
		o.MaxStreamsPerCaller = DefaultMaxStreamsPerCaller
	}
	s := &Server{
		src:          o.Source,
		lg:           o.Logger.Named("csds"),
		m:            newMetrics(o.Registry),
		maxClients:   o.MaxClients,
		maxResources: o.MaxResources,
		maxBytes:     o.MaxBytes,
		slots:        make(chan struct{}, maxBuilding),
		closing:      make(chan struct{}),
		callers:      newCallers(o.MaxStreamsPerCaller),
		onFail:       o.OnFail,
		allow:        o.Allow,
	}
	s.gs = grpc.NewServer(o.ServerOptions...)
	statusv3.RegisterClientStatusDiscoveryServiceServer(s.gs, s)
	// Server reflection, so that generic clients (grpcurl) can call the
	// service by name without its .proto files: it lists the services of
	// this listener and their schemas, nothing of the clients.
	reflection.Register(s.gs)
	return s, nil
}

// FetchClientStatus answers one request.
func (s *Server) FetchClientStatus(ctx context.Context, req *statusv3.ClientStatusRequest) (*statusv3.ClientStatusResponse, error) {
	if _, err := s.admit(ctx); err != nil {
		return nil, err
	}
	s.m.requests.WithLabelValues(methodFetch).Inc()
	resp, note, err := s.answer(ctx, req)
	if err != nil {
		return nil, err
	}
	if note != "" {
		_ = grpc.SetHeader(ctx, metadata.Pairs(TruncatedHeader, note))
	}
	return resp, nil
}

// answer builds the response to req, and the truncation note when it was
// cut; errors are gRPC statuses.
func (s *Server) answer(ctx context.Context, req *statusv3.ClientStatusRequest) (*statusv3.ClientStatusResponse, string, error) {
	sel, err := compileRequest(req)
	if err != nil {
		return nil, "", status.Error(codes.InvalidArgument, err.Error())
	}
	rep, err := s.report(ctx, downstream.StatusQuery{Match: sel, MaxClients: s.maxClients, MaxResources: s.maxResources, MaxBytes: s.maxBytes})
	if err != nil {
		return nil, "", err
	}
	resp := response(rep)
	s.m.clients.Add(float64(len(rep.Clients)))
	return resp, s.note(len(rep.Clients), rep.Matched, rep.ResourcesCut), nil
}

// report takes a building slot and asks the source.
func (s *Server) report(ctx context.Context, q downstream.StatusQuery) (downstream.StatusReport, error) {
	select {
	case s.slots <- struct{}{}:
	case <-ctx.Done():
		return downstream.StatusReport{}, status.FromContextError(ctx.Err()).Err()
	case <-s.closing:
		return downstream.StatusReport{}, status.Error(codes.Unavailable, ErrClosed.Error())
	}
	defer func() { <-s.slots }()
	return s.src.ConfigStatus(q), nil
}

// note is the truncation note of a response that lists listed of matched
// clients and left cut resource entries out; "" when nothing was cut.
func (s *Server) note(listed, matched, cut int) string {
	if matched <= listed && cut == 0 {
		return ""
	}
	s.m.truncated.Inc()
	s.lg.Debug("client status response cut at its bounds", zap.Int("matched", matched), zap.Int("listed", listed),
		zap.Int("resources_cut", cut))
	return fmt.Sprintf("%d of %d clients; %d resource entries left out (at most %d clients, %d resource entries and about %d bytes per response)",
		listed, matched, cut, s.maxClients, s.maxResources, s.maxBytes)
}

// Serve serves l, the csds_listen listener the relay bound, until Close.
// After Close (or a second Serve) it closes l and returns ErrClosed (or
// ErrStarted).
func (s *Server) Serve(l net.Listener) error {
	s.mu.Lock()
	if s.state != stateNew {
		st := s.state
		s.mu.Unlock()
		_ = l.Close()
		if st == stateClosed {
			return ErrClosed
		}
		return ErrStarted
	}
	s.state, s.lis = stateStarted, l
	s.wg.Add(1)
	s.mu.Unlock()
	go func() {
		defer s.wg.Done()
		if err := s.gs.Serve(l); err != nil && s.onFail != nil {
			select {
			case <-s.closing:
			default:
				s.onFail(fmt.Errorf("csds_listen %s: serve: %w", l.Addr(), err))
			}
		}
	}()
	s.lg.Info("client status discovery serving", zap.String("csds_listen", l.Addr().String()))
	return nil
}

// Addr is the address Serve serves ("" before Serve, or when there is
// no listener).
func (s *Server) Addr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lis == nil {
		return ""
	}
	return s.lis.Addr().String()
}

// Close ends open streams (Unavailable) and waiting calls, stops the
// listener (calls in flight get until ctx ends) and waits for every
// goroutine the Server started. It may be called more than once.
func (s *Server) Close(ctx context.Context) {
	s.closeOnce.Do(func() { close(s.closing) })
	s.mu.Lock()
	s.state = stateClosed
	s.mu.Unlock()
	stopped := make(chan struct{})
	go func() {
		s.gs.GracefulStop()
		close(stopped)
	}()
	select {
	case <-stopped:
	case <-ctx.Done():
		s.gs.Stop()
		<-stopped
	}
	s.wg.Wait()
}

// admit refuses a caller that csds_allow does not list: CSDS names every
// client's resources, of every authority, so only the callers the
// operator named may read it. It returns who calls (callerOf).
func (s *Server) admit(ctx context.Context) (string, error) {
	var id access.Identity
	var addr net.Addr
	if p, ok := peer.FromContext(ctx); ok {
		addr = p.Addr
		if info, ok := p.AuthInfo.(credentials.TLSInfo); ok {
			id = access.FromTLS(&info.State)
		}
	}
	if s.allow == nil || s.allow.Allows(&id) {
		return callerOf(id, addr), nil
	}
	s.m.denied.Inc()
	return "", status.Error(codes.PermissionDenied, "csds: the caller's certificate is not in csds_allow")
}
