package downstream

// writerState is the lifecycle of a session's writer goroutine (writer.go).
// Every method is called with the session's mu held.
//
//	          wake                wake
//	  idle ─────────▶ running ─────────▶ running + rerun
//	   ▲                │   ▲                   │
//	   │                │   └───────────────────┘
//	   │                │   round done: another round
//	   └────────────────┘
//	   round done, no rerun (or held, or closed)
//
//	held     while a request is applied (hold … release) or a change is
//	         announced (announce … flush): wake starts no writer and a
//	         running one neither builds nor runs another round; the
//	         handler (release) or the cache (Flush) wakes it afterwards.
//	closed   the handler returned (close): nothing starts a writer again;
//	         close hands the handler the running writer's end to wait on.
//
// A round takes everything noted so far (roundLocked clears rerun), so a
// wake-up that comes before it needs no round of its own. A writer whose
// Send fails returns without leaving running: the stream is ending, and no
// other writer starts on it.
type writerState struct {
	running bool
	rerun   bool          // woken while running: run another round
	end     chan struct{} // closed when the running writer returns; nil while none runs
	closed  bool
	// handling counts requests being applied (resolve, Watch): what is
	// known when a request is applied goes out in one response per type,
	// not a part now and the rest a moment later.
	handling int
	// announcing: the cache is announcing a change (Notify came, Flush
	// not yet): what one origin change brings goes out in one response.
	announcing bool
}

// holdLocked holds the writer back while a request is applied.
func (w *writerState) holdLocked() { w.handling++ }

// releaseLocked ends a holdLocked; the caller then wakes the writer.
func (w *writerState) releaseLocked() { w.handling-- }

// announceLocked holds the writer back until the change's flushLocked.
func (w *writerState) announceLocked() { w.announcing = true }

// flushLocked ends an announcement and reports whether one was going on.
func (w *writerState) flushLocked() bool {
	was := w.announcing
	w.announcing = false
	return was
}

// requestLocked reports whether a request is being applied.
func (w *writerState) requestLocked() bool { return w.handling > 0 }

// heldLocked reports whether the writer must leave the dirty set alone.
func (w *writerState) heldLocked() bool { return w.handling > 0 || w.announcing }

// runningLocked reports whether a writer runs.
func (w *writerState) runningLocked() bool { return w.running }

// closedLocked reports whether the handler returned.
func (w *writerState) closedLocked() bool { return w.closed }

// wakeLocked notes work for the writer. It returns the end channel of a
// writer the caller must start (after unlocking), nil when none: one is
// running (it runs another round), or the writer is held or closed (what
// releases it wakes it).
func (w *writerState) wakeLocked() chan struct{} {
	if w.closed || w.heldLocked() {
		return nil
	}
	if w.running {
		w.rerun = true
		return nil
	}
	w.running = true
	w.end = make(chan struct{})
	return w.end
}

// roundLocked notes that the writer takes everything noted so far into
// the round it builds: wake-ups until now need no further round.
func (w *writerState) roundLocked() { w.rerun = false }

// nextRoundLocked is the writer's check after a round: whether to run
// another (woken meanwhile and free to go); if not, it is idle again.
func (w *writerState) nextRoundLocked() bool {
	again := w.rerun && !w.closed && !w.heldLocked()
	w.rerun = false
	if !again {
		// Held: the release or Flush that frees it starts the next writer.
		w.running = false
		w.end = nil // the writer closes it; the next one has its own
	}
	return again
}

// closeLocked marks the handler returned; it returns the running writer's
// end channel, nil when none runs.
func (w *writerState) closeLocked() chan struct{} {
	w.closed = true
	if w.running {
		return w.end
	}
	return nil
}
