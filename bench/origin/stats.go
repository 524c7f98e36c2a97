package main

import (
	"context"
	"net/http"
	"sync"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	serverv3 "github.com/envoyproxy/go-control-plane/pkg/server/v3"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/protobuf/proto"
)

// runtimeMetrics serves the Go runtime's figures in Prometheus's text
// format (go_memstats_heap_inuse_bytes, go_memstats_stack_inuse_bytes,
// go_goroutines, ...) from the collector the relay registers on its own
// /metrics, so the harness reads both processes' memory the same way.
func runtimeMetrics() http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector())
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
}

// Stats is what the origin reports on GET /stats.
type Stats struct {
	// StreamsOpen and Subscriptions are what the origin holds now: open
	// streams, and the sum over them of subscribed names (a wildcard
	// subscription counts as one).
	StreamsOpen   int `json:"streams_open"`
	Subscriptions int `json:"subscriptions"`
	// The rest are totals since start.
	StreamsOpened   int64  `json:"streams_opened"`
	Requests        int64  `json:"requests"`
	Responses       int64  `json:"responses"`
	ResourcesSent   int64  `json:"resources_sent"`
	BytesSent       int64  `json:"bytes_sent"`       // serialized DiscoveryResponse bytes, gRPC framing excluded
	Pushes          int64  `json:"pushes"`           // POST /push calls that changed the cache
	ResourcesPushed int64  `json:"resources_pushed"` // resources they replaced (R per push of all)
	LastPushedName  string `json:"last_pushed_name,omitempty"`
}

// recorder counts through go-control-plane's server callbacks.
type recorder struct {
	mu    sync.Mutex
	subs  map[int64]map[string]struct{} // guarded by mu: open stream → subscribed names
	stats Stats                         // guarded by mu (StreamsOpen, Subscriptions computed on read)
}

func newRecorder() *recorder {
	return &recorder{subs: make(map[int64]map[string]struct{})}
}

func (r *recorder) snapshot() Stats {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.stats
	s.StreamsOpen = len(r.subs)
	for _, names := range r.subs {
		s.Subscriptions += len(names)
	}
	return s
}

// pushed counts one push that replaced names.
func (r *recorder) pushed(names ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stats.Pushes++
	r.stats.ResourcesPushed += int64(len(names))
	if len(names) > 0 {
		r.stats.LastPushedName = names[len(names)-1]
	}
}

func (r *recorder) open(id int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.subs[id] = make(map[string]struct{})
	r.stats.StreamsOpened++
}

func (r *recorder) closed(id int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.subs, id)
}

func (r *recorder) sent(size, resources int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stats.Responses++
	r.stats.ResourcesSent += int64(resources)
	r.stats.BytesSent += int64(size)
}

func (r *recorder) callbacks() serverv3.Callbacks {
	return serverv3.CallbackFuncs{
		StreamOpenFunc: func(_ context.Context, id int64, _ string) error {
			r.open(id)
			return nil
		},
		DeltaStreamOpenFunc: func(_ context.Context, id int64, _ string) error {
			r.open(id)
			return nil
		},
		StreamClosedFunc:      func(id int64, _ *corev3.Node) { r.closed(id) },
		DeltaStreamClosedFunc: func(id int64, _ *corev3.Node) { r.closed(id) },
		StreamRequestFunc: func(id int64, req *discoveryv3.DiscoveryRequest) error {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.stats.Requests++
			names := make(map[string]struct{}, len(req.GetResourceNames()))
			for _, n := range req.GetResourceNames() {
				names[n] = struct{}{}
			}
			if len(names) == 0 {
				names["*"] = struct{}{}
			}
			if _, ok := r.subs[id]; ok {
				r.subs[id] = names
			}
			return nil
		},
		StreamDeltaRequestFunc: func(id int64, req *discoveryv3.DeltaDiscoveryRequest) error {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.stats.Requests++
			names, ok := r.subs[id]
			if !ok {
				return nil
			}
			for _, n := range req.GetResourceNamesSubscribe() {
				names[n] = struct{}{}
			}
			for _, n := range req.GetResourceNamesUnsubscribe() {
				delete(names, n)
			}
			return nil
		},
		StreamResponseFunc: func(_ context.Context, _ int64, _ *discoveryv3.DiscoveryRequest, resp *discoveryv3.DiscoveryResponse) {
			r.sent(proto.Size(resp), len(resp.GetResources()))
		},
		StreamDeltaResponseFunc: func(_ int64, _ *discoveryv3.DeltaDiscoveryRequest, resp *discoveryv3.DeltaDiscoveryResponse) {
			r.sent(proto.Size(resp), len(resp.GetResources()))
		},
	}
}
