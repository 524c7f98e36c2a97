package downstream

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
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
	// LookupRollout is Lookup with where the key's newest revision stands
	// in its rollout (rollout.go); LookupMembers tells it of the members.
	LookupRollout(k cache.Key) (*cache.Resource, cache.State, *statuspb.Status, cache.Rollout)
	LookupMembers(k cache.Key) cache.CollectionLookup
}

// NackReporter is told of each client NACK of a response that carried new
// revisions (rollout.go): package delivery's NACK breaker.
type NackReporter interface {
	Nacked(n cache.Nack)
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
	// Whether such a client is parked or disconnected is SlowClients.
	SendTimeout time.Duration
	// SlowClients: what happens to a client whose Send waited SendTimeout
	// (park.go; config downstream.slow_clients). Default ParkSlowClients.
	SlowClients SlowClients
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
	// Links bounds the upstream links requests open (groups.go);
	// internal/upstream's Manager. nil: links are not bounded.
	Links Links
	// Breaker is told of client NACKs (rollout.go); nil: nobody.
	Breaker NackReporter
	// MaxSendMsgSize bounds one response to a client, in bytes: the
	// grpc.Server's own send limit (config downstream.max_send_msg_size,
	// which holds the default). A response that would be larger is sent as
	// several, or not at all where the protocol forbids a split
	// (sendlimit.go). 0: gRPC's default, math.MaxInt32.
	MaxSendMsgSize int
}

// Server serves xDS clients: it implements the ADS and every per-type
// discovery service (register it with Register) and REST-JSON polling
// (RESTHandler). One Server serves any number of streams.
type Server struct {
	cache       Cache                    // read-only after New
	fetchWait   time.Duration            // read-only after New
	originState func(cache.LinkID) error // Options.OriginState; read-only after New
	links       Links                    // Options.Links (groups.go); read-only after New
	breaker     NackReporter             // Options.Breaker (rollout.go); read-only after New
	// resolverNow, limitsNow and sendTimeoutNs change at run time (a
	// config reload, reload.go); each read takes the current value.
	resolverNow   atomic.Pointer[resolverBox]
	limitsNow     atomic.Pointer[Limits]
	sendTimeoutNs atomic.Int64
	// disconnectSlow: Options.SlowClients is DisconnectSlowClients
	// (SetSlowClients changes it at run time).
	disconnectSlow atomic.Bool
	lg             *zap.Logger         // read-only after New
	m              *metrics            // read-only after New
	nextID         atomic.Uint64       // session ids
	wg             sync.WaitGroup      // session goroutines that may outlive their handler
	mu             sync.Mutex          // guards sessions and byNode
	sessions       map[uint64]*session // guarded by mu; open streams, for /debug/clients
	// byNode: the open streams by node id, once their node is known
	// (several streams of one node chained through session.sameNode), so
	// that one node's streams are found without a walk of every stream
	// (ClientProgress). guarded by mu
	byNode   map[string]*session
	slowHook func() // tests only; set before serving
	parkHook func() // tests only; set before serving: a session parked
	// sendHook runs in the writer before each response's last check
	// (sendAll). Tests only; set before serving.
	sendHook func(typeURL string)
	// gatherWindow: Options.GatherWindow; afterFunc arms its timers
	// (time.AfterFunc; tests replace it before serving). read-only after New
	gatherWindow time.Duration
	afterFunc    func(d time.Duration, f func()) (stop func() bool)
	// sharedEncoding: Options.SharedEncoding. read-only after New
	sharedEncoding bool
	// maxSend: Options.MaxSendMsgSize (sendlimit.go). read-only after New
	maxSend int
	// fullStateLogged: per full-state type URL, a response of the type
	// went over maxSend and was logged, until one fits again
	// (sendlimit.go). The map is read-only after New; the flags atomic.
	fullStateLogged map[string]*atomic.Bool
	openStreams     atomic.Int64 // client streams admitted (admitStream)
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

// check reports what in o a Server cannot run with.
func (o *Options) check() error {
	if o.SendTimeout <= 0 || o.FetchWait < 0 || o.GatherWindow < 0 || o.MaxSendMsgSize < 0 {
		return fmt.Errorf("downstream: send timeout %v must be positive (the config's downstream.send_timeout), fetch wait %v, gather window %v and max send size %d not negative",
			o.SendTimeout, o.FetchWait, o.GatherWindow, o.MaxSendMsgSize)
	}
	if err := o.Limits.validate(); err != nil {
		return err
	}
	return o.SlowClients.check()
}

// New returns a Server.
func New(opts Options) (*Server, error) {
	if opts.Cache == nil {
		return nil, errors.New("downstream: Options.Cache is nil")
	}
	if opts.Resolver == nil {
		return nil, errors.New("downstream: Options.Resolver is nil")
	}
	if err := opts.check(); err != nil {
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
		links:       opts.Links,
		breaker:     opts.Breaker,
		lg:          opts.Logger.Named("downstream"),
		m:           newMetrics(opts.Registry),
		sessions:    make(map[uint64]*session),
		byNode:      make(map[string]*session),
		wrappers:    newWrapperCache(),
		names:       newNameTable(),
		counts:      newClientCounts(),

		gatherWindow: opts.GatherWindow,
		afterFunc:    timeAfterFunc,

		sharedEncoding:  opts.SharedEncoding,
		maxSend:         opts.MaxSendMsgSize,
		fullStateLogged: make(map[string]*atomic.Bool, len(fullStateTypes)),
	}
	for t := range fullStateTypes {
		s.fullStateLogged[t] = new(atomic.Bool)
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
	_ = s.SetSlowClients(opts.SlowClients) // checked above
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
	s.unindexNodeLocked(ss)
	s.mu.Unlock()
}

// indexNode lists open stream ss under its node id (byNode), once its
// first request carried a node. A unary Fetch or REST poll's session is
// no open stream and is not listed.
func (s *Server) indexNode(ss *session, id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, open := s.sessions[ss.id]; !open || ss.indexed != "" || id == "" {
		return
	}
	ss.indexed = id
	ss.sameNode = s.byNode[id]
	s.byNode[id] = ss
}

// unindexNodeLocked takes ss out of byNode.
func (s *Server) unindexNodeLocked(ss *session) {
	if ss.indexed == "" {
		return
	}
	id := ss.indexed
	switch head := s.byNode[id]; {
	case head == ss && ss.sameNode == nil:
		delete(s.byNode, id)
	case head == ss:
		s.byNode[id] = ss.sameNode
	default:
		for p := head; p != nil; p = p.sameNode {
			if p.sameNode == ss {
				p.sameNode = ss.sameNode
				break
			}
		}
	}
	ss.indexed, ss.sameNode = "", nil
}

// nodeSessions returns the open streams of node id, oldest first.
func (s *Server) nodeSessions(id string) []*session {
	s.mu.Lock()
	var out []*session
	for ss := s.byNode[id]; ss != nil; ss = ss.sameNode {
		out = append(out, ss)
	}
	s.mu.Unlock()
	slices.SortFunc(out, func(a, b *session) int { return cmp.Compare(a.id, b.id) })
	return out
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
