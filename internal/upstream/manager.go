package upstream

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	grpcbackoff "google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/xds-relay/xds-relay/internal/cache"
	"github.com/xds-relay/xds-relay/internal/xdstype"
)

// Manager is the upstream side of the relay: it implements cache.Subscriber,
// keeps one link per cache.LinkID (authority + aggregation group) toward
// the authority's origins, and feeds what they send into the cache.
//
// Lifecycle: New starts the idle sweeper and one check of every origin
// (origincheck.go), and nothing else. A link's run goroutine starts with the
// first Subscribe for its LinkID, and a file source's watcher with the
// first link of its authority; both run until Close, which cancels every
// goroutine and waits for them.
type Manager struct {
	lg       *zap.Logger       // read-only after New
	metrics  *metrics          // read-only after New
	cache    *cache.Cache      // read-only after New
	node     *corev3.Node      // read-only after New
	backoff  Backoff           // read-only after New
	dialOpts []grpc.DialOption // read-only after New
	conns    *conns            // one connection per origin (conns.go); read-only after New
	checks   *originChecks     // origincheck.go; read-only after New
	connect  time.Duration     // connect timeout; read-only after New
	failback time.Duration     // probe interval; read-only after New
	// maxRequest bounds one delta subscription request (splitDelta);
	// read-only after New.
	maxRequest int
	// idle: a link no client watches for this long is closed (idle.go);
	// read-only after New.
	idle time.Duration
	// responseTimeout bounds the wait for an origin's first response on an
	// attempt (attempt.go); read-only after New.
	responseTimeout time.Duration
	ctx             context.Context        // read-only after New; cancelled by Close
	cancel          context.CancelFunc     // read-only after New
	wg              sync.WaitGroup         // counts every goroutine the Manager owns
	mu              sync.Mutex             //
	links           map[cache.LinkID]*link // guarded by mu
	// reserved: links ReserveLink kept a place for that no Subscribe has
	// opened yet, with the idle sweeps they have seen (links.go).
	// guarded by mu
	reserved map[cache.LinkID]int
	closed   bool // guarded by mu
	// auths by name; replaced by SetAuthorities (reload.go). guarded by mu
	auths map[string]*authority
	// files: file sources by origin; SetAuthorities adds. guarded by mu
	files map[string]*fileSource
	// reloading serialises SetAuthorities calls.
	reloading sync.Mutex
}

// authority is an Authority with defaults applied.
type authority struct {
	name     string
	origins  []string
	sotw     bool
	perType  bool // one stream per type on the per-type services
	emulated bool // globs are emulated over the type's wildcard
	// creds: the authority's transport credentials; nil: the Manager's
	// dial options decide. Part of the connection's key (conns.go).
	creds credentials.TransportCredentials
	// callOpts carry the authority's per-RPC credentials (perRPC) on
	// each stream.
	callOpts []grpc.CallOption
	perRPC   credentials.PerRPCCredentials
}

var _ cache.Subscriber = (*Manager)(nil)

// New validates opts (every problem at once, each wrapping ErrBadOptions
// or ErrNoCache), starts the file sources and returns a Manager.
func New(opts Options) (*Manager, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	lg := opts.Logger
	if lg == nil {
		lg = zap.NewNop()
	}
	b := opts.Backoff
	dial := []grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           grpcbackoff.Config{BaseDelay: b.Initial, Multiplier: b.Multiplier, Jitter: b.Jitter, MaxDelay: b.Max},
			MinConnectTimeout: opts.ConnectTimeout,
		}),
	}
	ctx, cancel := context.WithCancel(context.Background())
	mgr := &Manager{
		lg:       lg.Named("upstream"),
		metrics:  newMetrics(opts.Registry),
		cache:    opts.Cache,
		node:     withClientFeatures(opts.Node),
		backoff:  b,
		dialOpts: append(dial, opts.DialOptions...),
		connect:  opts.ConnectTimeout,
		failback: opts.FailbackInterval,

		maxRequest: opts.MaxRequestSize,
		idle:       opts.IdleTimeout,

		responseTimeout: opts.ResponseTimeout,
		auths:           make(map[string]*authority),
		files:           make(map[string]*fileSource),
		ctx:             ctx,
		cancel:          cancel,
		links:           make(map[cache.LinkID]*link),
		reserved:        make(map[cache.LinkID]int),
	}
	mgr.conns = newConns(mgr.dialOpts)
	mgr.checks = &originChecks{by: make(map[string][]OriginCheck)}
	for i, a := range opts.Authorities {
		if len(a.Origins) == 0 {
			cancel()
			return nil, fmt.Errorf("upstream: authorities[%d] %q: %w", i, a.Name, ErrNoOrigins)
		}
		mgr.auths[a.Name] = newAuthority(a)
		mgr.addFileSourcesLocked(a) // nothing runs yet: no lock needed
	}
	mgr.metrics.setAuthorities(nil, authorityNames(opts.Authorities))
	mgr.wg.Add(1)
	go func() {
		defer mgr.wg.Done()
		mgr.sweepIdle(mgr.ctx)
	}()
	mgr.checkOrigins(sortedAuthorities(mgr.auths))
	return mgr, nil
}

