package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	serverv3 "github.com/envoyproxy/go-control-plane/pkg/server/v3"
	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"

	"github.com/xds-relay/xds-relay/internal/loadgen"
	"github.com/xds-relay/xds-relay/internal/xdstest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestBuildCLA(t *testing.T) {
	pushed := time.Unix(1700000000, 42)
	tests := []struct {
		name      string
		size      int
		pushed    time.Time
		wantStamp bool
	}{
		{name: "initial 1 KiB", size: 1024},
		{name: "pushed 1 KiB", size: 1024, pushed: pushed, wantStamp: true},
		{name: "pushed 8 KiB", size: 8192, pushed: pushed, wantStamp: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b, err := proto.Marshal(buildCLA("xdstp://a/t/n", tc.size, 3, tc.pushed))
			if err != nil {
				t.Fatal(err)
			}
			if len(b) < tc.size || len(b) > tc.size+256 {
				t.Errorf("size %d, want about %d", len(b), tc.size)
			}
			got, ok := loadgen.ParseStamp(b)
			if ok != tc.wantStamp || (ok && !got.Equal(tc.pushed)) {
				t.Errorf("ParseStamp = %v, %v; want %v, %v", got, ok, tc.pushed, tc.wantStamp)
			}
		})
	}
}

func TestRecorderCountsStreamsAndSubscriptions(t *testing.T) {
	r := newRecorder()
	cb := r.callbacks()
	ctx := context.Background()
	_ = cb.OnStreamOpen(ctx, 1, "")
	_ = cb.OnStreamRequest(1, &discoveryv3.DiscoveryRequest{ResourceNames: []string{"a", "b"}})
	_ = cb.OnStreamRequest(1, &discoveryv3.DiscoveryRequest{ResourceNames: []string{"a", "b", "c"}})
	_ = cb.OnDeltaStreamOpen(ctx, 2, "")
	_ = cb.OnStreamDeltaRequest(2, &discoveryv3.DeltaDiscoveryRequest{ResourceNamesSubscribe: []string{"a", "b"}})
	_ = cb.OnStreamDeltaRequest(2, &discoveryv3.DeltaDiscoveryRequest{ResourceNamesUnsubscribe: []string{"a"}})
	_ = cb.OnDeltaStreamOpen(ctx, 3, "")
	_ = cb.OnStreamRequest(3, &discoveryv3.DiscoveryRequest{}) // wildcard
	cb.OnStreamDeltaResponse(2, nil, &discoveryv3.DeltaDiscoveryResponse{Resources: []*discoveryv3.Resource{{Name: "b"}}})
	cb.OnStreamClosed(3, nil)

	got := r.snapshot()
	want := Stats{StreamsOpen: 2, Subscriptions: 4, StreamsOpened: 3, Requests: 5, Responses: 1, ResourcesSent: 1,
		BytesSent: int64(proto.Size(&discoveryv3.DeltaDiscoveryResponse{Resources: []*discoveryv3.Resource{{Name: "b"}}}))}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("stats (-want +got):\n%s", diff)
	}
}

// serveOrigin serves o's cache over go-control-plane's ADS server, with
// o's recorder as its callbacks, on 127.0.0.1:0, until the test ends.
func serveOrigin(t *testing.T, o *origin) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	gs := grpc.NewServer()
	discoveryv3.RegisterAggregatedDiscoveryServiceServer(gs, serverv3.NewServer(ctx, o.cache, o.rec.callbacks()))
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = gs.Serve(lis) // returns when stopped
	}()
	t.Cleanup(func() {
		gs.Stop()
		cancel()
		<-done
	})
	return lis.Addr().String()
}

// received is one response as a client saw it: per resource, its name and
// push stamp (zero when unstamped).
type received map[string]time.Time

