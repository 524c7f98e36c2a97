package loadgen

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"go.uber.org/zap"
	"google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
)

// Backoff bounds between two attempts of one client to open its stream.
const (
	minBackoff = 100 * time.Millisecond
	maxBackoff = 2 * time.Second
)

// client is one simulated xDS client: one ADS stream at a time.
type client struct {
	f    *Fleet       // read-only after New
	id   int          // read-only after New
	node *corev3.Node // read-only after New
	// names is what the client subscribes to (its window, the names or
	// the glob). Read-only after New.
	names []string

	rng *rand.Rand // owned by the run goroutine
	// have maps each resource name to the version the client holds; reset
	// for every generation. Owned by the run goroutine.
	have map[string]string
	// synced is set once the client holds all it subscribed to in this
	// generation. Owned by the run goroutine.
	synced bool
	// lastStamp maps a resource name to the newest push stamp already
	// counted, so a resent resource is not a second sample. Owned by the
	// run goroutine; kept across generations.
	lastStamp map[string]int64

	mu sync.Mutex
	// latencies are the stamp-based fan-out samples. Guarded by mu.
	latencies []time.Duration

	// counts is what the client received since Run started, for a harness
	// that tells affected from unaffected clients per update.
	counts clientCounts
}

// clientCounts are one client's totals, written by its run goroutine and
// read by anyone.
type clientCounts struct {
	responses atomic.Int64
	resources atomic.Int64
	bytes     atomic.Int64 // serialized size of the responses (proto.Size)
	updated   atomic.Int64 // fan-out samples: resources with a push stamp new to the client, received while synced
	streams   atomic.Int64 // streams opened: more than one after the first means it was cut off or failed
	newest    atomic.Int64 // the newest push stamp received (Unix ns), 0 before one
}

// response counts one response of size bytes holding resources resources.
func (c *client) response(size, resources int) {
	c.f.responseReceived(size)
	c.counts.responses.Add(1)
	c.counts.resources.Add(int64(resources))
	c.counts.bytes.Add(int64(size))
}

func newClient(f *Fleet, id int) *client {
	return &client{
		f:  f,
		id: id,
		node: &corev3.Node{
			Id:            fmt.Sprintf("loadgen-%d", id),
			Cluster:       f.cfg.nodeCluster(id),
			UserAgentName: "xds-relay-loadgen",
		},
		names:     f.cfg.ClientSubscription(id),
		rng:       rand.New(rand.NewPCG(uint64(id), 0x10adbe9)),
		lastStamp: make(map[string]int64),
	}
}

// run keeps one stream open on conn until ctx ends, reopening it with
// backoff when it fails.
func (c *client) run(ctx context.Context, conn *grpc.ClientConn) {
	c.have = make(map[string]string)
	c.synced = false
	backoff := minBackoff
	for {
		var err error
		if c.f.cfg.Variant == SotW {
			err = c.sotw(ctx, conn)
		} else {
			err = c.delta(ctx, conn)
		}
		if ctx.Err() != nil {
			return
		}
		c.f.streamError(c.id, err)
		t := time.NewTimer(backoff/2 + time.Duration(c.rng.Int64N(int64(backoff))))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		backoff = min(2*backoff, maxBackoff)
	}
}

// nack decides whether to NACK the next response.
func (c *client) nack() bool {
	return c.f.cfg.NackFraction > 0 && c.rng.Float64() < c.f.cfg.NackFraction
}

var nackStatus = &status.Status{Code: int32(codes.InvalidArgument), Message: "loadgen: simulated NACK"}

