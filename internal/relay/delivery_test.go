package relay

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/xds-relay/xds-relay/internal/delivery"
	"github.com/xds-relay/xds-relay/internal/xdstest"
)

// TestDeliveryEndpoints: /debug/delivery answers with the settings in
// effect; the release endpoint takes POST only, refuses an authority that
// is not configured, and answers with what it released.
func TestDeliveryEndpoints(t *testing.T) {
	r := startRelay(t, testConfig(t))
	base := "http://" + r.AdminAddr()
	code, body := get(t, base+delivery.Path)
	for _, want := range []string{`"held": []`, `"authority": "auth.example"`, `"max_removed_share": 0.5`, `"release_after": "0s"`} {
		if code != http.StatusOK || !strings.Contains(body, want) {
			t.Errorf("GET %s = %d, lacks %s:\n%s", delivery.Path, code, want, body)
		}
	}
	if code, _ := get(t, base+delivery.ReleasePath); code != http.StatusMethodNotAllowed {
		t.Errorf("GET %s = %d, want 405", delivery.ReleasePath, code)
	}
	for _, tc := range []struct {
		query    string
		wantCode int
		wantBody string
	}{
		{"?authority=nope.example", http.StatusBadRequest, `authority "nope.example" is not configured`},
		{"?authority=auth.example&type=envoy.config.cluster.v3.Cluster", http.StatusOK, `"released": []`},
		{"", http.StatusOK, `"released": []`},
	} {
		code, body := post(t, base+delivery.ReleasePath+tc.query)
		if code != tc.wantCode || !strings.Contains(body, tc.wantBody) {
			t.Errorf("POST %s%s = %d %q, want %d %q", delivery.ReleasePath, tc.query, code, body, tc.wantCode, tc.wantBody)
		}
	}
	if got := releaseType("envoy.config.cluster.v3.Cluster"); got != "type.googleapis.com/envoy.config.cluster.v3.Cluster" {
		t.Errorf("releaseType(label) = %q", got)
	}
}

func post(t *testing.T, url string) (int, string) {
	t.Helper()
	client := &http.Client{Timeout: xdstest.WaitTimeout, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Post(url, "", nil)
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
