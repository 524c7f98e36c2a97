package relay

import (
	"net/http"
	"strings"
	"testing"
)

func TestAdminPprofOptIn(t *testing.T) {
	c := testConfig(t)
	c.AdminPprof = true
	r := startRelay(t, c)
	base := "http://" + r.AdminAddr()
	if code, body := get(t, base+"/debug/pprof/goroutine?debug=1"); code != http.StatusOK || !strings.Contains(body, "goroutine profile") {
		t.Errorf("GET /debug/pprof/goroutine with admin_pprof = %d, want 200 with a profile:\n%s", code, body)
	}
	if _, body := get(t, base+"/debug/"); !strings.Contains(body, `<a href="/debug/pprof/">`) {
		t.Errorf("/debug/ does not list pprof with admin_pprof:\n%s", body)
	}
}

func TestRESTListenOff(t *testing.T) {
	r := startRelay(t, testConfig(t))
	if got := r.RESTAddr(); got != "" {
		t.Errorf("RESTAddr with rest_listen off = %q, want \"\"", got)
	}
}

func TestRESTListenBusyPortFailsStart(t *testing.T) {
	busy := startRelay(t, testConfig(t))
	c := testConfig(t)
	c.RESTListen = busy.AdminAddr()
	r := newRelay(t, c)
	err := r.Start(t.Context())
	if err == nil || !strings.Contains(err.Error(), "rest_listen "+busy.AdminAddr()) {
		t.Fatalf("Start with a busy rest_listen = %v, want an error naming rest_listen", err)
	}
}
