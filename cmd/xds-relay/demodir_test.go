package main

import (
	"path/filepath"
	"slices"
	"syscall"
	"testing"
)

// TestDemoRemovesDeadDemosDirs: a demo killed with SIGKILL cannot remove
// its temporary directory; the next demo removes it at start, and leaves
// a running demo's alone. Once stopped, no demo directory is left.
func TestDemoRemovesDeadDemosDirs(t *testing.T) {
	tmp := t.TempDir()
	dirs := func() []string {
		t.Helper()
		d, err := filepath.Glob(filepath.Join(tmp, demoDirPrefix+"*"))
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	demo := func() *process {
		p := startProcessIn(t, tmp, "demo", "--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0", "--rest-listen", "127.0.0.1:0")
		p.waitServing(t)
		return p
	}
	killed := demo()
	dead := dirs()
	if err := killed.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	killed.waitExit(t)
	if got := dirs(); !slices.Equal(got, dead) || len(got) != 1 {
		t.Fatalf("after SIGKILL: demo directories %v, want the killed demo's one left", got)
	}
	running := demo()
	live := dirs()
	if len(live) != 1 || slices.Contains(live, dead[0]) {
		t.Errorf("a new demo left %v, want only its own (not the killed demo's %s)", live, dead[0])
	}
	third := demo()
	if got := dirs(); len(got) != 2 || !slices.Contains(got, live[0]) {
		t.Errorf("a third demo beside a running one: directories %v, want two, the running demo's %s among them", got, live[0])
	}
	for _, p := range []*process{running, third} {
		if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		p.waitExit(t)
	}
	if got := dirs(); len(got) != 0 {
		t.Errorf("demo directories left after the demos stopped: %v", got)
	}
}
