package integration

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/xds-relay/xds-relay/config"
	"github.com/xds-relay/xds-relay/internal/access"
	relayadmin "github.com/xds-relay/xds-relay/internal/admin"
	"github.com/xds-relay/xds-relay/internal/downstream"
	relayproc "github.com/xds-relay/xds-relay/internal/relay"
	"github.com/xds-relay/xds-relay/internal/xdstest"
)

// Issue 17, limits: every limit counts everything the relay keeps for a
// client. Each test here failed against the relay before the fix.

// namesOf returns n distinct names built by name(i).
func namesOf(n int, name func(i int) string) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = name(i)
	}
	return out
}

// quietRelayServing starts an origin serving one cluster, id, and a relay
// in front of it logging at info; it returns the cluster's name, the relay
// and a client connection to it.
func quietRelayServing(t *testing.T, id string) (string, *relayproc.Relay, *grpc.ClientConn) {
	t.Helper()
	o := newGCPOrigin(t)
	c := dsCluster(id)
	o.set(resource.ClusterType, c, cluster(c, 1))
	r := startRelay(t, func(cfg *config.Config) { cfg.Log.Level = config.LogInfo }, o.addr)
	return c, r, dial(t, r.XDSAddr())
}

// TestNamesNotServedCountTowardTheLimit: names the relay answers as
// removed (an authority with no configuration, a type the authority does
// not carry) are remembered for the stream's life, so they count toward
// max_names_per_stream like served ones (before: 150,000 on one stream held
// 62 MiB); unsubscribing them gives their places back.
func TestNamesNotServedCountTowardTheLimit(t *testing.T) {
	o := newGCPOrigin(t)
	c := dsCluster("served")
	o.set(resource.ClusterType, c, cluster(c, 1))
	const limit = 30
	r := startRelay(t, func(cfg *config.Config) {
		cfg.Log.Level = config.LogInfo
		cfg.Downstream.Limits.MaxNamesPerStream = limit
		cfg.Authorities[0].Types = []string{resource.ClusterType} // no listeners: not carried
	}, o.addr)
	conn := dial(t, r.XDSAddr())

	for _, tc := range []struct {
		name    string
		typeURL string
		names   func(batch int) []string
	}{
		{"unknown authority", resource.ClusterType, func(b int) []string {
			return namesOf(limit/2, func(i int) string {
				return fmt.Sprintf("xdstp://nowhere.example/envoy.config.cluster.v3.Cluster/%d-%d", b, i)
			})
		}},
		{"type not carried", resource.ListenerType, func(b int) []string {
			return namesOf(limit/2, func(i int) string {
				return fmt.Sprintf("xdstp://%s/envoy.config.listener.v3.Listener/%d-%d", dsAuthority, b, i)
			})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Subscribed and unsubscribed again and again: never over.
			s := openDelta(t, conn)
			v := subscribeClusters(t, s, c)
			for b := range 4 {
				names := tc.names(b)
				s.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: tc.typeURL, ResourceNamesSubscribe: names})
				s.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: tc.typeURL, ResourceNamesUnsubscribe: names})
			}
			o.set(resource.ClusterType, c, cluster(c, int64(2+len(tc.name))))
			recvDelta(t, s, v, func() bool { return timeoutOf(v, c) == int64(2+len(tc.name)) })

			// Kept: the third batch goes over.
			wantNamesOver(t, openDelta(t, conn), testNodeDS, tc.typeURL, tc.names)
		})
	}
}

// TestDeniedGlobsCountTowardTheLimit: a glob the access rules deny is
// answered as removed and remembered, so it counts toward
// max_names_per_stream too (before: never counted, kept for the stream's
// life).
func TestDeniedGlobsCountTowardTheLimit(t *testing.T) {
	o := newGCPOrigin(t)
	const limit = 30
	r := startRelay(t, func(cfg *config.Config) {
		cfg.Log.Level = config.LogInfo
		cfg.Downstream.Limits.MaxNamesPerStream = limit
		cfg.Authorities[0].Allow = []access.AllowEntry{{NodeID: "ds-*"}}
	}, o.addr)
	globs := func(b int) []string {
		return namesOf(limit/2, func(i int) string { return dsCluster(fmt.Sprintf("dir-%d-%d/*", b, i)) })
	}
	wantNamesOver(t, openDelta(t, dial(t, r.XDSAddr())), &corev3.Node{Id: "outsider"}, resource.ClusterType, globs)
}

