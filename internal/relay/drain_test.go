package relay

import "testing"

// TestDrainSetEndAll: endAll ends every open stream once, and a stream
// registered afterwards (it opened before the listener closed) is ended
// as it registers, not left open until the grace period.
func TestDrainSetEndAll(t *testing.T) {
	var d drainSet
	ended := map[string]int{}
	end := func(name string) func() { return func() { ended[name]++ } }
	d.add(end("a"))
	removeB := d.add(end("b"))
	removeB() // b ended by itself first
	d.endAll()
	if ended["a"] != 1 || ended["b"] != 0 {
		t.Fatalf("endAll ended %v, want a once and b (already gone) not at all", ended)
	}
	remove := d.add(end("late"))
	if ended["late"] != 1 {
		t.Fatalf("a stream registered after endAll was ended %d times, want once, at once", ended["late"])
	}
	remove()
	if n := d.len(); n != 0 {
		t.Fatalf("%d streams left open after endAll", n)
	}
}
