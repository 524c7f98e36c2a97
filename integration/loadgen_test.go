package integration

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/proto"

	"github.com/xds-relay/xds-relay/internal/loadgen"
	"github.com/xds-relay/xds-relay/internal/xdstest"
)

// runFleet runs a load generator fleet on cfg until the test ends; the
// returned func stops it early and reports Run's error.
func runFleet(t *testing.T, cfg loadgen.Config) (*loadgen.Fleet, func() error) {
	t.Helper()
	f, err := loadgen.New(cfg)
	if err != nil {
		t.Fatalf("loadgen.New: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.Run(ctx) }()
	var stopped bool
	var runErr error
	stop := func() error {
		if !stopped {
			stopped = true
			cancel()
			runErr = <-done
		}
		return runErr
	}
	t.Cleanup(func() { _ = stop() })
	return f, stop
}

// waitSynced waits until every client of f holds what it asked for.
func waitSynced(t *testing.T, f *loadgen.Fleet, what string) {
	t.Helper()
	xdstest.Poll(t, what, func() error {
		if st := f.Status(); st.Synced < int64(st.Clients) {
			return fmt.Errorf("%d of %d synced; lacking %v", st.Synced, st.Clients, f.Summary().Lacks)
		}
		return nil
	})
}

// waitFleetHolds waits until every client of f holds a version of the resource
// ("eds name"), and returns the summary then.
func waitFleetHolds(t *testing.T, f *loadgen.Fleet, name string) loadgen.Summary {
	t.Helper()
	var s loadgen.Summary
	xdstest.Poll(t, "every client holds "+name, func() error {
		s = f.Summary()
		i := slices.IndexFunc(s.Versions, func(v loadgen.ClientVersion) bool { return v.Type+" "+v.Name == name })
		if i < 0 || s.Versions[i].Clients != s.Clients {
			return fmt.Errorf("versions %+v", s.Versions)
		}
		return nil
	})
	return s
}

// TestLoadgenEnvoyFleet: the load generator as a fleet of Envoys, against
// a go-control-plane origin directly and through the relay, delta and
// SotW. Each client asks for the wildcard of LDS and CDS, then RDS for
// the route its listener names and EDS for its EDS cluster's service name
// (never for a static cluster), and is synced once it has them all; a
// listener re-pointed at another route makes every client follow it.
func TestLoadgenEnvoyFleet(t *testing.T) {
	for _, via := range []string{"origin", "relay"} {
		for _, variant := range []loadgen.Variant{loadgen.Delta, loadgen.SotW} {
			t.Run(via+"/"+string(variant), func(t *testing.T) {
				a, err := newPlainChain("svc-a", "127.0.0.1:8080")
				if err != nil {
					t.Fatal(err)
				}
				b, err := newPlainChain("svc-b", "127.0.0.1:8081")
				if err != nil {
					t.Fatal(err)
				}
				o := newGCPOrigin(t)
				o.set(resource.ListenerType, a.listenerName, a.listener)
				o.set(resource.RouteType, a.routeName, a.route)
				o.set(resource.RouteType, b.routeName, b.route)
				o.set(resource.ClusterType, a.clusterName, a.cluster)
				o.set(resource.ClusterType, "static", &clusterv3.Cluster{Name: "static",
					ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_STATIC}})
				o.set(resource.EndpointType, a.claName, a.cla)
				target := o.addr
				if via == "relay" {
					target = startRelay(t, nil, o.addr).XDSAddr()
				}
				f, stop := runFleet(t, loadgen.Config{Target: target, Clients: 3, Variant: variant, Envoy: true})
				waitSynced(t, f, "every Envoy synced")
				s := f.Summary()
				var held []string
				for _, v := range s.Versions {
					if v.Clients == 3 {
						held = append(held, v.Type+" "+v.Name)
					}
				}
				// Everything but svc-b's route, which no listener names.
				want := []string{"cds static", "cds svc-a", "eds svc-a", "lds svc-a", "rds svc-a"}
				if !slices.Equal(held, want) || len(s.Lacks) != 0 {
					t.Errorf("held by every client %v, want %v; lacking %v", held, want, s.Lacks)
				}

				re := proto.Clone(a.listener).(*listenerv3.Listener)
				re.ApiListener = b.listener.GetApiListener() // svc-a's listener now routes by svc-b
				o.set(resource.ListenerType, a.listenerName, re)
				s = waitFleetHolds(t, f, "rds "+b.routeName)
				if err := stop(); err != nil {
					t.Fatalf("Run: %v", err)
				}
				if err := s.SyncError(); err != nil || len(s.Lacks) != 0 {
					t.Errorf("after the listener changed: %v, lacking %v", err, s.Lacks)
				}
			})
		}
	}
}

// TestLoadgenSaysWhyNotSynced: clients that do not sync are told why by
// the relay (a removal, a resource error), and the load generator says it:
// by type and reason, with how many clients and which names. A name of an
// authority the relay does not serve gets NOT_FOUND (and, over delta, a
// removal); a name nobody answers is "no answer".
func TestLoadgenSaysWhyNotSynced(t *testing.T) {
	a, err := newChain(dsAuthority, "svc-a", "127.0.0.1:8080")
	if err != nil {
		t.Fatal(err)
	}
	unknown := xdstpName("nope.example", "envoy.config.endpoint.v3.ClusterLoadAssignment", "x")
	for _, variant := range []loadgen.Variant{loadgen.Delta, loadgen.SotW} {
		t.Run(string(variant), func(t *testing.T) {
			o := newGCPOrigin(t)
			o.set(resource.EndpointType, a.claName, a.cla)
			r := startRelay(t, nil, o.addr)
			f, stop := runFleet(t, loadgen.Config{Target: r.XDSAddr(), Clients: 4, Variant: variant,
				Names: []string{a.claName, unknown}})
			want := "eds " + unknown + ": NOT_FOUND: xds-relay: no configured authority serves this name (4 clients, 1 name)"
			var s loadgen.Summary
			xdstest.Poll(t, "the unknown name's reason", func() error {
				s = f.Summary()
				if len(s.Lacks) != 1 || s.Lacks[0].String() != want {
					return fmt.Errorf("lacking %v", s.Lacks)
				}
				return nil
			})
			if err := stop(); err != nil {
				t.Fatalf("Run: %v", err)
			}
			err := f.Summary().SyncError()
			if err == nil || !strings.Contains(err.Error(), "0 of 4 clients synced") || !strings.Contains(err.Error(), "they lack: "+want) {
				t.Errorf("SyncError = %v, want 0 of 4 synced and why: %s", err, want)
			}
			var text strings.Builder
			if err := f.Summary().WriteText(&text); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(text.String(), "lacking now       "+want) {
				t.Errorf("summary does not say why:\n%s", text.String())
			}
		})
	}
}
