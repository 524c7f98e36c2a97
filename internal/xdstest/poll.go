package xdstest

import (
	"testing"
	"time"
)

// Poll calls check until it returns nil, pausing PollPause between calls,
// and fails the test if it has not within WaitTimeout. It is for state
// that announces no change (an HTTP page, a metric, a count): where there
// is a channel to wait on, use Await. check runs on the caller's goroutine
// and may fail the test itself; its last error, after what, is the
// failure's message.
func Poll(t testing.TB, what string, check func() error) {
	t.Helper()
	pause := time.NewTicker(PollPause)
	defer pause.Stop()
	Await(t, what, pause.C, check)
}

// Await is Poll for state whose changes are announced on a channel (a
// 1-slot poke, a notification): it calls check again each time wake
// yields, and fails the test if check has not returned nil within
// WaitTimeout.
func Await[T any](t testing.TB, what string, wake <-chan T, check func() error) {
	t.Helper()
	deadline := time.NewTimer(WaitTimeout)
	defer deadline.Stop()
	for {
		err := check()
		if err == nil {
			return
		}
		select {
		case <-deadline.C:
			t.Fatalf("%s: not within %v: %v", what, WaitTimeout, err)
			return
		case <-wake:
		}
	}
}
