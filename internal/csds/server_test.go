package csds

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"slices"
	"testing"
	"time"

	adminv3 "github.com/envoyproxy/go-control-plane/envoy/admin/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	statusv3 "github.com/envoyproxy/go-control-plane/envoy/service/status/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/xds-relay/xds-relay/internal/downstream"
	"github.com/xds-relay/xds-relay/internal/xdstest"
)

const clusterType = "type.googleapis.com/envoy.config.cluster.v3.Cluster"

// fakeSource reports fixed clients, selecting and bounding them by clients
// as downstream.Server does.
type fakeSource struct{ clients []downstream.ClientStatus }

func (f fakeSource) ConfigStatus(q downstream.StatusQuery) downstream.StatusReport {
	var rep downstream.StatusReport
	for _, c := range f.clients {
		if q.Match != nil && !q.Match(c.Node) {
			continue
		}
		rep.Matched++
		if len(rep.Clients) < q.MaxClients {
			rep.Clients = append(rep.Clients, c)
		}
	}
	return rep
}

var arrived = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func fleet() []downstream.ClientStatus {
	return []downstream.ClientStatus{
		{ID: 1, Variant: "delta", Stream: "ads", Node: &corev3.Node{Id: "acker", Cluster: "c"}, Resources: []downstream.ResourceStatus{
			{TypeURL: clusterType, Name: "a", Version: "v1", Updated: arrived, State: downstream.ResourceAcked},
			{TypeURL: clusterType, Name: "b", Version: "v2", Updated: arrived, State: downstream.ResourceAcked, Pending: true},
			{TypeURL: clusterType, Name: "gone", State: downstream.ResourceAcked, Absent: true},
			{TypeURL: clusterType, Name: "later", State: downstream.ResourceRequested},
		}},
		{ID: 2, Variant: "sotw", Stream: "ads", Node: &corev3.Node{Id: "nacker", Cluster: "c"}, Resources: []downstream.ResourceStatus{
			{TypeURL: clusterType, Name: "a", Version: "3", Updated: arrived, State: downstream.ResourceNacked,
				Nack: &downstream.NackState{At: arrived.Add(time.Second), Message: "bad cluster"}},
			{TypeURL: clusterType, Name: "c", Version: "4", Updated: arrived, State: downstream.ResourceSent},
		}},
	}
}

func wantFleet() []*statusv3.ClientConfig {
	ts := timestamppb.New(arrived)
	return []*statusv3.ClientConfig{
		{Node: &corev3.Node{Id: "acker", Cluster: "c"}, GenericXdsConfigs: []*statusv3.ClientConfig_GenericXdsConfig{
			{TypeUrl: clusterType, Name: "a", VersionInfo: "v1", LastUpdated: ts, ConfigStatus: statusv3.ConfigStatus_SYNCED, ClientStatus: adminv3.ClientResourceStatus_ACKED},
			{TypeUrl: clusterType, Name: "b", VersionInfo: "v2", LastUpdated: ts, ConfigStatus: statusv3.ConfigStatus_STALE, ClientStatus: adminv3.ClientResourceStatus_ACKED},
			{TypeUrl: clusterType, Name: "gone", ConfigStatus: statusv3.ConfigStatus_SYNCED, ClientStatus: adminv3.ClientResourceStatus_DOES_NOT_EXIST},
			{TypeUrl: clusterType, Name: "later", ConfigStatus: statusv3.ConfigStatus_NOT_SENT, ClientStatus: adminv3.ClientResourceStatus_REQUESTED},
		}},
		{Node: &corev3.Node{Id: "nacker", Cluster: "c"}, GenericXdsConfigs: []*statusv3.ClientConfig_GenericXdsConfig{
			{TypeUrl: clusterType, Name: "a", VersionInfo: "3", LastUpdated: ts, ConfigStatus: statusv3.ConfigStatus_ERROR, ClientStatus: adminv3.ClientResourceStatus_NACKED,
				ErrorState: &adminv3.UpdateFailureState{LastUpdateAttempt: timestamppb.New(arrived.Add(time.Second)), Details: "bad cluster", VersionInfo: "3"}},
			{TypeUrl: clusterType, Name: "c", VersionInfo: "4", LastUpdated: ts, ConfigStatus: statusv3.ConfigStatus_STALE, ClientStatus: adminv3.ClientResourceStatus_UNKNOWN},
		}},
	}
}

