package relay

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"
	"go.uber.org/zap/zaptest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/xds-relay/xds-relay/config"
	"github.com/xds-relay/xds-relay/internal/access"
	"github.com/xds-relay/xds-relay/internal/xdstest"
)

func TestGRPCHealthOnListener(t *testing.T) {
	r := startRelay(t, testConfig(t))
	conn := dial(t, r.XDSAddr(), insecure.NewCredentials())
	ctx, cancel := context.WithTimeout(context.Background(), xdstest.WaitTimeout)
	defer cancel()
	resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatalf("health Check: %v", err)
	}
	if got := resp.GetStatus(); got != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("health = %v, want SERVING", got)
	}
}

func TestStartFailsOnBusyPort(t *testing.T) {
	tests := []struct {
		name string
		key  string // config key named in the error
	}{
		{name: "listen", key: "listen"},
		{name: "admin", key: "admin"},
		{name: "csds_listen", key: "csds_listen"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			busy, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer busy.Close()
			c := testConfig(t)
			switch tt.key {
			case "listen":
				c.Listen = busy.Addr().String()
			case "admin":
				c.Admin = busy.Addr().String()
			case "csds_listen":
				c.CSDSListen = busy.Addr().String()
			}
			r := newRelay(t, c)
			ctx, cancel := context.WithTimeout(context.Background(), xdstest.WaitTimeout)
			defer cancel()
			err = r.Start(ctx)
			want := fmt.Sprintf("%s %s: address already in use", tt.key, busy.Addr())
			if err == nil || err.Error() != want {
				t.Fatalf("Start = %v, want %q", err, want)
			}
			if !errors.Is(err, syscall.EADDRINUSE) {
				t.Errorf("Start error %v does not wrap EADDRINUSE", err)
			}
			if got := r.XDSAddr(); got != "" {
				t.Errorf("XDSAddr after failed Start = %q, want \"\"", got)
			}
		})
	}
}

func TestCloseEndsStreamsWithoutWaitingForGrace(t *testing.T) {
	c := testConfig(t)
	c.ShutdownGracePeriod = time.Hour // Close must not wait for it
	r := startRelay(t, c)
	xdsAddr, adminAddr := r.XDSAddr(), r.AdminAddr()
	conn := dial(t, xdsAddr, insecure.NewCredentials())
	ctx, cancel := context.WithTimeout(context.Background(), xdstest.WaitTimeout)
	defer cancel()
	// A health Watch is a stream that never ends by itself, like an xDS stream.
	stream, err := healthpb.NewHealthClient(conn).Watch(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if msg, err := stream.Recv(); err != nil || msg.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("first Watch message = %v, %v; want SERVING", msg, err)
	}

	closed := make(chan error, 1)
	go func() { closed <- r.Close() }()

	// NOT_SERVING may or may not arrive before the stream ends.
	for {
		msg, err := stream.Recv()
		if err != nil {
			if st := status.Convert(err); st.Code() != codes.Unavailable || st.Message() != "relay shutting down" {
				t.Errorf("stream ended with %v, want Unavailable: relay shutting down", err)
			}
			break
		}
		if msg.GetStatus() != healthpb.HealthCheckResponse_NOT_SERVING {
			t.Errorf("Watch message during Close = %v, want NOT_SERVING", msg.GetStatus())
		}
	}
	select {
	case err := <-closed:
		if err != nil {
			t.Errorf("Close: %v", err)
		}
	case <-time.After(xdstest.WaitTimeout):
		t.Fatal("Close waited for the grace period although every stream had ended")
	}
	// Both ports are free again.
	for _, addr := range []string{xdsAddr, adminAddr} {
		l, err := net.Listen("tcp", addr)
		if err != nil {
			t.Errorf("%s still bound after Close: %v", addr, err)
			continue
		}
		l.Close()
	}
}

