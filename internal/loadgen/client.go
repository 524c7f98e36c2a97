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
	"google.golang.org/genproto/googleapis/rpc/code"
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

	rng *rand.Rand // owned by the run goroutine
	// synced is set once the client has all it subscribed to in this
	// generation. Owned by the run goroutine.
	synced bool
	// lastStamp maps a resource name to the newest push stamp already
	// counted, so a resent resource is not a second sample. Owned by the
	// run goroutine; kept across generations.
	lastStamp map[string]int64

	mu sync.Mutex
	// types is the client's state of each type it subscribes to, in the
	// order it first asks for them; new for every generation. Written by
	// the run goroutine under mu (which it reads without); guarded by mu.
	types []*typeState
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
	// changes counts versions received while synced that replaced one the
	// client had: updates, stamped or not.
	changes atomic.Int64
}

// response counts one response of size bytes carrying resources resources.
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
			Id:            fmt.Sprintf("%s-%d", f.cfg.NodeIDPrefix, id),
			Cluster:       f.cfg.nodeCluster(id),
			UserAgentName: "xds-relay-loadgen",
		},
		rng:       rand.New(rand.NewPCG(uint64(id), 0x10adbe9)),
		lastStamp: make(map[string]int64),
	}
}

// subscribe starts a generation: the client has nothing and asks for
// what its configuration says (an Envoy: the wildcard of CDS and LDS).
func (c *client) subscribe() {
	var types []*typeState
	if c.f.cfg.Envoy {
		types = envoyTypes()
	} else {
		names := c.f.cfg.ClientSubscription(c.id)
		types = []*typeState{newTypeState(c.f.cfg.TypeURL, names, wildcardType(c.f.cfg.TypeURL))}
	}
	c.mu.Lock()
	old := c.types
	c.types = types
	c.mu.Unlock()
	for _, ts := range old {
		for name, v := range ts.have {
			c.f.versionDropped(ts.typeURL, name, v)
		}
	}
	c.synced = false
}

// typeOf is the client's state of typeURL, nil when it asked for none.
func (c *client) typeOf(typeURL string) *typeState {
	for _, ts := range c.types {
		if ts.typeURL == typeURL {
			return ts
		}
	}
	return nil
}

