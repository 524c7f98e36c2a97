package relay

import (
	"encoding/json"
	"net"
	"net/http"
	"testing"

	"github.com/xds-relay/xds-relay/internal/admin"
	"github.com/xds-relay/xds-relay/internal/csds"
)

// TestCSDSListenOff: by default no CSDS listener is bound, and /debug/csds
// still answers on admin (an empty fleet).
func TestCSDSListenOff(t *testing.T) {
	r := startRelay(t, testConfig(t))
	if got := r.CSDSAddr(); got != "" {
		t.Errorf("CSDSAddr with csds_listen off = %q, want \"\"", got)
	}
	code, body := get(t, "http://"+r.AdminAddr()+admin.CSDSPath)
	var sum csds.Summary
	if err := json.Unmarshal([]byte(body), &sum); code != http.StatusOK || err != nil || sum.Matched != 0 || sum.MaxClients != csds.DefaultMaxClients {
		t.Errorf("GET %s = %d %v: %s", admin.CSDSPath, code, err, body)
	}
}

// TestCSDSListenOn: csds_listen is bound at Start and released by Close.
func TestCSDSListenOn(t *testing.T) {
	c := testConfig(t)
	c.CSDSListen = "127.0.0.1:0"
	r := startRelay(t, c)
	addr := r.CSDSAddr()
	if addr == "" || addr == c.CSDSListen {
		t.Fatalf("CSDSAddr = %q, want the bound address", addr)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("csds_listen %s still bound after Close: %v", addr, err)
	}
	_ = l.Close()
}