// adsClient subscribes to names over one ADS stream of variant ("delta" or
// "sotw"), ACKs every response and reports each on the returned channel,
// until the test ends.
func adsClient(t *testing.T, addr, variant string, names []string) <-chan received {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ads := discoveryv3.NewAggregatedDiscoveryServiceClient(conn)
	node := &corev3.Node{Id: "origin-test"}
	// recv returns the next response's resources (name, serialized body)
	// and ACKs it.
	var recv func() (map[string][]byte, error)
	switch variant {
	case "delta":
		st, err := ads.DeltaAggregatedResources(ctx)
		if err == nil {
			err = st.Send(&discoveryv3.DeltaDiscoveryRequest{Node: node, TypeUrl: resourcev3.EndpointType, ResourceNamesSubscribe: names})
		}
		if err != nil {
			t.Fatalf("delta stream: %v", err)
		}
		recv = func() (map[string][]byte, error) {
			resp, err := st.Recv()
			if err != nil {
				return nil, err
			}
			got := make(map[string][]byte)
			for _, r := range resp.GetResources() {
				got[r.GetName()] = r.GetResource().GetValue()
			}
			return got, st.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resourcev3.EndpointType, ResponseNonce: resp.GetNonce()})
		}
	case "sotw":
		st, err := ads.StreamAggregatedResources(ctx)
		if err == nil {
			err = st.Send(&discoveryv3.DiscoveryRequest{Node: node, TypeUrl: resourcev3.EndpointType, ResourceNames: names})
		}
		if err != nil {
			t.Fatalf("SotW stream: %v", err)
		}
		recv = func() (map[string][]byte, error) {
			resp, err := st.Recv()
			if err != nil {
				return nil, err
			}
			got := make(map[string][]byte)
			for _, a := range resp.GetResources() {
				var cla endpointv3.ClusterLoadAssignment
				if err := proto.Unmarshal(a.GetValue(), &cla); err != nil {
					return nil, fmt.Errorf("decode resource: %w", err)
				}
				got[cla.GetClusterName()] = a.GetValue()
			}
			return got, st.Send(&discoveryv3.DiscoveryRequest{TypeUrl: resourcev3.EndpointType, ResourceNames: names,
				VersionInfo: resp.GetVersionInfo(), ResponseNonce: resp.GetNonce()})
		}
	default:
		t.Fatalf("variant %q", variant)
	}
	out := make(chan received)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			got, err := recv()
			if err != nil {
				if ctx.Err() == nil {
					t.Errorf("%s stream: %v", variant, err)
				}
				return
			}
			r := make(received, len(got))
			for name, body := range got {
				r[name], _ = loadgen.ParseStamp(body)
			}
			select {
			case out <- r:
			case <-ctx.Done():
				return
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		_ = conn.Close() // the test is over
	})
	return out
}

func next(t *testing.T, ch <-chan received, what string) received {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(xdstest.WaitTimeout):
		t.Fatalf("%s: no response within %v", what, xdstest.WaitTimeout)
		return nil
	}
}

