package relay

import (
	"strings"
	"testing"
)

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