// start serves src on a listener bound on 127.0.0.1:0 (as the relay
// binds csds_listen) and returns a client of it.
func start(t *testing.T, src Source, maxClients int) (*Server, statusv3.ClientStatusDiscoveryServiceClient) {
	t.Helper()
	s, err := New(Options{Source: src, MaxClients: maxClients})
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Serve(lis); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close(context.Background()) })
	conn, err := grpc.NewClient(s.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return s, statusv3.NewClientStatusDiscoveryServiceClient(conn)
}

func TestFetch(t *testing.T) {
	_, c := start(t, fakeSource{fleet()}, 0)
	ctx, cancel := context.WithTimeout(context.Background(), xdstest.WaitTimeout)
	defer cancel()
	var hdr metadata.MD
	resp, err := c.FetchClientStatus(ctx, &statusv3.ClientStatusRequest{}, grpc.Header(&hdr))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(wantFleet(), resp.GetConfig(), protocmp.Transform()); diff != "" {
		t.Errorf("configs (-want +got):\n%s", diff)
	}
	if got := hdr.Get(TruncatedHeader); len(got) != 0 {
		t.Errorf("truncation note %q on a whole response", got)
	}

	resp, err = c.FetchClientStatus(ctx, &statusv3.ClientStatusRequest{NodeMatchers: []*matcherv3.NodeMatcher{idMatcher(exact("nacker"))}})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(wantFleet()[1:], resp.GetConfig(), protocmp.Transform()); diff != "" {
		t.Errorf("configs of node_id nacker (-want +got):\n%s", diff)
	}

	_, err = c.FetchClientStatus(ctx, &statusv3.ClientStatusRequest{NodeMatchers: []*matcherv3.NodeMatcher{idMatcher(&matcherv3.StringMatcher{})}})
	if status.Code(err) != codes.InvalidArgument {
		t.Errorf("a matcher without pattern: %v, want InvalidArgument", err)
	}
}

func TestFetchTruncated(t *testing.T) {
	_, c := start(t, fakeSource{fleet()}, 1)
	ctx, cancel := context.WithTimeout(context.Background(), xdstest.WaitTimeout)
	defer cancel()
	var hdr metadata.MD
	resp, err := c.FetchClientStatus(ctx, &statusv3.ClientStatusRequest{}, grpc.Header(&hdr))
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.GetConfig()) != 1 {
		t.Errorf("%d configs, want 1 (the bound)", len(resp.GetConfig()))
	}
	want := []string{"1 of 2 clients; 0 resource entries left out (at most 1 clients, 20000 resource entries and about 3145728 bytes per response)"}
	if diff := cmp.Diff(want, hdr.Get(TruncatedHeader)); diff != "" {
		t.Errorf("truncation note (-want +got):\n%s", diff)
	}
}