// Close stops every link and file source and waits for them. Cached
// resources stay in the cache.
func (m *Manager) Close() {
	m.mu.Lock()
	m.closed = true
	m.mu.Unlock()
	m.cancel()
	m.wg.Wait()
}

// Subscribe adds names to the link's desired set and wakes the link; it
// never blocks on the network.
func (m *Manager) Subscribe(s cache.LinkID, node *corev3.Node, typeURL string, names []string) {
	l := m.link(s)
	if l == nil {
		return
	}
	l.update(node, typeURL, names, true)
}

// Unsubscribe removes names from the link's desired set and wakes it.
func (m *Manager) Unsubscribe(s cache.LinkID, typeURL string, names []string) {
	m.mu.Lock()
	l := m.links[s]
	m.mu.Unlock()
	if l == nil {
		return
	}
	l.update(nil, typeURL, names, false)
}

// link returns the link of s, starting it on first use; nil when the
// authority is unknown or the Manager is closed.
func (m *Manager) link(s cache.LinkID) *link {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil
	}
	a := m.auths[s.Authority]
	if a == nil {
		m.mu.Unlock()
		m.lg.Warn("subscription for an unknown authority; ignored", zap.String("authority", s.Authority))
		return nil
	}
	defer m.mu.Unlock()
	l := m.links[s]
	if l == nil {
		l = newLink(m, s, a)
		m.links[s] = l
		delete(m.reserved, s) // its place is the link's now (links.go)
		m.startLocked(l)
	}
	return l
}

// startLocked starts l's run goroutine on l.auth, and the file sources
// among its origins that do not run yet.
func (m *Manager) startLocked(l *link) {
	for _, o := range l.auth.origins {
		if fs := m.files[o]; fs != nil && !fs.started {
			fs.started = true
			m.wg.Add(1)
			go func() {
				defer m.wg.Done()
				fs.run(m.ctx)
			}()
		}
	}
	lctx, cancel := context.WithCancel(m.ctx)
	l.cancel, l.done = cancel, make(chan struct{})
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		defer close(l.done)
		l.run(lctx)
	}()
}

// newAuthority applies a's defaults.
func newAuthority(a Authority) *authority {
	sotw := a.Transport == xdstype.TransportSotW || a.Transport == xdstype.TransportSotWPerType
	auth := &authority{
		name:     a.Name,
		origins:  append([]string(nil), a.Origins...),
		sotw:     sotw,
		perType:  a.Transport == xdstype.TransportDeltaPerType || a.Transport == xdstype.TransportSotWPerType,
		emulated: a.GlobCollections == GlobEmulated || (sotw && a.GlobCollections == ""),
		creds:    a.Credentials,
	}
	if a.PerRPC != nil {
		auth.callOpts = []grpc.CallOption{grpc.PerRPCCredentials(a.PerRPC)}
		auth.perRPC = a.PerRPC
	}
	return auth
}

// addFileSourcesLocked adds a file source for each file:// origin of a
// that has none yet (started with the first link that uses it).
func (m *Manager) addFileSourcesLocked(a Authority) {
	for _, o := range a.Origins {
		if dir, ok := strings.CutPrefix(o, FileOriginPrefix); ok {
			if _, dup := m.files[o]; !dup {
				m.files[o] = newFileSource(a.Name, dir, m.lg, m.metrics)
			}
		}
	}
}

// fileSource returns the file source of origin, nil if none.
func (m *Manager) fileSource(origin string) *fileSource {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.files[origin]
}
