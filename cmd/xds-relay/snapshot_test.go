package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestServeSnapshotOnSIGTERM: the promise of cache.snapshot_path
// (docs/reliability.md, "Warm restart"), with the real binary: a corrupt snapshot at the path does not stop the
// relay from starting (it is logged), and after a clean SIGTERM a snapshot
// exists at exactly that path, which the next start loads.
func TestServeSnapshotOnSIGTERM(t *testing.T) {
	dir := t.TempDir()
	snap := filepath.Join(dir, "relay.snap")
	if err := os.WriteFile(snap, []byte("not a snapshot"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "relay.yaml")
	// No drain delay: the default 5 s a load balancer gets would be 10 s of
	// this test spent waiting.
	yaml := fmt.Sprintf("listen: 127.0.0.1:0\nadmin: 127.0.0.1:0\nauthorities:\n  - name: a\n    origins: [\"127.0.0.1:1\"]\nshutdown_grace_period: 5s\ndownstream: {drain_delay: 0s}\ncache:\n  snapshot_path: %q\n", snap)
	if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	run := func(wantLog string) {
		t.Helper()
		p := startProcess(t, "serve", "--config", cfg)
		p.waitServing(t)
		p.waitLog(t, wantLog)
		if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if code := p.waitExit(t); code != exitOK {
			t.Fatalf("exit code after SIGTERM = %d, want 0\nstderr:\n%s", code, p.stderr)
		}
		b, err := os.ReadFile(snap)
		if err != nil || !bytes.HasPrefix(b, []byte("XDSRSNAP")) {
			t.Fatalf("after SIGTERM, %s: %v, %d bytes starting %q; want a snapshot\nstderr:\n%s", snap, err, len(b), b[:min(len(b), 8)], p.stderr)
		}
		if ents, _ := os.ReadDir(dir); len(ents) != 2 {
			t.Errorf("%s holds %d files, want the config and the snapshot only", dir, len(ents))
		}
	}
	run(`"result":"corrupt"`)
	run("snapshot loaded")
}

// TestServeSnapshotFIFO: a FIFO at cache.snapshot_path (nobody writing to
// it) neither holds the start up nor keeps SIGTERM from ending the relay;
// it is logged as untrusted and, at shutdown, replaced by a snapshot.
func TestServeSnapshotFIFO(t *testing.T) {
	dir := t.TempDir()
	snap := filepath.Join(dir, "relay.snap")
	if err := syscall.Mkfifo(snap, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "relay.yaml")
	yaml := fmt.Sprintf("listen: 127.0.0.1:0\nadmin: 127.0.0.1:0\nauthorities:\n  - name: a\n    origins: [\"127.0.0.1:1\"]\nshutdown_grace_period: 5s\ndownstream: {drain_delay: 0s}\ncache:\n  snapshot_path: %q\n", snap)
	if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startProcess(t, "serve", "--config", cfg)
	p.waitServing(t)
	p.waitLog(t, `"result":"untrusted"`)
	p.waitLog(t, "not a regular file")
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := p.waitExit(t); code != exitOK {
		t.Fatalf("exit code after SIGTERM = %d, want 0\nstderr:\n%s", code, p.stderr)
	}
	if fi, err := os.Lstat(snap); err != nil || !fi.Mode().IsRegular() {
		t.Errorf("after SIGTERM, %s: %v, %v; want a regular file (the snapshot)", snap, fi, err)
	}
}