func TestStream(t *testing.T) {
	s, c := start(t, fakeSource{fleet()}, 0)
	ctx, cancel := context.WithTimeout(context.Background(), xdstest.WaitTimeout)
	defer cancel()
	st, err := c.StreamClientStatus(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		req  *statusv3.ClientStatusRequest
		want []*statusv3.ClientConfig
	}{
		{&statusv3.ClientStatusRequest{}, wantFleet()},
		{&statusv3.ClientStatusRequest{Node: &corev3.Node{Id: "acker"}}, wantFleet()[:1]},
		{&statusv3.ClientStatusRequest{Node: &corev3.Node{Id: "nobody"}}, nil},
	} {
		if err := st.Send(tc.req); err != nil {
			t.Fatal(err)
		}
		resp, err := st.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(tc.want, resp.GetConfig(), protocmp.Transform(), cmp.Comparer(func(a, b []*statusv3.ClientConfig) bool {
			return len(a) == 0 && len(b) == 0 || cmp.Equal(a, b, protocmp.Transform())
		})); diff != "" {
			t.Errorf("request %v: configs (-want +got):\n%s", tc.req, diff)
		}
	}
	// A bad request ends the stream with InvalidArgument.
	if err := st.Send(&statusv3.ClientStatusRequest{NodeMatchers: []*matcherv3.NodeMatcher{idMatcher(&matcherv3.StringMatcher{})}}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Recv(); status.Code(err) != codes.InvalidArgument {
		t.Errorf("stream after a bad request: %v, want InvalidArgument", err)
	}

	// Close ends an open stream at once with Unavailable.
	st2, err := c.StreamClientStatus(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := st2.Send(&statusv3.ClientStatusRequest{}); err != nil {
		t.Fatal(err)
	}
	if _, err := st2.Recv(); err != nil {
		t.Fatal(err)
	}
	s.Close(ctx)
	if _, err := st2.Recv(); status.Code(err) != codes.Unavailable {
		t.Errorf("open stream on Close: %v, want Unavailable", err)
	}
}

// blockedSource holds every report until release is closed.
type blockedSource struct {
	entered chan struct{}
	release chan struct{}
}

func (b blockedSource) ConfigStatus(downstream.StatusQuery) downstream.StatusReport {
	b.entered <- struct{}{}
	<-b.release
	return downstream.StatusReport{}
}

// TestBuildsBounded: at most maxBuilding reports are built at once; a
// caller past them waits, and gives up at its deadline.
func TestBuildsBounded(t *testing.T) {
	src := blockedSource{entered: make(chan struct{}, maxBuilding+1), release: make(chan struct{})}
	_, c := start(t, src, 0)
	ctx, cancel := context.WithTimeout(context.Background(), xdstest.WaitTimeout)
	defer cancel()
	errs := make(chan error, maxBuilding)
	for range maxBuilding {
		go func() {
			_, err := c.FetchClientStatus(ctx, &statusv3.ClientStatusRequest{})
			errs <- err
		}()
	}
	for range maxBuilding {
		select {
		case <-src.entered:
		case <-ctx.Done():
			t.Fatal("the first reports never started")
		}
	}
	short, stop := context.WithTimeout(ctx, xdstest.QuietPeriod)
	defer stop()
	if _, err := c.FetchClientStatus(short, &statusv3.ClientStatusRequest{}); status.Code(err) != codes.DeadlineExceeded {
		t.Errorf("a call past the building bound: %v, want DeadlineExceeded", err)
	}
	select {
	case <-src.entered:
		t.Error("a report started past the building bound")
	default:
	}
	close(src.release)
	for range maxBuilding {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}

func TestDebugHandler(t *testing.T) {
	s, err := New(Options{Source: fakeSource{fleet()}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	// As DebugPath?node_id=nacker shows it (the relay serves Debug as JSON).
	sum, note, err := s.Debug(context.Background(), "nacker")
	if err != nil || note != "" {
		t.Fatalf("Debug: note %q, %v", note, err)
	}
	b, err := json.Marshal(sum)
	if err != nil {
		t.Fatal(err)
	}
	var got Summary
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	want := Summary{Matched: 1, MaxClients: DefaultMaxClients, MaxResources: DefaultMaxResources, Clients: []ClientSummary{
		{ID: 2, NodeID: "nacker", Cluster: "c", Variant: "sotw", Stream: "ads", Types: []TypeSummary{
			{Type: "envoy.config.cluster.v3.Cluster", Nacked: 1, Sent: 1, LastNack: "bad cluster"}}},
	}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("/debug/csds (-want +got):\n%s", diff)
	}
}

func TestPage(t *testing.T) {
	s, err := New(Options{Source: fakeSource{fleet()}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	cl := "envoy.config.cluster.v3.Cluster"
	want := Page{Matched: 2, Rows: []PageRow{
		{Client: "acker", Variant: "delta", Types: []string{cl}, Synced: map[string]int{cl: 2}, Nacked: map[string]int{}, Pending: map[string]int{cl: 2}},
		{Client: "nacker", Variant: "sotw", Types: []string{cl}, Synced: map[string]int{}, Nacked: map[string]int{cl: 1}, Pending: map[string]int{cl: 1}},
	}}
	if diff := cmp.Diff(want, s.Page()); diff != "" {
		t.Errorf("page (-want +got):\n%s", diff)
	}
}

// TestStreamTruncated: a stream's cut answers are noted in its header
// (the first answer's) and its trailer (every cut answer's).
func TestStreamTruncated(t *testing.T) {
	_, c := start(t, fakeSource{fleet()}, 1)
	ctx, cancel := context.WithTimeout(context.Background(), xdstest.WaitTimeout)
	defer cancel()
	st, err := c.StreamClientStatus(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, req := range []*statusv3.ClientStatusRequest{{}, {Node: &corev3.Node{Id: "acker"}}, {}} {
		if err := st.Send(req); err != nil {
			t.Fatal(err)
		}
		if _, err := st.Recv(); err != nil {
			t.Fatal(err)
		}
	}
	hdr, err := st.Header()
	if err != nil {
		t.Fatal(err)
	}
	note := "1 of 2 clients; 0 resource entries left out (at most 1 clients, 20000 resource entries and about 3145728 bytes per response)"
	if diff := cmp.Diff([]string{note}, hdr.Get(TruncatedHeader)); diff != "" {
		t.Errorf("header note (-want +got):\n%s", diff)
	}
	if err := st.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Recv(); err == nil {
		t.Fatal("stream not ended after CloseSend")
	}
	if diff := cmp.Diff([]string{note, note}, st.Trailer().Get(TruncatedHeader)); diff != "" {
		t.Errorf("trailer notes (-want +got):\n%s", diff)
	}
}

// TestReflection: the CSDS listener serves gRPC server reflection, so a
// generic client (grpcurl) finds the service by name and gets its schema
// with every file it depends on: a grpc reflection client lists the
// service, and the descriptors it is sent build a complete file set.
func TestReflection(t *testing.T) {
	s, _ := start(t, fakeSource{fleet()}, 0)
	conn, err := grpc.NewClient(s.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), xdstest.WaitTimeout)
	defer cancel()
	stream, err := reflectionpb.NewServerReflectionClient(conn).ServerReflectionInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ask := func(req *reflectionpb.ServerReflectionRequest) *reflectionpb.ServerReflectionResponse {
		t.Helper()
		if err := stream.Send(req); err != nil {
			t.Fatal(err)
		}
		resp, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if e := resp.GetErrorResponse(); e != nil {
			t.Fatalf("reflection error: %v", e)
		}
		return resp
	}
	const service = "envoy.service.status.v3.ClientStatusDiscoveryService"
	list := ask(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}})
	var names []string
	for _, s := range list.GetListServicesResponse().GetService() {
		names = append(names, s.GetName())
	}
	if !slices.Contains(names, service) {
		t.Fatalf("services listed: %v, want %s among them", names, service)
	}
	files := ask(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_FileContainingSymbol{FileContainingSymbol: service}})
	set := &descriptorpb.FileDescriptorSet{}
	for _, b := range files.GetFileDescriptorResponse().GetFileDescriptorProto() {
		fd := &descriptorpb.FileDescriptorProto{}
		if err := proto.Unmarshal(b, fd); err != nil {
			t.Fatal(err)
		}
		set.File = append(set.File, fd)
	}
	reg, err := protodesc.NewFiles(set)
	if err != nil {
		t.Fatalf("the descriptors sent do not build a file set (a client could not call the service): %v", err)
	}
	d, err := reg.FindDescriptorByName(service)
	if err != nil {
		t.Fatal(err)
	}
	if m := d.(protoreflect.ServiceDescriptor).Methods().ByName("FetchClientStatus"); m == nil {
		t.Errorf("%s has no FetchClientStatus in the descriptors sent", service)
	}
}

// TestServeAfterClose: a listener handed over after Close (the relay's
// Start racing its Close) is refused and closed, so its address is free.
func TestServeAfterClose(t *testing.T) {
	s, err := New(Options{Source: fakeSource{fleet()}})
	if err != nil {
		t.Fatal(err)
	}
	s.Close(context.Background())
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Serve(lis); !errors.Is(err, ErrClosed) {
		t.Errorf("Serve after Close = %v, want ErrClosed", err)
	}
	again, err := net.Listen("tcp", lis.Addr().String())
	if err != nil {
		t.Fatalf("the refused listener %s is still bound: %v", lis.Addr(), err)
	}
	_ = again.Close()
	if got := s.Addr(); got != "" {
		t.Errorf("Addr after a refused Serve = %q, want \"\"", got)
	}
}
