package admin

import "testing"

// TestReleaseType: the release endpoint takes a type label as well as a
// type URL.
func TestReleaseType(t *testing.T) {
	if got := releaseType("envoy.config.cluster.v3.Cluster"); got != "type.googleapis.com/envoy.config.cluster.v3.Cluster" {
		t.Errorf("releaseType(label) = %q", got)
	}
	if got := releaseType("type.googleapis.com/envoy.config.cluster.v3.Cluster"); got != "type.googleapis.com/envoy.config.cluster.v3.Cluster" {
		t.Errorf("releaseType(URL) = %q", got)
	}
}
