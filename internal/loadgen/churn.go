package loadgen

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// The churning client: one more client, outside the fleet's N, on its own
// connection, that changes its subscription Rate times a second (delta:
// unsubscribes one of its names, then subscribes it again; SotW: lists its
// names without one, then all of them), as a hostile or broken client
// would. It reads every response (so it is no slow client) and answers
// none but by its next change (SotW: which carries the latest nonce). A server that keeps it back (a request budget) makes its sends
// wait on flow control: Requests then falls behind Rate.

// ChurnStats is what the churning client did.
type ChurnStats struct {
	Rate      float64 `json:"rate"`      // subscription changes a second asked for
	Requests  int64   `json:"requests"`  // requests sent, the first subscription included
	Responses int64   `json:"responses"` // responses received
	Seconds   float64 `json:"seconds"`   // how long it ran
	// Achieved is Requests ÷ Seconds.
	Achieved float64 `json:"achieved"`
	Error    string  `json:"error,omitempty"`
}

// churnSlot keeps the churning client while one runs.
type churnSlot struct {
	mu  sync.Mutex
	cur *churner // guarded by mu
}

type churner struct {
	rate      float64
	start     time.Time
	cancel    context.CancelFunc
	done      chan struct{} // closed when its goroutines returned
	conn      *grpc.ClientConn
	requests  atomic.Int64
	responses atomic.Int64
	err       atomic.Pointer[string] // why it stopped early
}

// StartChurn starts the churning client at rate subscription changes a
// second, replacing one that runs.
func (f *Fleet) StartChurn(rate float64) error {
	if rate <= 0 {
		return fmt.Errorf("%w: churn rate %v: want more than 0", ErrConfig, rate)
	}
	names := f.cfg.ClientSubscription(0)
	if f.cfg.Glob != "" || len(names) == 0 {
		return fmt.Errorf("%w: a churning client needs names, not a glob", ErrConfig)
	}
	f.StopChurn()
	conn, err := grpc.NewClient(f.cfg.Target, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxRecvMsgSize)))
	if err != nil {
		return fmt.Errorf("loadgen: churning client's connection: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ch := &churner{rate: rate, start: time.Now(), cancel: cancel, done: make(chan struct{}), conn: conn}
	node := &corev3.Node{Id: "loadgen-churn", Cluster: f.cfg.nodeCluster(0), UserAgentName: "xds-relay-loadgen"}
	go func() {
		defer close(ch.done)
		if err := ch.run(ctx, f.cfg, node, names); err != nil && ctx.Err() == nil {
			msg := err.Error()
			ch.err.Store(&msg)
		}
	}()
	f.churn.mu.Lock()
	f.churn.cur = ch
	f.churn.mu.Unlock()
	return nil
}

// StopChurn stops the churning client, if one runs, and returns what it
// did.
func (f *Fleet) StopChurn() ChurnStats {
	f.churn.mu.Lock()
	ch := f.churn.cur
	f.churn.cur = nil
	f.churn.mu.Unlock()
	if ch == nil {
		return ChurnStats{}
	}
	ch.cancel()
	<-ch.done
	_ = ch.conn.Close() // ours; nothing to report
	return ch.stats()
}

// Churn returns what the churning client did so far; zero when none runs.
func (f *Fleet) Churn() ChurnStats {
	f.churn.mu.Lock()
	defer f.churn.mu.Unlock()
	if f.churn.cur == nil {
		return ChurnStats{}
	}
	return f.churn.cur.stats()
}

func (ch *churner) stats() ChurnStats {
	st := ChurnStats{Rate: ch.rate, Requests: ch.requests.Load(), Responses: ch.responses.Load(), Seconds: time.Since(ch.start).Seconds()}
	if st.Seconds > 0 {
		st.Achieved = float64(st.Requests) / st.Seconds
	}
	if e := ch.err.Load(); e != nil {
		st.Error = *e
	}
	return st
}

// run opens the churning client's stream, reads it in a goroutine and
// sends a subscription change every 1/rate until ctx ends.
func (ch *churner) run(ctx context.Context, cfg Config, node *corev3.Node, names []string) error {
	ads := discoveryv3.NewAggregatedDiscoveryServiceClient(ch.conn)
	var send func(k int) error
	var recv func() error
	if cfg.Variant == SotW {
		st, err := ads.StreamAggregatedResources(ctx)
		if err != nil {
			return err
		}
		// A SotW request carries the latest response's nonce and version,
		// else a server takes it for a stale one and ignores it.
		var last atomic.Pointer[discoveryv3.DiscoveryResponse]
		send = func(k int) error {
			req := sotwChurn(k, node, cfg.TypeURL, names)
			if r := last.Load(); r != nil {
				req.ResponseNonce, req.VersionInfo = r.GetNonce(), r.GetVersionInfo()
			}
			return st.Send(req)
		}
		recv = func() error {
			r, err := st.Recv()
			if err == nil {
				last.Store(r)
			}
			return err
		}
	} else {
		st, err := ads.DeltaAggregatedResources(ctx)
		if err != nil {
			return err
		}
		send = func(k int) error { return st.Send(deltaChurn(k, node, cfg.TypeURL, names)) }
		recv = func() error { _, err := st.Recv(); return err }
	}
	recvDone := make(chan error, 1)
	go func() {
		for {
			if err := recv(); err != nil {
				recvDone <- err
				return
			}
			ch.responses.Add(1)
		}
	}()
	err := ch.sendLoop(ctx, send)
	// The stream ends with ctx (the caller cancels it), which ends recv.
	if rerr := <-recvDone; err == nil && ctx.Err() == nil {
		err = rerr
	}
	return err
}

// sendLoop sends request k at the k-th tick of 1/rate until ctx ends; a
// send that waits (flow control) lets ticks pass.
func (ch *churner) sendLoop(ctx context.Context, send func(k int) error) error {
	tick := time.NewTicker(time.Duration(float64(time.Second) / ch.rate))
	defer tick.Stop()
	for k := 0; ; k++ {
		if err := send(k); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		ch.requests.Add(1)
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// deltaChurn is the churning delta client's k-th request: the first
// subscribes every name; then, in turns, one name is unsubscribed and
// subscribed again.
func deltaChurn(k int, node *corev3.Node, typeURL string, names []string) *discoveryv3.DeltaDiscoveryRequest {
	if k == 0 {
		return &discoveryv3.DeltaDiscoveryRequest{Node: node, TypeUrl: typeURL, ResourceNamesSubscribe: names}
	}
	n := []string{names[(k-1)/2%len(names)]}
	if k%2 == 1 {
		return &discoveryv3.DeltaDiscoveryRequest{TypeUrl: typeURL, ResourceNamesUnsubscribe: n}
	}
	return &discoveryv3.DeltaDiscoveryRequest{TypeUrl: typeURL, ResourceNamesSubscribe: n}
}

// sotwChurn is the churning SotW client's k-th request: every name, or
// every name but one, in turns.
func sotwChurn(k int, node *corev3.Node, typeURL string, names []string) *discoveryv3.DiscoveryRequest {
	req := &discoveryv3.DiscoveryRequest{TypeUrl: typeURL, ResourceNames: names}
	if k == 0 {
		req.Node = node
		return req
	}
	if k%2 == 1 && len(names) > 1 {
		skip := (k - 1) / 2 % len(names)
		req.ResourceNames = append(append([]string(nil), names[:skip]...), names[skip+1:]...)
	}
	return req
}