func TestCloseCutsStreamsThatIgnoreShutdownAfterGrace(t *testing.T) {
	c := testConfig(t)
	c.ShutdownGracePeriod = 50 * time.Millisecond
	r := newRelay(t, c)
	// A handler that ignores its context: it answers once, then blocks in
	// RecvMsg until the transport is closed.
	r.grpc.RegisterService(&grpc.ServiceDesc{
		ServiceName: "test.Stubborn",
		HandlerType: (*any)(nil),
		Streams: []grpc.StreamDesc{{
			StreamName:    "Hang",
			ServerStreams: true,
			ClientStreams: true,
			Handler: func(_ any, ss grpc.ServerStream) error {
				var m emptypb.Empty
				if err := ss.RecvMsg(&m); err != nil {
					return err
				}
				if err := ss.SendMsg(&m); err != nil {
					return err
				}
				return ss.RecvMsg(&m)
			},
		}},
	}, struct{}{})
	if err := r.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	conn := dial(t, r.XDSAddr(), insecure.NewCredentials())
	ctx, cancel := context.WithTimeout(context.Background(), xdstest.WaitTimeout)
	defer cancel()
	stream, err := conn.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}, "/test.Stubborn/Hang")
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.SendMsg(&emptypb.Empty{}); err != nil {
		t.Fatal(err)
	}
	if err := stream.RecvMsg(&emptypb.Empty{}); err != nil {
		t.Fatalf("handler did not answer: %v", err)
	}

	closed := make(chan error, 1)
	go func() { closed <- r.Close() }()
	if err := stream.RecvMsg(&emptypb.Empty{}); status.Code(err) != codes.Unavailable {
		t.Errorf("stream after the grace period = %v, want Unavailable", err)
	}
	select {
	case err := <-closed:
		if err != nil {
			t.Errorf("Close: %v", err)
		}
	case <-time.After(xdstest.WaitTimeout):
		t.Fatal("Close did not return after the grace period")
	}
}

func TestReadyz(t *testing.T) {
	c := testConfig(t)
	r := newRelay(t, c)
	var checkErr error
	r.readyCheck(func() error { return checkErr })
	readyz := func() (int, string) {
		rec := httptest.NewRecorder()
		r.admin.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "http://127.0.0.1/readyz", nil))
		return rec.Code, rec.Body.String()
	}
	steps := []struct {
		name     string
		do       func()
		wantCode int
		wantBody string
	}{
		{name: "before Start", do: func() {}, wantCode: http.StatusServiceUnavailable, wantBody: "not ready: not serving\n"},
		{name: "serving", do: func() {
			if err := r.Start(context.Background()); err != nil {
				t.Fatal(err)
			}
		}, wantCode: http.StatusOK, wantBody: "ready\n"},
		{name: "check failing", do: func() { checkErr = errors.New("upstream auth.example: no origin reachable") },
			wantCode: http.StatusServiceUnavailable, wantBody: "not ready: upstream auth.example: no origin reachable\n"},
		{name: "check passing", do: func() { checkErr = nil }, wantCode: http.StatusOK, wantBody: "ready\n"},
		{name: "after Close", do: func() {
			if err := r.Close(); err != nil {
				t.Fatal(err)
			}
		}, wantCode: http.StatusServiceUnavailable, wantBody: "not ready: not serving\n"},
	}
	for _, s := range steps {
		s.do()
		if code, body := readyz(); code != s.wantCode || body != s.wantBody {
			t.Errorf("%s: /readyz = %d %q, want %d %q", s.name, code, body, s.wantCode, s.wantBody)
		}
	}
}

func TestComponentSeams(t *testing.T) {
	r := newRelay(t, testConfig(t))
	var order []string // appended only by goroutines Close waits for, then read after Close
	runStopped := make(chan struct{})
	r.goRun(func(ctx context.Context) error {
		<-ctx.Done()
		close(runStopped)
		return ctx.Err()
	})
	r.onStop(func() {
		select {
		case <-runStopped:
			order = append(order, "second hook after run ended")
		default:
			order = append(order, "second hook before run ended")
		}
	})
	r.onStop(func() { order = append(order, "last added hook first") })
	if err := r.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	want := []string{"last added hook first", "second hook after run ended"}
	if fmt.Sprint(order) != fmt.Sprint(want) {
		t.Errorf("stop hooks ran as %q, want %q", order, want)
	}
	select {
	case err := <-r.Failed():
		t.Errorf("Failed() = %v after a clean Close", err)
	default:
	}
}

func TestComponentFailureIsReported(t *testing.T) {
	r := newRelay(t, testConfig(t))
	boom := errors.New("origin config unusable")
	r.goRun(func(ctx context.Context) error { return boom })
	if err := r.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-r.Failed():
		if !errors.Is(err, boom) {
			t.Errorf("Failed() = %v, want it to wrap %v", err, boom)
		}
	case <-time.After(xdstest.WaitTimeout):
		t.Fatal("component failure not reported")
	}
}

