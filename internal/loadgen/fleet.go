package loadgen

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// maxRecvMsgSize bounds one response a client accepts (a SotW answer carries
// every resource it subscribed to).
const maxRecvMsgSize = 256 << 20

// Fleet is a set of simulated clients. Create it with New, drive it with
// Run; Status, Summary and Reconnect are safe to call concurrently with Run.
type Fleet struct {
	cfg     Config    // read-only after New
	clients []*client // read-only after New
	// reconnect is poked by Reconnect and drained by Run (one slot: many
	// pokes while a storm starts make one storm).
	reconnect chan struct{}

	streamsOpen   atomic.Int64 // streams open now
	streamsOpened atomic.Int64 // streams opened since Run started
	responses     atomic.Int64
	bytes         atomic.Int64 // serialized size of the responses received
	acks          atomic.Int64
	nacks         atomic.Int64
	received      atomic.Int64 // resources received
	stamped       atomic.Int64 // fan-out samples (stamped updates received)
	streamErrors  atomic.Int64
	synced        atomic.Int64 // clients synced in the current generation
	// stall: the latest Stall, nil before one (stall.go).
	stall atomic.Pointer[stall]
	// churn is the churning client while one runs (churn.go).
	churn churnSlot

	mu             sync.Mutex
	started        time.Time                   // guarded by mu: when Run started
	initialSync    time.Duration               // guarded by mu: 0 until every client first synced
	stormStart     time.Time                   // guarded by mu: zero unless a storm is under way
	storms         []Storm                     // guarded by mu
	versions       map[versionKey]*versionSeen // guarded by mu
	clientVersions clientVersions              // guarded by mu
	generation     int                         // guarded by mu: 0 at first, +1 per storm
	// syncedCh keeps, per generation, a channel closed once every client of
	// that generation has synced. Guarded by mu.
	syncedCh  map[int]chan struct{}
	lastError string // guarded by mu
}

type versionKey struct{ name, version string }

// versionSeen is what the fleet saw of one resource version.
type versionSeen struct {
	// firstUpdate and lastUpdate bound the receipts by synced clients
	// (updates, not initial state); updates counts them.
	firstUpdate, lastUpdate time.Time
	updates                 int
}

// New validates cfg and returns a fleet ready to Run.
func New(cfg Config) (*Fleet, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	if cfg.NodeIDPrefix == "" {
		cfg.NodeIDPrefix = fmt.Sprintf("loadgen-%06x", rand.Uint32()>>8)
	}
	f := &Fleet{
		cfg:       cfg,
		reconnect: make(chan struct{}, 1),
		versions:  make(map[versionKey]*versionSeen),
		syncedCh:  make(map[int]chan struct{}),
	}
	f.clients = make([]*client, cfg.Clients)
	for i := range f.clients {
		f.clients[i] = newClient(f, i)
	}
	return f, nil
}

// Run connects every client and keeps them connected until ctx ends; then
// it closes every stream and connection and returns. Call it once.
func (f *Fleet) Run(ctx context.Context) error {
	defer f.StopChurn()
	f.mu.Lock()
	f.started = time.Now()
	f.mu.Unlock()
	for {
		g, err := f.startGeneration(ctx)
		if err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			g.stop()
			return nil
		case <-f.reconnect:
			g.stop()
			f.beginStorm(time.Now())
		}
	}
}

// Reconnect makes every client drop its stream and connection and
// reconnect at once (a reconnect storm). Status reports when all have
// synced again.
func (f *Fleet) Reconnect() {
	select {
	case f.reconnect <- struct{}{}:
	default:
	}
}

// generation is one set of connections and the clients running on them.
type generation struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
	conns  []*grpc.ClientConn
}

