package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	httpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/xds-relay/xds-relay/internal/xdstest"
)

// The demo writes a complete Envoy bootstrap: it parses strictly as an
// envoy.config.bootstrap.v3.Bootstrap, passes its validation rules, and asks
// the relay for LDS and CDS over ADS through an HTTP/2 cluster.
func TestDemoEnvoyBootstrap(t *testing.T) {
	for _, tc := range []struct{ listen, wantHost string }{
		{"127.0.0.1:18000", "127.0.0.1"},
		{":18000", "127.0.0.1"},
		{"0.0.0.0:18000", "127.0.0.1"},
		{"[::1]:18000", "::1"},
	} {
		t.Run(tc.listen, func(t *testing.T) {
			dir := t.TempDir()
			var guide bytes.Buffer
			if err := printDemoGuide(&guide, dir, tc.listen, "127.0.0.1:18001", demoRESTListen); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(dir, demoEnvoyBootstrap)
			if !strings.Contains(guide.String(), "envoy -c "+path) {
				t.Errorf("guide does not say how to run Envoy with %s:\n%s", path, guide.String())
			}
			raw, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			b := &bootstrapv3.Bootstrap{}
			if err := protojson.Unmarshal(raw, b); err != nil {
				t.Fatalf("%s is not a Bootstrap: %v\n%s", path, err, raw)
			}
			if err := b.ValidateAll(); err != nil {
				t.Fatalf("Bootstrap does not validate: %v", err)
			}
			dr := b.GetDynamicResources()
			if dr.GetLdsConfig().GetAds() == nil || dr.GetCdsConfig().GetAds() == nil {
				t.Errorf("lds_config / cds_config are not over ADS: %v", dr)
			}
			ads := dr.GetAdsConfig()
			if ads.GetApiType().String() != "GRPC" || len(ads.GetGrpcServices()) != 1 {
				t.Fatalf("ads_config: %v", ads)
			}
			if b.GetNode().GetId() == "" || b.GetNode().GetCluster() == "" {
				t.Errorf("node %v: want an id and a cluster (plain names are grouped by it)", b.GetNode())
			}
			clusters := b.GetStaticResources().GetClusters()
			if len(clusters) != 1 || clusters[0].GetName() != ads.GetGrpcServices()[0].GetEnvoyGrpc().GetClusterName() {
				t.Fatalf("static clusters %v: want the one ads_config names", clusters)
			}
			opts := &httpv3.HttpProtocolOptions{}
			if err := clusters[0].GetTypedExtensionProtocolOptions()["envoy.extensions.upstreams.http.v3.HttpProtocolOptions"].UnmarshalTo(opts); err != nil || opts.GetExplicitHttpConfig().GetHttp2ProtocolOptions() == nil {
				t.Errorf("relay cluster does not speak HTTP/2: %v %v", opts, err)
			}
			sa := clusters[0].GetLoadAssignment().GetEndpoints()[0].GetLbEndpoints()[0].GetEndpoint().GetAddress().GetSocketAddress()
			if sa.GetAddress() != tc.wantHost || sa.GetPortValue() != 18000 {
				t.Errorf("relay address %s:%d, want %s:18000", sa.GetAddress(), sa.GetPortValue(), tc.wantHost)
			}
		})
	}
}

// The plain-name grpc-go bootstrap has no xdstp template, so xds:///demo asks
// for the plain listener "demo"; the xdstp one keeps its template.
func TestDemoGRPCBootstraps(t *testing.T) {
	dir := t.TempDir()
	if err := printDemoGuide(&bytes.Buffer{}, dir, "127.0.0.1:18000", "127.0.0.1:18001", demoRESTListen); err != nil {
		t.Fatal(err)
	}
	for file, wantTemplate := range map[string]bool{demoGRPCBootstrap: true, demoGRPCPlainBootstrap: false} {
		raw, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil {
			t.Fatal(err)
		}
		var b map[string]any
		if err := json.Unmarshal(raw, &b); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if _, has := b["client_default_listener_resource_name_template"]; has != wantTemplate {
			t.Errorf("%s: listener template present = %v, want %v", file, has, wantTemplate)
		}
	}
}

// TestDemoBusyPort: with one of its ports taken, the demo binds before it
// prints anything, so its guide never shows (it would be of a relay that
// is not running), and it exits 1 naming the listener, its address and the
// flag that moves it.
func TestDemoBusyPort(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	for _, tc := range []struct{ flag, key string }{{"--admin", "admin"}, {"--listen", "listen"}, {"--rest-listen", "rest_listen"}} {
		t.Run(tc.key, func(t *testing.T) {
			args := map[string]string{"--listen": "127.0.0.1:0", "--admin": "127.0.0.1:0", "--rest-listen": "127.0.0.1:0"}
			args[tc.flag] = busy.Addr().String()
			cmd := exec.Command(relayBinary(t), "demo", "--listen", args["--listen"], "--admin", args["--admin"], "--rest-listen", args["--rest-listen"])
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			select {
			case err = <-done:
			case <-time.After(xdstest.WaitTimeout):
				_ = cmd.Process.Kill()
				<-done
				t.Fatalf("demo still running with %s busy\nstdout:\n%s\nstderr:\n%s", tc.key, &stdout, &stderr)
			}
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != exitFail {
				t.Errorf("exit: %v, want code %d", err, exitFail)
			}
			if stdout.Len() != 0 {
				t.Errorf("the guide was printed for a relay that did not start:\n%s", &stdout)
			}
			want := fmt.Sprintf("xds-relay demo: %s %s: address already in use: another process (another xds-relay?) listens there; stop it, or give the demo another address: xds-relay demo %s 127.0.0.1:PORT\n",
				tc.key, busy.Addr(), tc.flag)
			if !strings.HasSuffix(stderr.String(), want) {
				t.Errorf("stderr ends:\n%s\nwant:\n%s", lastLine(stderr.String()), want)
			}
		})
	}
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return lines[len(lines)-1]
}