func TestLifecycleErrors(t *testing.T) {
	r := newRelay(t, testConfig(t))
	if err := r.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := r.Start(context.Background()); !errors.Is(err, ErrStarted) {
		t.Errorf("second Start = %v, want ErrStarted", err)
	}
	if err := r.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if err := r.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if err := r.Start(context.Background()); !errors.Is(err, ErrClosed) {
		t.Errorf("Start after Close = %v, want ErrClosed", err)
	}
	unstarted := newRelay(t, testConfig(t))
	if err := unstarted.Close(); err != nil {
		t.Errorf("Close before Start: %v", err)
	}
}

func TestConcurrentCloseWaitsForTheFirst(t *testing.T) {
	c := testConfig(t)
	c.ShutdownGracePeriod = time.Hour
	r := newRelay(t, c)
	stopHook := make(chan struct{})
	hookDone := make(chan struct{})
	r.onStop(func() {
		<-stopHook // the first Close is held here
		close(hookDone)
	})
	if err := r.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	first := make(chan error, 1)
	go func() { first <- r.Close() }()
	second := make(chan error, 1)
	go func() { second <- r.Close() }()
	// Whichever call came second must not return while the first is held.
	select {
	case err := <-first:
		t.Fatalf("a Close returned (%v) while the shutdown was still running", err)
	case err := <-second:
		t.Fatalf("a Close returned (%v) while the shutdown was still running", err)
	case <-time.After(xdstest.QuietPeriod):
	}
	close(stopHook)
	for _, ch := range []chan error{first, second} {
		select {
		case err := <-ch:
			if err != nil {
				t.Errorf("Close: %v", err)
			}
		case <-time.After(xdstest.WaitTimeout):
			t.Fatal("Close did not return")
		}
	}
	select {
	case <-hookDone:
	default:
		t.Error("Close returned before the stop hooks ran")
	}
}

func TestDownstreamTLS(t *testing.T) {
	p := newPKI(t)
	tests := []struct {
		name    string
		mutual  bool // server requires client certificates
		creds   credentials.TransportCredentials
		wantErr bool
	}{
		{name: "TLS", creds: credentials.NewTLS(&tls.Config{RootCAs: p.pool})},
		{name: "plaintext client refused", creds: insecure.NewCredentials(), wantErr: true},
		{name: "mutual TLS", mutual: true, creds: credentials.NewTLS(&tls.Config{RootCAs: p.pool, Certificates: []tls.Certificate{p.client}})},
		{name: "mutual TLS without client cert refused", mutual: true, creds: credentials.NewTLS(&tls.Config{RootCAs: p.pool}), wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := testConfig(t)
			c.Downstream.TLS.CertFile, c.Downstream.TLS.KeyFile = p.serverCert, p.serverKey
			if tt.mutual {
				c.Downstream.TLS.CAFile = p.caFile
			}
			if err := c.Validate(); err != nil {
				t.Fatal(err)
			}
			r := startRelay(t, c)
			conn := dial(t, r.XDSAddr(), tt.creds)
			ctx, cancel := context.WithTimeout(context.Background(), xdstest.WaitTimeout)
			defer cancel()
			resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
			if tt.wantErr {
				if status.Code(err) != codes.Unavailable {
					t.Errorf("Check = %v, %v; want Unavailable", resp, err)
				}
				return
			}
			if err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
				t.Errorf("Check = %v, %v; want SERVING", resp, err)
			}
		})
	}
}

func TestNewRejectsUnusableTLSFiles(t *testing.T) {
	p := newPKI(t)
	c := testConfig(t)
	// Files exist (so the config validates) but the key does not match.
	c.Downstream.TLS.CertFile, c.Downstream.TLS.KeyFile = p.serverCert, p.clientKey
	_, err := New(c, nil, nil)
	if err == nil || !strings.Contains(err.Error(), "downstream.tls: load cert_file "+p.serverCert) {
		t.Errorf("New = %v, want a cert_file load error", err)
	}
}

// dial connects a real gRPC client; the test's cleanup closes it.
func dial(t *testing.T, addr string, creds credentials.TransportCredentials) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