// run keeps one stream open on conn until ctx ends, reopening it with
// backoff when it fails.
func (c *client) run(ctx context.Context, conn *grpc.ClientConn) {
	c.subscribe()
	backoff := minBackoff
	for {
		var err error
		c.newStream()
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

// newStream forgets what the last stream sent (what the client has
// stays).
func (c *client) newStream() {
	for _, ts := range c.types {
		ts.sent, ts.accepted, ts.nonce = false, "", ""
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
	node := c.node
	for _, ts := range c.types {
		if !ts.asking() {
			continue
		}
		if err := st.Send(sotwRequest(node, ts)); err != nil {
			return fmt.Errorf("send subscription: %w", err)
		}
		node = nil // the node goes in the stream's first request
	}
	for {
		if !c.waitStall(ctx) {
			return ctx.Err()
		}
		resp, err := st.Recv()
		if err != nil {
			return fmt.Errorf("receive: %w", err)
		}
		ts := c.typeOf(resp.GetTypeUrl())
		if ts == nil {
			return fmt.Errorf("response of type %s, which the client did not ask for", resp.GetTypeUrl())
		}
		follow, err := c.sotwResponse(ts, resp)
		if err != nil {
			return err
		}
		ack := sotwRequest(nil, ts)
		ack.ResponseNonce, ack.VersionInfo = resp.GetNonce(), ts.accepted
		if c.nack() {
			ack.ErrorDetail = nackStatus
			c.f.nacks.Add(1)
		} else {
			ts.accepted, ack.VersionInfo = resp.GetVersionInfo(), resp.GetVersionInfo()
			c.f.acks.Add(1)
		}
		ts.nonce = resp.GetNonce()
		if err := st.Send(ack); err != nil {
			return fmt.Errorf("send ACK: %w", err)
		}
		for _, f := range follow { // as Envoy: the new names after the ACK
			if err := st.Send(sotwRequest(nil, f.ts)); err != nil {
				return fmt.Errorf("send subscription: %w", err)
			}
		}
	}
}

// sotwRequest is a SotW request for everything the client asks of ts,
// with the version and nonce it last saw of the type; it marks ts sent.
func sotwRequest(node *corev3.Node, ts *typeState) *discoveryv3.DiscoveryRequest {
	ts.sent = true
	return &discoveryv3.DiscoveryRequest{Node: node, TypeUrl: ts.typeURL, ResourceNames: ts.names,
		VersionInfo: ts.accepted, ResponseNonce: ts.nonce}
}

// sotwResponse records a SotW response of ts's type and returns the
// changes of names it made (an Envoy's RDS and EDS).
func (c *client) sotwResponse(ts *typeState, resp *discoveryv3.DiscoveryResponse) ([]followed, error) {
	now := time.Now()
	c.response(proto.Size(resp), len(resp.GetResources()))
	var got map[string]bool
	if ts.fullState() {
		got = make(map[string]bool, len(resp.GetResources()))
	}
	for i, a := range resp.GetResources() {
		name, body, err := sotwResource(a)
		if err != nil {
			return nil, fmt.Errorf("response %q resource %d: %w", resp.GetNonce(), i, err)
		}
		c.receive(ts, name, resp.GetVersionInfo(), body, now)
		if got != nil {
			got[name] = true
		}
	}
	if got != nil {
		for name := range ts.have {
			if !got[name] {
				c.remove(ts, name, "left out of a full-state response")
			}
		}
	}
	c.resourceErrors(ts, resp.GetResourceErrors())
	c.answered(ts)
	follow := c.follow(ts)
	c.checkSynced()
	return follow, nil
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
	node := c.node
	for _, ts := range c.types {
		if !ts.asking() {
			continue
		}
		ts.sent = true
		if err := st.Send(&discoveryv3.DeltaDiscoveryRequest{Node: node, TypeUrl: ts.typeURL, ResourceNamesSubscribe: ts.names}); err != nil {
			return fmt.Errorf("send subscription: %w", err)
		}
		node = nil // the node goes in the stream's first request
	}
	for {
		if !c.waitStall(ctx) {
			return ctx.Err()
		}
		resp, err := st.Recv()
		if err != nil {
			return fmt.Errorf("receive: %w", err)
		}
		ts := c.typeOf(resp.GetTypeUrl())
		if ts == nil {
			return fmt.Errorf("response of type %s, which the client did not ask for", resp.GetTypeUrl())
		}
		follow := c.deltaResponse(ts, resp)
		ack := &discoveryv3.DeltaDiscoveryRequest{TypeUrl: ts.typeURL, ResponseNonce: resp.GetNonce()}
		if c.nack() {
			ack.ErrorDetail = nackStatus
			c.f.nacks.Add(1)
		} else {
			c.f.acks.Add(1)
		}
		if err := st.Send(ack); err != nil {
			return fmt.Errorf("send ACK: %w", err)
		}
		for _, f := range follow { // as Envoy: the new names after the ACK
			f.ts.sent = true
			if err := st.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: f.ts.typeURL,
				ResourceNamesSubscribe: f.added, ResourceNamesUnsubscribe: f.removed}); err != nil {
				return fmt.Errorf("send subscription: %w", err)
			}
		}
	}
}

// deltaResponse records a delta response of ts's type and returns the
// changes of names it made (an Envoy's RDS and EDS).
func (c *client) deltaResponse(ts *typeState, resp *discoveryv3.DeltaDiscoveryResponse) []followed {
	now := time.Now()
	c.response(proto.Size(resp), len(resp.GetResources()))
	for _, r := range resp.GetResources() {
		c.receive(ts, r.GetName(), r.GetVersion(), r.GetResource().GetValue(), now)
	}
	for _, name := range resp.GetRemovedResources() {
		c.remove(ts, name, "removed (does not exist)")
	}
	c.resourceErrors(ts, resp.GetResourceErrors())
	if len(resp.GetResources()) > 0 || len(resp.GetRemovedResources()) > 0 || len(resp.GetResourceErrors()) > 0 {
		c.answered(ts)
	}
	follow := c.follow(ts)
	c.checkSynced()
	return follow
}

// receive records one resource version arriving at now. NACKs are only
// protocol-level: what a client NACKs still counts as received.
func (c *client) receive(ts *typeState, name, version string, body []byte, now time.Time) {
	c.mu.Lock()
	old, had := ts.have[name]
	ts.have[name] = version
	delete(ts.why, name)
	c.mu.Unlock()
	if ts.refs != nil {
		ts.refs[name] = envoyRefs(ts.typeURL, body)
	}
	c.f.received.Add(1)
	c.f.noteVersion(name, version, now, c.synced)
	if !had || old != version {
		c.f.versionMoved(ts.typeURL, name, old, had, version)
	}
	if had && old != version && c.synced {
		c.counts.changes.Add(1)
	}
	stamp, ok := ParseStamp(body)
	if !ok || c.lastStamp[name] >= stamp.UnixNano() {
		return // no stamp, or a stamp already seen (a resend)
	}
	c.lastStamp[name] = stamp.UnixNano()
	if stamp.UnixNano() > c.counts.newest.Load() {
		c.counts.newest.Store(stamp.UnixNano()) // written by this goroutine only
	}
	if !c.synced {
		return // (re)syncing: the client's initial state, not an update
	}
	c.mu.Lock()
	c.latencies = append(c.latencies, now.Sub(stamp))
	c.mu.Unlock()
	c.counts.updated.Add(1)
	c.f.stamped.Add(1)
}

// remove records that the server said name no longer exists (why): the
// client drops what it had of it.
func (c *client) remove(ts *typeState, name, why string) {
	c.mu.Lock()
	old, had := ts.have[name]
	delete(ts.have, name)
	ts.note(name, why)
	c.mu.Unlock()
	delete(ts.refs, name)
	if had {
		c.f.versionDropped(ts.typeURL, name, old)
	}
}

// resourceErrors records the resource errors of a response: why the
// server did not send a name.
func (c *client) resourceErrors(ts *typeState, errs []*discoveryv3.ResourceError) {
	if len(errs) == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, e := range errs {
		d := e.GetErrorDetail()
		ts.note(e.GetResourceName().GetName(), fmt.Sprintf("%s: %s", code.Code(d.GetCode()), d.GetMessage()))
	}
}

// answered marks ts answered by a response.
func (c *client) answered(ts *typeState) {
	if ts.answered {
		return
	}
	c.mu.Lock()
	ts.answered = true
	c.mu.Unlock()
}

// checkSynced marks the client synced once it has everything it asked
// for: every name, and an answer for each wildcard or glob.
func (c *client) checkSynced() {
	if c.synced {
		return
	}
	for _, ts := range c.types {
		if !ts.hasAll() {
			return
		}
	}
	// Stamps of what the client has now are its initial state, not updates.
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