// wantNamesOver subscribes s (as node) to three batches of names of
// typeURL, batch(0) to batch(2), and wants the stream ended with
// ResourceExhausted naming max_names_per_stream: the names are kept, so
// they count, and the limit is under three batches.
func wantNamesOver(t *testing.T, s *deltaADS, node *corev3.Node, typeURL string, batch func(int) []string) {
	t.Helper()
	for b := range 3 {
		req := &discoveryv3.DeltaDiscoveryRequest{TypeUrl: typeURL, ResourceNamesSubscribe: batch(b)}
		if b == 0 {
			req.Node = node
		}
		s.Send(req)
	}
	if st := s.Err(); st.Code() != codes.ResourceExhausted || !strings.Contains(st.Message(), "max_names_per_stream") {
		t.Fatalf("stream keeping three batches of %d names ended with %v, want ResourceExhausted naming max_names_per_stream", len(batch(0)), st)
	}
}

// TestInitialVersionsCountAcrossTypes: initial_resource_versions spread
// over several types count toward one stream's max_names_per_stream
// (before: each type's were checked alone, +111 MiB on one stream), and a
// version string longer than max_version_length is refused.
func TestInitialVersionsCountAcrossTypes(t *testing.T) {
	o := newGCPOrigin(t)
	const limit = 20
	r := startRelay(t, func(cfg *config.Config) {
		cfg.Log.Level = config.LogInfo
		cfg.Downstream.Limits.MaxNamesPerStream = limit
	}, o.addr)
	conn := dial(t, r.XDSAddr())
	declare := func(typ string, n int, version string) map[string]string {
		m := make(map[string]string, n)
		for i := range n {
			m[fmt.Sprintf("xdstp://%s/%s/r%d", dsAuthority, strings.TrimPrefix(typ, resource.APITypePrefix), i)] = version
		}
		return m
	}

	s := openDelta(t, conn)
	for _, typ := range []string{resource.ClusterType, resource.ListenerType} {
		s.Send(&discoveryv3.DeltaDiscoveryRequest{Node: testNodeDS, TypeUrl: typ,
			ResourceNamesSubscribe:  []string{"xdstp://" + dsAuthority + "/" + strings.TrimPrefix(typ, resource.APITypePrefix) + "/one"},
			InitialResourceVersions: declare(typ, 3*limit/4, "v1")})
	}
	if st := s.Err(); st.Code() != codes.ResourceExhausted || !strings.Contains(st.Message(), "max_names_per_stream") {
		t.Fatalf("stream declaring %d versions over two types ended with %v, want ResourceExhausted naming max_names_per_stream", 3*limit/2, st)
	}

	long := openDelta(t, conn)
	long.Send(&discoveryv3.DeltaDiscoveryRequest{Node: testNodeDS, TypeUrl: resource.ClusterType,
		InitialResourceVersions: declare(resource.ClusterType, 1, strings.Repeat("v", config.DefaultMaxVersionLength+1))})
	if st := long.Err(); st.Code() != codes.InvalidArgument || !strings.Contains(st.Message(), "max_version_length") {
		t.Fatalf("stream declaring a %d-byte version ended with %v, want InvalidArgument naming max_version_length", config.DefaultMaxVersionLength+1, st)
	}
}