// TestPushAllIsOneResponse: POST /push?all=1 replaces all R resources, each
// stamped with the push time, and a subscribed client gets them all in one
// response, then nothing more.
func TestPushAllIsOneResponse(t *testing.T) {
	const count = 5
	for _, variant := range []string{"delta", "sotw"} {
		t.Run(variant, func(t *testing.T) {
			o, err := newOrigin(count, 1024, namesXDSTP, "bench.test")
			if err != nil {
				t.Fatal(err)
			}
			responses := adsClient(t, serveOrigin(t, o), variant, o.names)
			initial := received{}
			for len(initial) < count {
				for name, at := range next(t, responses, "initial state") {
					initial[name] = at
				}
			}
			before := o.rec.snapshot()

			rec := httptest.NewRecorder()
			o.handler().ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/push?all=1", nil))
			var pushed struct {
				Resources int   `json:"resources"`
				At        int64 `json:"pushed_unix_nano"`
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &pushed); rec.Code != http.StatusOK || err != nil {
				t.Fatalf("POST /push?all=1: %d %q (%v)", rec.Code, rec.Body, err)
			}
			want := received{}
			for _, n := range o.names {
				want[n] = time.Unix(0, pushed.At)
			}
			if diff := cmp.Diff(want, next(t, responses, "the push of all")); diff != "" {
				t.Errorf("response to the push of all (-want +got):\n%s", diff)
			}
			select {
			case r := <-responses:
				t.Errorf("a second response after one push of all: %v", r)
			case <-time.After(xdstest.QuietPeriod):
			}

			after := o.rec.snapshot()
			type change struct{ Responses, ResourcesSent, Pushes, ResourcesPushed int64 }
			got := change{after.Responses - before.Responses, after.ResourcesSent - before.ResourcesSent,
				after.Pushes - before.Pushes, after.ResourcesPushed - before.ResourcesPushed}
			if diff := cmp.Diff(change{1, count, 1, count}, got); diff != "" {
				t.Errorf("origin stats over the push (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPushRejectsBadQuery(t *testing.T) {
	o, err := newOrigin(2, 64, namesXDSTP, "bench.test")
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"all=yes", "all=1&index=0", "index=2", "index=x", "count=0", "count=3", "count=x", "count=1&all=1", "count=1&index=0",
		"name=nope", "name=" + url.QueryEscape(o.names[0]) + "&index=0"} {
		t.Run(q, func(t *testing.T) {
			rec := httptest.NewRecorder()
			o.handler().ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/push?"+q, nil))
			if rec.Code != http.StatusBadRequest {
				t.Errorf("POST /push?%s: %d %q, want 400", q, rec.Code, rec.Body)
			}
		})
	}
	if s := o.rec.snapshot(); s.Pushes != 0 {
		t.Errorf("%d pushes after bad requests only, want 0", s.Pushes)
	}
}

// TestPushByName: POST /push?name=N changes the resource named N, every
// time (not the next one round-robin).
func TestPushByName(t *testing.T) {
	o, err := newOrigin(3, 64, namesXDSTP, "bench.test")
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		rec := httptest.NewRecorder()
		o.handler().ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/push?name="+url.QueryEscape(o.names[1]), nil))
		var got struct{ Name string }
		if err := json.Unmarshal(rec.Body.Bytes(), &got); rec.Code != http.StatusOK || err != nil || got.Name != o.names[1] {
			t.Errorf("POST /push?name=%s: %d %q, want 200 naming it", o.names[1], rec.Code, rec.Body)
		}
	}
}

func TestDeploySet(t *testing.T) {
	const r, k = 1000, 50
	first := deploySet(r, k, 0)
	if diff := cmp.Diff(first, deploySet(r, k, 0)); diff != "" {
		t.Errorf("deploySet is not deterministic (-first +second):\n%s", diff)
	}
	if slices.Equal(first, deploySet(r, k, 1)) {
		t.Errorf("pushes 0 and 1 change the same set %v", first)
	}
	for seq := uint64(0); seq < 20; seq++ {
		got := deploySet(r, k, seq)
		if len(got) != k {
			t.Fatalf("push %d: %d indices, want %d", seq, len(got), k)
		}
		for i, j := range got {
			if j < 0 || j >= r || (i > 0 && got[i-1] >= j) {
				t.Fatalf("push %d: %v is not increasing within [0, %d)", seq, got, r)
			}
		}
	}
}

// TestPushCount: POST /push?count=K replaces the K resources deploySet
// picks, plain-named, in one change: a client subscribed to some of them
// gets exactly those in one response, a client subscribed to none of them
// gets nothing.
func TestPushCount(t *testing.T) {
	const count, k = 40, 4
	changed := deploySet(count, k, 0)
	isChanged := make(map[int]bool)
	for _, i := range changed {
		isChanged[i] = true
	}
	for _, variant := range []string{"delta", "sotw"} {
		t.Run(variant, func(t *testing.T) {
			o, err := newOrigin(count, 256, namesPlain, "bench.test")
			if err != nil {
				t.Fatal(err)
			}
			if o.names[7] != "cla-0007" {
				t.Fatalf("plain name %q, want cla-0007", o.names[7])
			}
			// affected holds two changed names and one unchanged one;
			// unaffected holds two unchanged ones.
			var affected, unaffected []string
			for i, n := range o.names {
				switch {
				case isChanged[i] && len(affected) < 2:
					affected = append(affected, n)
				case !isChanged[i] && len(unaffected) < 2:
					unaffected = append(unaffected, n)
				}
			}
			affected = append(affected, unaffected[0])
			addr := serveOrigin(t, o)
			clients := map[string]<-chan received{"affected": adsClient(t, addr, variant, affected), "unaffected": adsClient(t, addr, variant, unaffected)}
			for who, ch := range clients {
				want := map[string][]string{"affected": affected, "unaffected": unaffected}[who]
				got := received{}
				for len(got) < len(want) {
					for name, at := range next(t, ch, who+" initial state") {
						got[name] = at
					}
				}
			}

			rec := httptest.NewRecorder()
			o.handler().ServeHTTP(rec, httptest.NewRequest(http.MethodPost, fmt.Sprintf("/push?count=%d", k), nil))
			var pushed struct {
				Resources int      `json:"resources"`
				Names     []string `json:"names"`
				At        int64    `json:"pushed_unix_nano"`
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &pushed); rec.Code != http.StatusOK || err != nil {
				t.Fatalf("POST /push?count=%d: %d %q (%v)", k, rec.Code, rec.Body, err)
			}
			var wantNames []string
			for _, i := range changed {
				wantNames = append(wantNames, o.names[i])
			}
			if diff := cmp.Diff(wantNames, pushed.Names); diff != "" || pushed.Resources != k {
				t.Errorf("pushed %d names (-want +got):\n%s", pushed.Resources, diff)
			}

			at := time.Unix(0, pushed.At)
			// SotW too: for EDS a server need send only what changed, and
			// go-control-plane does.
			want := received{affected[0]: at, affected[1]: at}
			if diff := cmp.Diff(want, next(t, clients["affected"], "the deploy")); diff != "" {
				t.Errorf("response to the deploy (-want +got):\n%s", diff)
			}
			quiet := time.After(xdstest.QuietPeriod)
			for done := false; !done; {
				select {
				case r := <-clients["affected"]:
					t.Errorf("affected client: a second response after one deploy: %v", r)
				case r := <-clients["unaffected"]:
					t.Errorf("unaffected client: a response to a deploy that changed none of its names: %v", r)
				case <-quiet:
					done = true
				}
			}
		})
	}
}

// TestMetricsServesRuntime: GET /metrics carries the Go runtime figures
// the harness divides per stream, under the names the relay exports.
func TestMetricsServesRuntime(t *testing.T) {
	o, err := newOrigin(1, 1024, namesXDSTP, "bench.local")
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	o.handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("GET /metrics: %d %q", rec.Code, rec.Body)
	}
	for _, name := range []string{"go_memstats_heap_inuse_bytes ", "go_memstats_stack_inuse_bytes ", "go_goroutines "} {
		if !strings.Contains(rec.Body.String(), "\n"+name) {
			t.Errorf("GET /metrics lacks %s", name)
		}
	}
}
