package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestDemoReloads: the demo's config is a file it reloads from (it
// answered 500 "open embedded config/demo/relay.yaml"), with the
// addresses given on the command line in it, so a reload changes nothing
// that needs a restart.
func TestDemoReloads(t *testing.T) {
	p := startProcess(t, "demo", "--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0", "--rest-listen", "127.0.0.1:0")
	s := p.waitServing(t)
	var stdout, stderr bytes.Buffer
	code := dispatch(context.Background(), []string{"reload", "--admin", s.Admin}, &stdout, &stderr)
	if code != exitOK || !strings.Contains(stdout.String(), "config reloaded") {
		t.Errorf("xds-relay reload of the demo = %d, stdout %q, stderr %q; want 0, config reloaded", code, &stdout, &stderr)
	}
}
