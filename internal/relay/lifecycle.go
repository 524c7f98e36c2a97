package relay

import (
	"context"
	"sync"
)

// lifecycle is where a Relay is between New and the end of Close: one
// phase, changed under one mutex, only forward.
//
//	        Start              Close           drain_delay over       Close returns
//	new ──────────▶ serving ──────────▶ draining ──────────────▶ stopping ──────────▶ closed
//	 │                                                              ▲
//	 └─────────────── Close before Start (nothing to drain) ────────┘
//
//	new       built by New, nothing bound. Start may move it on; Close
//	          tears down what New built (stops).
//	serving   listeners bound, goRun loops running; /readyz and gRPC
//	          health may say serving.
//	draining  Close began: not ready, everything still served (the drain
//	          delay). Start and reloads are refused; a later Close waits.
//	stopping  goRun contexts cancelled, servers and streams ending: a
//	          server or loop that stops now is no failure (fail ignores it).
//	closed    the first Close returned (done is closed).
//
// A failure before stopping is delivered once on failed (Failed).
type lifecycle struct {
	mu     sync.Mutex
	phase  phase              // guarded by mu
	cancel context.CancelFunc // guarded by mu; set by start: ends the goRun contexts

	done   chan struct{} // closed when the first Close has finished
	failed chan error    // capacity 1: the first unexpected stop
}

type phase int

const (
	phaseNew phase = iota
	phaseServing
	phaseDraining
	phaseStopping
	phaseClosed
)

func newLifecycle() *lifecycle {
	return &lifecycle{done: make(chan struct{}), failed: make(chan error, 1)}
}

// startable is nil while Start may run: ErrStarted or ErrClosed otherwise.
func (l *lifecycle) startable() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.startableLocked()
}

func (l *lifecycle) startableLocked() error {
	switch l.phase {
	case phaseNew:
		return nil
	case phaseServing:
		return ErrStarted
	}
	return ErrClosed
}

// start moves new to serving with cancel ending the goRun contexts; then,
// still under the lock, it calls added (so that Close, which takes the
// lock first, never waits before the goroutines are counted). A Close or
// another Start that came first makes it an error and calls nothing.
func (l *lifecycle) start(cancel context.CancelFunc, added func()) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.startableLocked(); err != nil {
		return err
	}
	l.phase, l.cancel = phaseServing, cancel
	added()
	return nil
}

// close begins Close: serving moves to draining, new straight to stopping.
// It returns the phase it found (draining or later: another Close is under
// way or done; wait on done) and the goRun contexts' cancel (nil before
// Start).
func (l *lifecycle) close() (phase, context.CancelFunc) {
	l.mu.Lock()
	defer l.mu.Unlock()
	prev := l.phase
	switch prev {
	case phaseNew:
		l.phase = phaseStopping
	case phaseServing:
		l.phase = phaseDraining
	}
	return prev, l.cancel
}

// stop moves draining to stopping: failures from now on are expected.
func (l *lifecycle) stop() {
	l.mu.Lock()
	l.phase = phaseStopping
	l.mu.Unlock()
}

// closed ends Close: later Closes return.
func (l *lifecycle) closed() {
	l.mu.Lock()
	l.phase = phaseClosed
	l.mu.Unlock()
	close(l.done)
}

func (l *lifecycle) is(p phase) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.phase == p
}

// closing reports whether Close has begun.
func (l *lifecycle) closing() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.phase >= phaseDraining
}

// stopping reports whether Close is stopping things: a server or loop
// that stops now is no failure.
func (l *lifecycle) stopping() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.phase >= phaseStopping
}

// teardown is what New built that must be let go, in the order built;
// run lets go of it in reverse, once. Every way out (New failing part
// way, Close before Start, Close after Start once the servers have
// stopped) runs it, so a part added to New is let go on all of them.
// Start's own failure paths use one too, for the listeners.
type teardown []func()

func (rs *teardown) add(fn func()) { *rs = append(*rs, fn) }

func (rs *teardown) run() {
	fns := *rs
	*rs = nil
	for i := len(fns) - 1; i >= 0; i-- {
		fns[i]()
	}
}
