package downstream

import (
	"fmt"
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/xds-relay/xds-relay/config"
	"github.com/xds-relay/xds-relay/internal/xdstest"
)

// BenchmarkRetainedAtDefaultLimits measures the most a stream can make the
// relay keep at the default limits (retainedBytes, reported as
// retained-B/stream; the live heap's growth as heap-B/stream), on a stream
// that uses each to the full: max_names_per_stream names of max_name_length bytes,
// spelled non-canonically (so the relay keeps two spellings), each also
// declared with a version of max_version_length bytes, over a second type
// too, behind a Node of 4 MiB of metadata. docs/limits.md quotes the
// figure; retainedBound(testLimits) bounds it. A benchmark, run once by
// make test without the race detector: it measures, and takes seconds.
func BenchmarkRetainedAtDefaultLimits(b *testing.B) {
	for range b.N {
		retainedAtDefaultLimits(b)
	}
}

func retainedAtDefaultLimits(b *testing.B) {
	e := newEnv(b, 0, grpc.MaxRecvMsgSize(int(config.DefaultDownstreamMaxRecv))) // as the relay receives
	l := testLimits
	md, err := structpb.NewStruct(map[string]any{"unread": strings.Repeat("m", 2<<20)})
	if err != nil {
		b.Fatal(err)
	}
	node := &corev3.Node{Id: strings.Repeat("i", l.MaxNameLength), Cluster: strings.Repeat("c", l.MaxNameLength), Metadata: md}
	big, err := grpc.NewClient(e.conn.Target(), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(int(config.DefaultDownstreamMaxSend))))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { big.Close() })
	e.conn = big // responses name every declared name
	c := openFuzzClient(b, e, true)
	before := xdstest.LiveHeap()
	sent := 0
	for ti, typ := range []string{edsType, ldsType} {
		n := l.MaxNamesPerStream / 2
		names := make([]string, n)
		versions := make(map[string]string, n)
		for i := range names {
			prefix := xdstp(typ, fmt.Sprintf("%d-%d-", ti, i))
			names[i] = prefix + strings.Repeat("x", l.MaxNameLength-len(prefix)-8) + "?b=1&a=2"
			versions[names[i]] = strings.Repeat("v", l.MaxVersionLength)
		}
		// The first request declares every name; the rest subscribe them
		// in parts, each under the request size.
		for first, part := true, 1000; len(names) > 0; first, part = false, 2000 {
			req := &discoveryv3.DeltaDiscoveryRequest{Node: node, TypeUrl: typ, ResourceNamesSubscribe: names[:part]}
			if first {
				req.InitialResourceVersions = versions
			}
			if err := c.sendD(req); err != nil {
				b.Fatal(err)
			}
			names = names[part:]
			sent++
		}
		node = nil
	}
	n := e.measureRetainedBytes(b, c, sent, 3*xdstest.WaitTimeout) // 40 MB of requests, 20 MB of responses
	heap := int64(xdstest.LiveHeap()) - int64(before)              // the relay's and this test's (client) side: a cross-check only
	b.ReportMetric(float64(n), "retained-B/stream")
	b.ReportMetric(float64(heap), "heap-B/stream")
	if n == 0 {
		b.Fatal("the stream ended")
	}
	if n > retainedBound(l) {
		b.Fatalf("one stream keeps %d bytes, over the bound of %d", n, retainedBound(l))
	}
}
