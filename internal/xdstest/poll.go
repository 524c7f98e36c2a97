package xdstest

import (
	"testing"
	"time"
)

// Poll calls check until it returns nil, pausing PollPause between calls,
// and fails the test if it has not within WaitTimeout. It is for state
// that announces no change (an HTTP page, a metric, a count): where there
// is a channel to wait on, wait on it instead. check runs on the caller's
// goroutine and may fail the test itself; its last error, after what, is
// the failure's message.
func Poll(t testing.TB, what string, check func() error) {
	t.Helper()
	deadline := time.NewTimer(WaitTimeout)
	defer deadline.Stop()
	pause := time.NewTicker(PollPause)
	defer pause.Stop()
	for {
		err := check()
		if err == nil {
			return
		}
		select {
		case <-deadline.C:
			t.Fatalf("%s: not within %v: %v", what, WaitTimeout, err)
			return
		case <-pause.C:
		}
	}
}