// TestSotWVersionAndDebugPageBounded: a SotW ACK whose version_info is
// longer than max_version_length is refused (before: kept whole per stream
// and type, and served back whole by /debug/clients), and /debug/clients
// shows a bounded part of a client's names with a marker saying how many
// it left out (before: a 60 MiB page from 10 streams).
func TestSotWVersionAndDebugPageBounded(t *testing.T) {
	c, r, conn := quietRelayServing(t, "acked")

	s := openSotW(t, conn)
	s.Send(&discoveryv3.DiscoveryRequest{Node: testNodeDS, TypeUrl: resource.ClusterType, ResourceNames: []string{c}})
	got := s.Recv()
	s.Send(&discoveryv3.DiscoveryRequest{TypeUrl: resource.ClusterType, ResourceNames: []string{c},
		VersionInfo: strings.Repeat("9", 1<<20), ResponseNonce: got.GetNonce()})
	if st := s.Err(); st.Code() != codes.InvalidArgument || !strings.Contains(st.Message(), "max_version_length") || len(st.Message()) > 2048 {
		t.Fatalf("ACK with a 1 MiB version_info: stream ended with %v, want a short InvalidArgument naming max_version_length", st)
	}

	// 500 names of 2000 bytes: 1 MB of names on one stream.
	const n = 500
	names := namesOf(n, func(i int) string { return dsCluster(fmt.Sprintf("%04d-%s", i, strings.Repeat("x", 1950))) })
	many := openSotW(t, conn)
	many.Send(&discoveryv3.DiscoveryRequest{Node: testNodeDS, TypeUrl: resource.ClusterType, ResourceNames: names})
	url := "http://" + r.AdminAddr() + relayadmin.ClientsPath
	var raw []byte
	// Re-poll the page: the subscription lands asynchronously.
	xdstest.Poll(t, url+" shows the client of 500 names", func() error {
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		var infos []downstream.ClientInfo
		if err := json.Unmarshal(raw, &infos); err != nil {
			t.Fatalf("%s: %v", url, err)
		}
		shown := false
		for _, ci := range infos {
			ti := ci.Subscriptions[resource.ClusterType]
			if len(ti.Names)+ti.MoreNames != n {
				continue
			}
			shown = true
			if ti.MoreNames == 0 {
				t.Errorf("%s shows all %d names of a client, want a part and more_names", url, n)
			}
			for _, name := range ti.Names {
				if len(name) > 300 {
					t.Errorf("%s shows a name of %d bytes", url, len(name))
				}
			}
		}
		if !shown {
			return fmt.Errorf("%.2000s", raw)
		}
		return nil
	})
	if len(raw) > 64<<10 {
		t.Fatalf("%s is %d bytes for two clients, want under 64 KiB", url, len(raw))
	}
}

// TestNodeKeptIsOnlyWhatRulesRead: a client's Node is kept for its
// stream's life only as far as the relay reads it (before: 6 MiB nodes
// held 7.9 MiB per stream). Measured with the Go heap, around eight
// streams whose nodes carry 2 MiB of metadata no rule reads; a node id
// longer than max_name_length is refused.
func TestNodeKeptIsOnlyWhatRulesRead(t *testing.T) {
	c, _, conn := quietRelayServing(t, "noded")
	// Warm up: one stream, so the relay's lazily built parts exist.
	subscribeClusters(t, openDelta(t, conn), c)

	const streams, metadata = 8, 2 << 20
	before := xdstest.LiveHeap()
	for i := range streams {
		md, err := structpb.NewStruct(map[string]any{"padding": strings.Repeat(fmt.Sprint(i), metadata)})
		if err != nil {
			t.Fatal(err)
		}
		s := openDelta(t, conn)
		s.Send(&discoveryv3.DeltaDiscoveryRequest{Node: &corev3.Node{Id: fmt.Sprint("fat-", i), Cluster: "c", Metadata: md},
			TypeUrl: resource.ClusterType, ResourceNamesSubscribe: []string{c}})
		s.Recv()
	}
	perStream := (int64(xdstest.LiveHeap()) - int64(before)) / streams
	t.Logf("live heap per stream with a %d MiB node: %d bytes", metadata>>20, perStream)
	if perStream > metadata/4 {
		t.Fatalf("each stream holds %d bytes more live heap, want far under its %d-byte node", perStream, metadata)
	}

	s := openDelta(t, conn)
	s.Send(&discoveryv3.DeltaDiscoveryRequest{Node: &corev3.Node{Id: strings.Repeat("i", config.DefaultMaxNameLength+1)},
		TypeUrl: resource.ClusterType, ResourceNamesSubscribe: []string{c}})
	if st := s.Err(); st.Code() != codes.InvalidArgument || !strings.Contains(st.Message(), "max_name_length") {
		t.Fatalf("node id of %d bytes: stream ended with %v, want InvalidArgument naming max_name_length", config.DefaultMaxNameLength+1, st)
	}
}

