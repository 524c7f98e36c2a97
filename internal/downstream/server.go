package downstream

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	statuspb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/xds-relay/xds-relay/internal/access"
	"github.com/xds-relay/xds-relay/internal/cache"
)

// Cache is what sessions need of internal/cache; *cache.Cache implements it.
type Cache interface {
	Watch(w cache.Watcher, node *corev3.Node, keys ...cache.Key)
	Unwatch(w cache.Watcher, keys ...cache.Key)
	Get(k cache.Key) (*cache.Resource, cache.State)
	// Withheld: r, a do_not_cache revision Get returned for k, is not to
	// be sent to w now (donotcache.go).
	Withheld(w cache.Watcher, k cache.Key, r *cache.Resource) bool
	Members(k cache.Key) ([]*cache.Resource, cache.State)
	Lookup(k cache.Key) (*cache.Resource, cache.State, *statuspb.Status)
	LookupMembers(k cache.Key) cache.CollectionLookup
}

// DefaultFetchWait is used when Options.FetchWait is zero.
const DefaultFetchWait = 5 * time.Second

// Options configure a Server.
type Options struct {
	// Cache serves every resource. Required.
	Cache Cache
	// Resolver maps requested names to cache keys. Required.
	Resolver Resolver
	// SendTimeout bounds one Send to a client; a client that does not drain
	// its stream within it is disconnected with ResourceExhausted.
	// Required: the config (downstream.send_timeout) holds its default.
	SendTimeout time.Duration
	// FetchWait bounds how long a unary Fetch or REST poll waits for
	// resources the relay has not received yet (config
	// downstream.fetch_wait). Default DefaultFetchWait.
	FetchWait time.Duration
	// OriginState says why no origin answers for a cache stream (nil: one
	// does, or nothing is known yet); a Fetch or REST poll that found
	// nothing by FetchWait fails with it (Unavailable, HTTP 503) rather
	// than answering an empty list. nil: never.
	OriginState func(cache.LinkID) error
	Logger      *zap.Logger
	Registry    prometheus.Registerer
	// Limits bound what clients can make the Server hold. Required.
	Limits Limits
	// SharedEncoding: the grpc.Server the Server is registered on was
	// built with grpc.ForceServerCodecV2(Codec()), so responses may carry
	// one encoding of an origin change shared by every client (the fan-out
	// fast path, shared.go). Off: every response is encoded per client.
	SharedEncoding bool
	// Access decides who may subscribe to what (access.go); nil: every
	// client may subscribe to everything. SetAccess replaces it.
	Access *access.Policy
	// ControlPlaneID is set as control_plane.identifier on every response
	// (config control_plane_id). Default "": none.
	ControlPlaneID string
	// Authorities are the configured authorities' names: their metric
	// series exist from start, at zero. SetAuthorities replaces them.
	Authorities []string
	// GatherWindow bounds how long a type's response waits for the names
	// a request subscribed that the relay has not received yet, so they go
	// out in one response (gather.go; config downstream.gather_window,
	// which holds the default). 0: no wait, each response carries what is
	// known when it is built.
	GatherWindow time.Duration
}