func TestDownstreamCertificateRotation(t *testing.T) {
	before, after := newPKI(t), newPKI(t) // two CAs: a client trusts one or the other
	c := testConfig(t)
	c.Downstream.TLS.CertFile, c.Downstream.TLS.KeyFile = before.serverCert, before.serverKey
	r := startRelay(t, c)

	check := func(p *pki) error {
		conn := dial(t, r.XDSAddr(), credentials.NewTLS(&tls.Config{RootCAs: p.pool}))
		defer conn.Close()
		ctx, cancel := context.WithTimeout(context.Background(), xdstest.WaitTimeout)
		defer cancel()
		_, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
		return err
	}
	if err := check(before); err != nil {
		t.Fatalf("before rotation: %v", err)
	}
	// Rotate in place, as cert-manager or a secret volume does; the new
	// files get a later mtime.
	later := time.Now().Add(time.Minute)
	for src, dst := range map[string]string{after.serverCert: before.serverCert, after.serverKey: before.serverKey} {
		data, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, data, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(dst, later, later); err != nil {
			t.Fatal(err)
		}
	}
	if err := check(after); err != nil {
		t.Errorf("new connection after rotation, trusting the new CA: %v", err)
	}
	if err := check(before); status.Code(err) != codes.Unavailable {
		t.Errorf("new connection after rotation, trusting only the old CA = %v, want Unavailable", err)
	}
}

func TestDownstreamMessageSizeLimit(t *testing.T) {
	c := testConfig(t)
	c.Downstream.MaxRecvMsgSize = 1024
	r := startRelay(t, c)
	conn := dial(t, r.XDSAddr(), insecure.NewCredentials())
	tests := []struct {
		name     string
		size     int
		wantCode codes.Code
	}{
		{name: "under the limit", size: 512, wantCode: codes.NotFound}, // an unknown service: the request was read
		{name: "over the limit", size: 2048, wantCode: codes.ResourceExhausted},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), xdstest.WaitTimeout)
			defer cancel()
			_, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: strings.Repeat("s", tt.size)})
			if got := status.Code(err); got != tt.wantCode {
				t.Errorf("Check with a %d-byte request = %v, want %v", tt.size, err, tt.wantCode)
			}
		})
	}
}

// TestDownstreamStreamsPerConnection: downstream.limits.max_streams_per_connection
// is the connection's MAX_CONCURRENT_STREAMS: a stream past it waits (the
// client holds it back) until another on the connection ends.
func TestDownstreamStreamsPerConnection(t *testing.T) {
	c := testConfig(t)
	c.Downstream.Limits.MaxStreamsPerConnection = 2
	r := startRelay(t, c)
	conn := dial(t, r.XDSAddr(), insecure.NewCredentials())
	health := healthpb.NewHealthClient(conn)
	watch := func(ctx context.Context) <-chan error {
		got := make(chan error, 1)
		go func() {
			st, err := health.Watch(ctx, &healthpb.HealthCheckRequest{})
			if err == nil {
				_, err = st.Recv()
			}
			got <- err
		}()
		return got
	}
	first, cancelFirst := context.WithCancel(context.Background())
	defer cancelFirst()
	second, cancelSecond := context.WithCancel(context.Background())
	defer cancelSecond()
	for i, ctx := range []context.Context{first, second} {
		select {
		case err := <-watch(ctx):
			if err != nil {
				t.Fatalf("stream %d: %v", i+1, err)
			}
		case <-time.After(xdstest.WaitTimeout):
			t.Fatalf("stream %d not served", i+1)
		}
	}
	third, cancelThird := context.WithCancel(context.Background())
	defer cancelThird()
	got := watch(third)
	select {
	case err := <-got:
		t.Fatalf("a third stream on the connection was served (%v), want it held back", err)
	case <-time.After(xdstest.QuietPeriod):
	}
	cancelFirst()
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("third stream after one ended: %v", err)
		}
	case <-time.After(xdstest.WaitTimeout):
		t.Fatal("third stream not served after one ended")
	}
}

// TestNewFailureReleases: New failing part way lets go of what it built so
// far through the one teardown path (onStop), leaving no goroutine behind:
// once at the upstream credentials (the cache built), once at the access
// policy (cache and upstream built).
func TestNewFailureReleases(t *testing.T) {
	garbage := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(garbage, []byte("not PEM"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		edit    func(c *config.Config)
		wantErr string
	}{
		{name: "upstream CA does not load", edit: func(c *config.Config) {
			c.Upstream.TLS = config.ClientTLS{Enabled: true, CAFile: garbage}
		}, wantErr: "no PEM certificates"},
		{name: "access rule without a matcher", edit: func(c *config.Config) {
			c.Authorities[0].Allow = []access.AllowEntry{{}}
		}, wantErr: "access:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
			c := testConfig(t)
			tt.edit(c)
			r, err := New(c, zaptest.NewLogger(t), prometheus.NewRegistry())
			if err == nil {
				_ = r.Close()
				t.Fatalf("New succeeded, want an error containing %q", tt.wantErr)
			}
			if !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("New: %v, want an error containing %q", err, tt.wantErr)
			}
		})
	}
}