// stalledPoll opens a REST poll on addr that sends its headers and
// promises a body it never sends.
func stalledPoll(t *testing.T, addr string) net.Conn {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	if _, err := io.WriteString(nc, "POST /v3/discovery:clusters HTTP/1.1\r\nHost: relay\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"); err != nil {
		t.Fatal(err)
	}
	return nc
}

// answered reports whether the relay has written anything on nc (a poll
// that stalls its body expects nothing).
func answered(t *testing.T, nc net.Conn) bool {
	t.Helper()
	if err := nc.SetReadDeadline(time.Now().Add(time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	n, _ := nc.Read(make([]byte, 1))
	return n > 0
}

// TestRESTStalledPollsAreBounded: a REST poll that sends its headers and
// stalls its body takes one of max_streams' places while it lasts, and
// downstream.rest.read_timeout ends it (before: held a goroutine and a
// socket forever, uncounted: 300 held after 12 s).
func TestRESTStalledPollsAreBounded(t *testing.T) {
	o := newGCPOrigin(t)
	c := dsCluster("polled")
	o.set(resource.ClusterType, c, cluster(c, 1))

	t.Run("counted in max_streams", func(t *testing.T) {
		r := startRelay(t, func(cfg *config.Config) {
			cfg.Log.Level = config.LogInfo
			cfg.RESTListen = "127.0.0.1:0"
			cfg.Downstream.Limits.MaxStreams = 2
			cfg.Downstream.REST.ReadTimeout = time.Minute
		}, o.addr)
		stalled := []net.Conn{stalledPoll(t, r.RESTAddr()), stalledPoll(t, r.RESTAddr())}
		body := `{"node": {"id": "poller"}, "resource_names": ["` + c + `"]}`
		// Re-poll: the stalled polls are admitted asynchronously.
		xdstest.Poll(t, "a third poll beside two stalled ones refused, naming max_streams", func() error {
			resp, err := http.Post("http://"+r.RESTAddr()+"/v3/discovery:clusters", "application/json", strings.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			raw, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusServiceUnavailable && strings.Contains(string(raw), "max_streams") {
				return nil
			}
			// A poll served while a stalled one's headers were on the way
			// took its place, and that one was refused: stall another.
			for i, nc := range stalled {
				if answered(t, nc) {
					stalled[i] = stalledPoll(t, r.RESTAddr())
				}
			}
			return fmt.Errorf("HTTP %d %s, want 503", resp.StatusCode, raw)
		})
		// Refused as it opens: no request needed (a Send could meet its end).
		s := openDelta(t, dial(t, r.XDSAddr()))
		if st := s.Err(); st.Code() != codes.ResourceExhausted || !strings.Contains(st.Message(), "max_streams") {
			t.Fatalf("an xDS stream beside two stalled polls ended with %v, want ResourceExhausted naming max_streams", st)
		}
	})

	t.Run("read timeout", func(t *testing.T) {
		r := startRelay(t, func(cfg *config.Config) {
			cfg.Log.Level = config.LogInfo
			cfg.RESTListen = "127.0.0.1:0"
			cfg.Downstream.REST.ReadTimeout = 200 * time.Millisecond
		}, o.addr)
		nc := stalledPoll(t, r.RESTAddr())
		if err := nc.SetReadDeadline(time.Now().Add(xdstest.WaitTimeout)); err != nil {
			t.Fatal(err)
		}
		// The relay answers (or not) and closes the connection.
		_, err := io.Copy(io.Discard, bufio.NewReader(nc))
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			t.Fatalf("a poll stalling its body still held after %v (read_timeout 200ms)", xdstest.WaitTimeout)
		}
	})
}