func (f *Fleet) startGeneration(ctx context.Context) (*generation, error) {
	gctx, cancel := context.WithCancel(ctx)
	g := &generation{cancel: cancel}
	if err := g.dial(f.cfg.Target, f.cfg.Conns); err != nil {
		g.stop()
		return nil, err
	}
	// The stalling clients' own connections (stall.go), after the others.
	stalling := 0
	for i := range f.clients {
		if f.cfg.stalls(i) {
			stalling++
		}
	}
	if err := g.dial(f.cfg.Target, (stalling+stallsPerConn-1)/stallsPerConn, stallConnOptions()...); err != nil {
		g.stop()
		return nil, err
	}
	stalled := 0
	for i, c := range f.clients {
		conn := g.conns[i%f.cfg.Conns]
		if f.cfg.stalls(i) {
			conn = g.conns[f.cfg.Conns+stalled/stallsPerConn]
			stalled++
		}
		g.wg.Add(1)
		go func() {
			defer g.wg.Done()
			c.run(gctx, conn)
		}()
	}
	return g, nil
}

// dial adds n connections to target, with opts, to g.
func (g *generation) dial(target string, n int, opts ...grpc.DialOption) error {
	for range n {
		conn, err := grpc.NewClient(target, append([]grpc.DialOption{
			grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxRecvMsgSize))}, opts...)...)
		if err != nil {
			return fmt.Errorf("loadgen: connection %d to %s: %w", len(g.conns), target, err)
		}
		g.conns = append(g.conns, conn)
	}
	return nil
}

// stop cancels every client of the generation, waits for them and closes
// the connections.
func (g *generation) stop() {
	g.cancel()
	g.wg.Wait()
	for _, c := range g.conns {
		_ = c.Close() // closing a connection we own; nothing to report
	}
}

func (f *Fleet) beginStorm(now time.Time) {
	f.synced.Store(0)
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.stormStart.IsZero() {
		f.storms = append(f.storms, Storm{Completed: false, Duration: now.Sub(f.stormStart)})
	}
	f.stormStart = now
	f.generation++
}

// Synced returns a channel closed once every client has synced in
// generation gen: 0 is the initial connection, n the n-th reconnect storm.
func (f *Fleet) Synced(gen int) <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.syncedChLocked(gen)
}

func (f *Fleet) syncedChLocked(gen int) chan struct{} {
	ch, ok := f.syncedCh[gen]
	if !ok {
		ch = make(chan struct{})
		f.syncedCh[gen] = ch
	}
	return ch
}

func (f *Fleet) streamOpened() {
	f.streamsOpen.Add(1)
	f.streamsOpened.Add(1)
}

func (f *Fleet) streamClosed() { f.streamsOpen.Add(-1) }

// responseReceived counts one response of size serialized bytes.
func (f *Fleet) responseReceived(size int) {
	f.responses.Add(1)
	f.bytes.Add(int64(size))
}

func (f *Fleet) streamError(id int, err error) {
	f.streamErrors.Add(1)
	f.mu.Lock()
	f.lastError = err.Error()
	f.mu.Unlock()
	f.cfg.Logger.Debug("stream failed", zap.Int("client", id), zap.Error(err))
}

// clientSynced counts one client synced; the last one of a generation ends
// the initial sync or the storm under way.
func (f *Fleet) clientSynced(now time.Time) {
	if f.synced.Add(1) != int64(len(f.clients)) {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case !f.stormStart.IsZero():
		f.storms = append(f.storms, Storm{Completed: true, Duration: now.Sub(f.stormStart)})
		f.stormStart = time.Time{}
	case f.initialSync == 0:
		f.initialSync = now.Sub(f.started)
	}
	close(f.syncedChLocked(f.generation))
}

func (f *Fleet) noteVersion(name, version string, now time.Time, update bool) {
	k := versionKey{name, version}
	f.mu.Lock()
	defer f.mu.Unlock()
	v := f.versions[k]
	if v == nil {
		v = &versionSeen{}
		f.versions[k] = v
	}
	if !update {
		return
	}
	if v.updates == 0 {
		v.firstUpdate = now
	}
	v.lastUpdate = now
	v.updates++
}
