package xdstest

import "time"

// The timeouts every test of the project waits with.
const (
	// WaitTimeout bounds every wait for something that must happen. It is
	// long on purpose: a test fails on it only when the thing never
	// happens, not because a loaded machine was slow.
	WaitTimeout = 10 * time.Second
	// QuietPeriod is how long a test watches for something that must not
	// happen (a response, a notification, a request) before it accepts
	// that it did not.
	QuietPeriod = 300 * time.Millisecond
	// PollPause is the pause between two checks of Poll: short against
	// WaitTimeout, long enough that a poll does not spin.
	PollPause = 10 * time.Millisecond
)