// Server serves xDS clients: it implements the ADS and every per-type
// discovery service (register it with Register) and REST-JSON polling
// (RESTHandler). One Server serves any number of streams.
type Server struct {
	cache       Cache                    // read-only after New
	fetchWait   time.Duration            // read-only after New
	originState func(cache.LinkID) error // Options.OriginState; read-only after New
	// resolverNow, limitsNow and sendTimeoutNs change at run time (a
	// config reload, reload.go); each read takes the current value.
	resolverNow   atomic.Pointer[resolverBox]
	limitsNow     atomic.Pointer[Limits]
	sendTimeoutNs atomic.Int64
	lg            *zap.Logger         // read-only after New
	m             *metrics            // read-only after New
	nextID        atomic.Uint64       // session ids
	wg            sync.WaitGroup      // session goroutines that may outlive their handler
	mu            sync.Mutex          // guards sessions
	sessions      map[uint64]*session // guarded by mu; open streams, for /debug/clients
	slowHook      func()              // tests only; set before serving
	// sendHook runs in the writer before each response's last check
	// (sendAll). Tests only; set before serving.
	sendHook func(typeURL string)
	// gatherWindow: Options.GatherWindow; afterFunc arms its timers
	// (time.AfterFunc; tests replace it before serving). read-only after New
	gatherWindow time.Duration
	afterFunc    func(d time.Duration, f func()) (stop func() bool)
	// sharedEncoding: Options.SharedEncoding. read-only after New
	sharedEncoding bool
	openStreams    atomic.Int64 // client streams admitted (admitStream)
	// wrappers shares SotW TTL wrappers across clients; safe for
	// concurrent use.
	wrappers *lru.Cache[wrapperKey, *anypb.Any]
	// names shares requested name strings, and xdstp names'
	// resolutions, across sessions (nametable.go); safe for concurrent
	// use.
	names *nameTable
	// access is the policy in use (access.go); replaced by SetAccess,
	// which then closes accessChanged's channel and puts a new one: long
	// polls wait on it.
	access        atomic.Pointer[access.Policy]
	accessChanged atomic.Pointer[chan struct{}]
	// counts are the open streams by variant and type (counts.go); nacks
	// the latest client NACKs (nacks.go). Both safe for concurrent use.
	counts *clientCounts
	nacks  nackRing
	// controlPlane is every response's control_plane (nil: none): one
	// message for every client, only ever read (marshalled), never
	// changed. read-only after New
	controlPlane *corev3.ControlPlane
	// controlPlaneDelta and controlPlaneSotW are controlPlane encoded as
	// the field of each variant's response (nil: none), for the responses
	// sent as bytes (shared.go). read-only after New
	controlPlaneDelta, controlPlaneSotW []byte
	// authorities: the names whose metric series exist (SetAuthorities).
	authorities []string // guarded by authMu
	authMu      sync.Mutex
}

// New returns a Server.
func New(opts Options) (*Server, error) {
	if opts.Cache == nil {
		return nil, errors.New("downstream: Options.Cache is nil")
	}
	if opts.Resolver == nil {
		return nil, errors.New("downstream: Options.Resolver is nil")
	}
	if opts.SendTimeout <= 0 || opts.FetchWait < 0 || opts.GatherWindow < 0 {
		return nil, fmt.Errorf("downstream: send timeout %v must be positive (the config's downstream.send_timeout), fetch wait %v and gather window %v not negative",
			opts.SendTimeout, opts.FetchWait, opts.GatherWindow)
	}
	if err := opts.Limits.validate(); err != nil {
		return nil, err
	}
	if opts.FetchWait == 0 {
		opts.FetchWait = DefaultFetchWait
	}
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	s := &Server{
		cache:       opts.Cache,
		fetchWait:   opts.FetchWait,
		originState: opts.OriginState,
		lg:          opts.Logger.Named("downstream"),
		m:           newMetrics(opts.Registry),
		sessions:    make(map[uint64]*session),
		wrappers:    newWrapperCache(),
		names:       newNameTable(),
		counts:      newClientCounts(),

		gatherWindow: opts.GatherWindow,
		afterFunc:    timeAfterFunc,

		sharedEncoding: opts.SharedEncoding,
	}
	if opts.ControlPlaneID != "" {
		s.controlPlane = &corev3.ControlPlane{Identifier: opts.ControlPlaneID}
		s.controlPlaneDelta = appendMessage(nil, deltaControlPlaneField, s.controlPlane)
		s.controlPlaneSotW = appendMessage(nil, sotwControlPlaneField, s.controlPlane)
	}
	s.resolverNow.Store(&resolverBox{opts.Resolver})
	lim := opts.Limits
	s.limitsNow.Store(&lim)
	s.sendTimeoutNs.Store(int64(opts.SendTimeout))
	s.access.Store(opts.Access)
	s.accessChanged.Store(newAccessChanged())
	s.SetAuthorities(opts.Authorities)
	return s, nil
}

// Wait blocks until every goroutine started for a stream has ended. Call it
// after the grpc.Server has stopped (which ends every stream); the server
// must be built with grpc.WaitForHandlers(true), so that no handler is
// still starting goroutines.
func (s *Server) Wait() { s.wg.Wait() }

func (s *Server) addSession(ss *session) {
	s.mu.Lock()
	s.sessions[ss.id] = ss
	s.mu.Unlock()
}

func (s *Server) removeSession(ss *session) {
	s.mu.Lock()
	delete(s.sessions, ss.id)
	s.mu.Unlock()
}

func (s *Server) snapshotSessions() []*session {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*session, 0, len(s.sessions))
	for _, ss := range s.sessions {
		out = append(out, ss)
	}
	return out
}
