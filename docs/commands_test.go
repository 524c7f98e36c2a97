package docs

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Command blocks: every ```sh (bash, shell) and ```console block of the
// docs is run as a user would paste it, one doc after another, each doc's
// blocks in order in a directory of its own that looks like a clone of the
// repository (its top-level entries linked, bin/ shared and built by
// `make build`, with -race when this test has it; bin/ first on PATH),
// with the documented ports. A block's
// info string says how it runs:
//
//	```sh                             run under bash -e -o pipefail; it must exit 0
//	```sh shows="REGEXP"              ... and its output must match REGEXP (shows may repeat)
//	```sh ready="TEXT"                it keeps running (a server, a load generator until
//	                                  Ctrl-C): the next blocks run once its output shows
//	                                  TEXT; it gets SIGINT (Ctrl-C) at the next heading
//	```sh skip="WHY"                  not run here; WHY is what it needs (listed by the test)
//	```console                        a transcript: each "$ command" is run, and its output
//	                                  (stdout and stderr) must be the lines that follow it
//	```yaml file="NAME"               written as NAME in the doc's directory before its
//	                                  commands run (a file a command names)
//
// Every process a block starts is in the block's process group, killed
// at the end; temporary directories are the test's.

// commandTimeout bounds one block, or the wait for a ready block's text: a
// cold `make build` is the longest.
const commandTimeout = 5 * time.Minute

// docPorts are the ports the docs' commands bind, as documented: the
// relay's defaults (xDS, admin, REST) and the benchmark origin's.
var docPorts = []string{"127.0.0.1:18000", "127.0.0.1:18001", "127.0.0.1:18002", "127.0.0.1:19000", "127.0.0.1:19001"}

// isCommand reports whether b holds commands: a shell block, or a
// transcript with a "$ command" line (a console block without one shows
// output only).
func isCommand(b block) bool {
	switch b.lang {
	case "sh", "bash", "shell":
		return true
	case "console":
		return strings.HasPrefix(b.text, "$ ") || strings.Contains(b.text, "\n$ ")
	}
	return false
}

func TestDocsCommandBlocks(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the docs' commands: builds the relay, binds the documented ports")
	}
	var docs [][]block
	for _, file := range yamlDocs(t) {
		bs := fencedBlocks(t, file)
		for _, b := range bs {
			if isCommand(b) {
				docs = append(docs, bs)
				break
			}
		}
	}
	start := time.Now()
	w := newWorkspace(t)
	t.Logf("make build: %.1fs", time.Since(start).Seconds())
	var ran, skipped []string
	for _, bs := range docs {
		r, s := w.runDoc(t, bs)
		ran, skipped = append(ran, r...), append(skipped, s...)
	}
	t.Logf("ran %d command blocks: %s", len(ran), strings.Join(ran, ", "))
	t.Logf("skipped %d (what they need):\n  %s", len(skipped), strings.Join(skipped, "\n  "))
	if len(ran) == 0 {
		t.Fatal("no command block ran")
	}
}

// workspace is where the docs' commands run: a directory per doc that
// looks like a clone, and the shared bin/.
type workspace struct {
	dir, bin, tmp string
	env           []string
}

// newWorkspace takes the machine-wide lock of the documented ports (so
// that two test runs on one machine take turns), checks the ports are
// free and builds bin/xds-relay with `make build`.
func newWorkspace(t *testing.T) *workspace {
	t.Helper()
	lockPorts(t)
	dir := t.TempDir()
	w := &workspace{dir: dir, bin: filepath.Join(dir, "bin"), tmp: filepath.Join(dir, "tmp")}
	for _, d := range []string{w.bin, w.tmp} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	w.env = append(os.Environ(), "PATH="+w.bin+string(os.PathListSeparator)+os.Getenv("PATH"), "TMPDIR="+w.tmp)
	if raceEnabled {
		// make build as this test is built: from the tests' build cache,
		// not a second, uninstrumented build of every package.
		w.env = append(w.env, "GOBUILD=go build -race")
	}
	build := w.docDir(t, "build")
	out, err := w.command(build, "make", "build").CombinedOutput()
	if err != nil {
		t.Fatalf("make build: %v\n%s", err, out)
	}
	return w
}

