package downstream

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	endpointv3s "github.com/envoyproxy/go-control-plane/envoy/service/endpoint/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
)

// REST-JSON polling answers from the cache; a poll at the current version
// gets 304 Not Modified.
func TestRESTPolling(t *testing.T) {
	e := newEnv(t, 0)
	n := xdstp(edsType, "rest")
	r1 := e.put(edsType, n, "1")
	hs := httptest.NewServer(e.srv.RESTHandler())
	t.Cleanup(hs.Close)

	poll := func(version string) (int, *discoveryv3.DiscoveryResponse) {
		t.Helper()
		body, err := protojson.Marshal(&discoveryv3.DiscoveryRequest{Node: testNode, ResourceNames: []string{n}, VersionInfo: version})
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.Post(hs.URL+RESTPathPrefix+"endpoints", "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			return resp.StatusCode, nil
		}
		out := &discoveryv3.DiscoveryResponse{}
		if err := protojson.Unmarshal(b, out); err != nil {
			t.Fatalf("response %s: %v", b, err)
		}
		return resp.StatusCode, out
	}

	code, got := poll("")
	if code != http.StatusOK {
		t.Fatalf("first poll: HTTP %d", code)
	}
	checkSotW(t, sotwResp(edsType, got.GetVersionInfo(), r1.Body), got)
	if code, _ := poll(got.GetVersionInfo()); code != http.StatusNotModified {
		t.Fatalf("poll at current version: HTTP %d, want 304", code)
	}
	r2 := e.put(edsType, n, "2")
	code, got2 := poll(got.GetVersionInfo())
	if code != http.StatusOK || got2.GetVersionInfo() == got.GetVersionInfo() {
		t.Fatalf("poll after a change: HTTP %d version %q", code, got2.GetVersionInfo())
	}
	checkSotW(t, sotwResp(edsType, got2.GetVersionInfo(), r2.Body), got2)

	tests := []struct {
		name, path, body string
		want             int
	}{
		{"unknown kind", RESTPathPrefix + "nonsense", "{}", http.StatusNotFound},
		{"body not JSON", RESTPathPrefix + "endpoints", "{", http.StatusBadRequest},
		{"duplicate names", RESTPathPrefix + "endpoints", `{"resource_names":["a","a"]}`, http.StatusBadRequest},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := http.Post(hs.URL+tc.path, "application/json", bytes.NewReader([]byte(tc.body)))
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.want {
				t.Fatalf("HTTP %d, want %d", resp.StatusCode, tc.want)
			}
		})
	}
}

// The unary Fetch answers like REST; at the current version it says so.
func TestFetch(t *testing.T) {
	e := newEnv(t, 0)
	n := xdstp(edsType, "fetch")
	r1 := e.put(edsType, n, "1")
	c := endpointv3s.NewEndpointDiscoveryServiceClient(e.conn)
	got, err := c.FetchEndpoints(context.Background(), &discoveryv3.DiscoveryRequest{Node: testNode, ResourceNames: []string{n}})
	if err != nil {
		t.Fatal(err)
	}
	checkSotW(t, sotwResp(edsType, got.GetVersionInfo(), r1.Body), got)
	_, err = c.FetchEndpoints(context.Background(), &discoveryv3.DiscoveryRequest{Node: testNode, ResourceNames: []string{n}, VersionInfo: got.GetVersionInfo()})
	if status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("fetch at current version: %v, want FailedPrecondition", err)
	}
}

// /debug/clients lists each stream with node, variant and subscriptions.
func TestClientsHandler(t *testing.T) {
	e := newEnv(t, 0)
	n := xdstp(edsType, "dbg")
	r := e.put(edsType, n, "1")
	c := e.delta()
	c.Send(&discoveryv3.DeltaDiscoveryRequest{Node: testNode, TypeUrl: edsType, ResourceNamesSubscribe: []string{n, "legacy-name"}})
	for got := 0; got < 1; {
		m := c.Recv()
		for _, x := range m.GetResources() {
			if x.GetName() == n {
				got++
			}
		}
	}
	_ = r
	// As /debug/clients shows it (the relay serves ClientsPage as JSON).
	page, cut := e.srv.ClientsPage()
	if cut != "" {
		t.Errorf("cut note %q with one client", cut)
	}
	b, err := json.Marshal(page)
	if err != nil {
		t.Fatal(err)
	}
	var got []ClientInfo
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	if len(got) != 1 {
		t.Fatalf("clients = %+v, want one", got)
	}
	g := got[0]
	g.ID, g.Peer = 0, ""
	want := ClientInfo{NodeID: "node-1", Cluster: "c1", Variant: "delta", Stream: "ads", Groups: []string{"g1"},
		Subscriptions: map[string]TypeInfo{edsType: {Names: []string{"legacy-name", n}}}}
	if d := cmpDiff(want, g); d != "" {
		t.Fatalf("client (-want +got):\n%s", d)
	}
}
