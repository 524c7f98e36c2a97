package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	httpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	"google.golang.org/protobuf/encoding/protojson"
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