func (c *client) sotw(ctx context.Context, conn *grpc.ClientConn) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	st, err := discoveryv3.NewAggregatedDiscoveryServiceClient(conn).StreamAggregatedResources(ctx)
	if err != nil {
		return fmt.Errorf("open SotW ADS stream: %w", err)
	}
	c.f.streamOpened()
	c.counts.streams.Add(1)
	defer c.f.streamClosed()
	names := c.names
	typeURL := c.f.cfg.TypeURL
	if err := st.Send(&discoveryv3.DiscoveryRequest{Node: c.node, TypeUrl: typeURL, ResourceNames: names}); err != nil {
		return fmt.Errorf("send subscription: %w", err)
	}
	accepted := ""
	for {
		if !c.waitStall(ctx) {
			return ctx.Err()
		}
		resp, err := st.Recv()
		if err != nil {
			return fmt.Errorf("receive: %w", err)
		}
		now := time.Now()
		c.response(proto.Size(resp), len(resp.GetResources()))
		for i, a := range resp.GetResources() {
			name, body, err := sotwResource(a)
			if err != nil {
				return fmt.Errorf("response %q resource %d: %w", resp.GetNonce(), i, err)
			}
			c.receive(name, resp.GetVersionInfo(), body, now)
		}
		c.checkSynced(len(resp.GetResources()) > 0)
		ack := &discoveryv3.DiscoveryRequest{TypeUrl: typeURL, ResourceNames: names, ResponseNonce: resp.GetNonce()}
		if c.nack() {
			ack.VersionInfo = accepted
			ack.ErrorDetail = nackStatus
			c.f.nacks.Add(1)
		} else {
			accepted = resp.GetVersionInfo()
			ack.VersionInfo = accepted
			c.f.acks.Add(1)
		}
		if err := st.Send(ack); err != nil {
			return fmt.Errorf("send ACK: %w", err)
		}
	}
}

func (c *client) delta(ctx context.Context, conn *grpc.ClientConn) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	st, err := discoveryv3.NewAggregatedDiscoveryServiceClient(conn).DeltaAggregatedResources(ctx)
	if err != nil {
		return fmt.Errorf("open delta ADS stream: %w", err)
	}
	c.f.streamOpened()
	c.counts.streams.Add(1)
	defer c.f.streamClosed()
	typeURL := c.f.cfg.TypeURL
	if err := st.Send(&discoveryv3.DeltaDiscoveryRequest{Node: c.node, TypeUrl: typeURL, ResourceNamesSubscribe: c.names}); err != nil {
		return fmt.Errorf("send subscription: %w", err)
	}
	for {
		if !c.waitStall(ctx) {
			return ctx.Err()
		}
		resp, err := st.Recv()
		if err != nil {
			return fmt.Errorf("receive: %w", err)
		}
		now := time.Now()
		c.response(proto.Size(resp), len(resp.GetResources()))
		for _, r := range resp.GetResources() {
			c.receive(r.GetName(), r.GetVersion(), r.GetResource().GetValue(), now)
		}
		for _, name := range resp.GetRemovedResources() {
			delete(c.have, name)
		}
		c.checkSynced(len(resp.GetResources()) > 0 || len(resp.GetRemovedResources()) > 0)
		ack := &discoveryv3.DeltaDiscoveryRequest{TypeUrl: typeURL, ResponseNonce: resp.GetNonce()}
		if c.nack() {
			ack.ErrorDetail = nackStatus
			c.f.nacks.Add(1)
		} else {
			c.f.acks.Add(1)
		}
		if err := st.Send(ack); err != nil {
			return fmt.Errorf("send ACK: %w", err)
		}
	}
}

// receive records one resource version arriving at now. NACKs are only
// protocol-level: what a client NACKs still counts as received.
func (c *client) receive(name, version string, body []byte, now time.Time) {
	c.have[name] = version
	c.f.received.Add(1)
	c.f.noteVersion(name, version, now, c.synced)
	ts, ok := ParseStamp(body)
	if !ok || c.lastStamp[name] >= ts.UnixNano() {
		return // no stamp, or a stamp already seen (a resend)
	}
	c.lastStamp[name] = ts.UnixNano()
	if ts.UnixNano() > c.counts.newest.Load() {
		c.counts.newest.Store(ts.UnixNano()) // written by this goroutine only
	}
	if !c.synced {
		return // (re)syncing: the client's initial state, not an update
	}
	c.mu.Lock()
	c.latencies = append(c.latencies, now.Sub(ts))
	c.mu.Unlock()
	c.counts.updated.Add(1)
	c.f.stamped.Add(1)
}

// checkSynced marks the client synced once it holds every name it
// subscribed to (for a glob: once a response said anything).
func (c *client) checkSynced(answered bool) {
	if c.synced {
		return
	}
	if c.f.cfg.Glob != "" {
		if !answered {
			return
		}
	} else {
		for _, n := range c.names {
			if _, ok := c.have[n]; !ok {
				return
			}
		}
	}
	// Stamps of what the client holds now are its initial state, not updates.
	c.synced = true
	c.f.clientSynced(time.Now())
	c.f.cfg.Logger.Debug("client synced", zap.Int("client", c.id))
}

// samples returns a copy of the client's latency samples.
func (c *client) samples() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Duration(nil), c.latencies...)
}