// lockPorts holds an exclusive lock, machine-wide, on the documented
// ports until the test ends, and fails the test if one is in use.
func lockPorts(t *testing.T) {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(os.TempDir(), "xds-relay-docs-ports.lock"), os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() }) // closing releases the lock
	for _, addr := range docPorts {
		l, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatalf("%s, which the docs' commands use, is taken (a relay or demo running?): %v", addr, err)
		}
		l.Close()
	}
}

// docDir makes a directory for one doc's commands: the repository's
// top-level entries linked into it, bin/ the shared one.
func (w *workspace) docDir(t *testing.T, name string) string {
	t.Helper()
	dir := filepath.Join(w.dir, strings.NewReplacer("/", "-", ".", "-").Replace(name))
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	repo, err := filepath.Abs(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		target := filepath.Join(repo, e.Name())
		switch e.Name() {
		case "bin":
			continue
		case ".git":
			continue // git describe says "dev"; nothing writes to the clone's history
		}
		if err := os.Symlink(target, filepath.Join(dir, e.Name())); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(w.bin, filepath.Join(dir, "bin")); err != nil {
		t.Fatal(err)
	}
	return dir
}

// command is name args run in dir with the workspace's environment, in a
// process group of its own.
func (w *workspace) command(dir, name string, args ...string) *exec.Cmd {
	cmd := exec.Command(name, args...)
	cmd.Dir, cmd.Env = dir, w.env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return cmd
}

// runDoc runs the command blocks of one doc in order and returns the
// blocks it ran and those it skipped, with why.
func (w *workspace) runDoc(t *testing.T, bs []block) (ran, skipped []string) {
	t.Helper()
	dir := w.docDir(t, bs[0].file)
	for _, b := range bs {
		if name, ok := b.attrs["file"]; ok {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(b.text), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	var running []*proc // ready blocks, until the next heading
	defer func() { stopAll(t, running) }()
	for _, b := range bs {
		if !isCommand(b) {
			continue
		}
		for len(running) > 0 && running[0].b.section != b.section {
			stopAll(t, running[:1])
			running = running[1:]
		}
		if why, ok := b.attrs["skip"]; ok {
			if why == "" {
				t.Errorf("%v: skip=\"...\" must say what the block needs", b)
			}
			skipped = append(skipped, fmt.Sprintf("%v: %s", b, why))
			continue
		}
		start := time.Now()
		if b.lang == "console" {
			w.runTranscript(t, dir, b)
		} else if p := w.runBlock(t, dir, b); p != nil {
			running = append(running, p)
		}
		ran = append(ran, fmt.Sprintf("%v (%.1fs)", b, time.Since(start).Seconds()))
	}
	return ran, skipped
}

// proc is a block's bash and everything it started (its process group).
type proc struct {
	b    block
	cmd  *exec.Cmd
	out  string // the file holding its output
	done chan struct{}
	err  error // cmd.Wait's, once done is closed
}

func (p *proc) output() string {
	b, _ := os.ReadFile(p.out)
	return string(b)
}

// start runs script under bash in dir, its output (stdout and stderr) in
// a file: a background process that holds it open does not hold up Wait.
func (w *workspace) start(t *testing.T, dir string, b block, args ...string) *proc {
	t.Helper()
	out, err := os.CreateTemp(w.tmp, "out-")
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	p := &proc{b: b, cmd: w.command(dir, "bash", args...), out: out.Name(), done: make(chan struct{})}
	p.cmd.Stdout, p.cmd.Stderr = out, out
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	return p
}

// runBlock runs one ```sh block: to its end, or, when it is ready="TEXT",
// until its output shows TEXT (then it returns the block still running).
func (w *workspace) runBlock(t *testing.T, dir string, b block) *proc {
	t.Helper()
	p := w.start(t, dir, b, "-e", "-o", "pipefail", "-c", b.text)
	deadline := time.After(commandTimeout)
	if ready, ok := b.attrs["ready"]; ok {
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for !strings.Contains(p.output(), ready) {
			select {
			case <-p.done:
				t.Fatalf("%v: ended (%v) before it showed %q:\n%s", b, p.err, ready, p.output())
			case <-deadline:
				stopAll(t, []*proc{p})
				t.Fatalf("%v: did not show %q within %v:\n%s", b, ready, commandTimeout, p.output())
			case <-tick.C:
			}
		}
		return p
	}
	select {
	case <-p.done:
	case <-deadline:
		stopAll(t, []*proc{p})
		t.Fatalf("%v: not done within %v:\n%s", b, commandTimeout, p.output())
	}
	stopAll(t, []*proc{p}) // what it left running
	out := p.output()
	if p.err != nil {
		t.Errorf("%v: %v:\n%s", b, p.err, out)
	}
	if shows, ok := b.attrs["shows"]; ok {
		for _, s := range strings.Split(shows, "\n") {
			re, err := regexp.Compile(s)
			if err != nil {
				t.Errorf("%v: shows=%q: %v", b, s, err)
			} else if !re.MatchString(out) {
				t.Errorf("%v: does not show %q:\n%s", b, s, out)
			}
		}
	}
	return nil
}

// stopAll sends SIGINT (Ctrl-C) to each process group, then SIGKILL to
// what is left after a grace period, and waits until none is left.
func stopAll(t *testing.T, ps []*proc) {
	t.Helper()
	for _, p := range ps {
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGINT)
	}
	for _, p := range ps {
		if !groupGone(-p.cmd.Process.Pid, 3*time.Second) {
			_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		}
		<-p.done
		if !groupGone(-p.cmd.Process.Pid, 10*time.Second) {
			t.Errorf("%v: processes left after SIGKILL", p.b)
		}
	}
}

// groupGone waits up to d until no process of the group is left.
func groupGone(pgid int, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for {
		if err := syscall.Kill(pgid, 0); errors.Is(err, syscall.ESRCH) {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// transcriptMark separates the commands' outputs in a transcript's run.
const transcriptMark = "--- docs test: next command ---"

// runTranscript runs a ```console block's "$ command" lines in one bash
// (so `echo $?` says what the command before it did) and compares each
// one's output with the lines the transcript shows after it.
func (w *workspace) runTranscript(t *testing.T, dir string, b block) {
	t.Helper()
	var script strings.Builder
	var want []string
	for _, line := range strings.Split(strings.TrimRight(b.text, "\n"), "\n") {
		if cmd, ok := strings.CutPrefix(line, "$ "); ok {
			// The mark keeps $? as the command before it left it.
			fmt.Fprintf(&script, "s=$?; echo %q; (exit $s)\n%s\n", transcriptMark, cmd)
			want = append(want, "")
			continue
		}
		if len(want) == 0 {
			t.Errorf("%v: output before the first \"$ command\" line", b)
			return
		}
		want[len(want)-1] += line + "\n"
	}
	p := w.start(t, dir, b, "-c", script.String())
	select {
	case <-p.done:
	case <-time.After(commandTimeout):
		t.Errorf("%v: not done within %v", b, commandTimeout)
	}
	stopAll(t, []*proc{p})
	got := strings.Split(p.output(), transcriptMark+"\n")[1:]
	if len(got) != len(want) {
		t.Errorf("%v: %d commands ran, want %d:\n%s", b, len(got), len(want), p.output())
		return
	}
	for i := range want {
		if g, w := trimLines(got[i]), trimLines(want[i]); g != w {
			t.Errorf("%v: command %d's output differs from the doc's\n--- doc:\n%s--- got:\n%s", b, i+1, w, g)
		}
	}
}

// trimLines drops trailing spaces of each line and trailing empty lines.
func trimLines(s string) string {
	var b bytes.Buffer
	for _, l := range strings.Split(strings.TrimRight(s, "\n"), "\n") {
		b.WriteString(strings.TrimRight(l, " \t") + "\n")
	}
	return b.String()
}
