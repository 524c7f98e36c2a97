// Command run is the benchmark harness behind `make bench`: it builds the
// relay and the benchmark origin, then runs, as separate processes on
// loopback, origin, relay and load generator for every (N, variant,
// workload, mode): direct (clients → origin) and relayed (clients → relay →
// origin), with each update changing one resource (workload one) or all of
// them at once (workload all), or, with many resources and each client
// subscribed to its own window of them, a few percent of them (workload
// envoy, xdstp and plain names, at the largest N only). It then runs the Go micro-benchmarks, prints
// a Markdown table on stdout and writes latest.json, latest.md and
// fanout_p99.png (other names with --name) and the relay's profiles
// (profiles/) in bench/results/local, which git ignores, or, with
// --publish (the make targets), in bench/results, the published results.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run() error {
	f, err := parseFlags(os.Args[1:])
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()

	if err := raiseFileLimit(); err != nil {
		fmt.Fprintln(os.Stderr, "bench: warning: open-file limit:", err)
	}
	work, err := os.MkdirTemp("", "xds-relay-bench-")
	if err != nil {
		return err
	}
	e := f.env(work)
	logf("building into %s", work)
	if err := e.build(ctx); err != nil {
		return err
	}

	res := Results{Started: time.Now().UTC().Format(time.RFC3339), Machine: machine(), Settings: f.settings}
	failed := e.runAll(ctx, &res)
	failed = e.runFairnessAll(ctx, &res) || failed
	if f.micro && ctx.Err() == nil {
		logf("micro-benchmarks (benchtime %s) ...", f.benchtime)
		ms, out, err := runMicro(ctx, e.goBin, f.benchtime)
		res.Micro = ms
		if err != nil {
			res.MicroErr = err.Error()
			logf("  %v\n%s", err, lastLines(out, 30))
		}
	}
	res.Finished = time.Now().UTC().Format(time.RFC3339)
	res.Targets = checkTargets(res)

	md, err := writeResults(f.outDir, f.name, res)
	if err != nil {
		return err
	}
	os.Stdout.Write(md)
	if failed {
		logf("some scenarios failed; process logs are in %s", work)
		return errors.New("some scenarios failed (see the table)")
	}
	return os.RemoveAll(work)
}

// Where results go: a run writes under localDir (ignored by git) unless
// --publish asks it to update the published results in publishedDir
// (the make targets do).
const (
	publishedDir = "bench/results"
	localDir     = "bench/results/local"
)

// benchFlags is what the harness was asked to run.
type benchFlags struct {
	settings  Settings
	outDir    string
	publish   bool
	name      string
	micro     bool
	benchtime string
	profile   bool
	// profileSync also profiles the relay over the initial sync and the
	// reconnect storm.
	profileSync bool
	timeout     time.Duration
}

// parseFlags defines the harness's flags, parses args and checks the
// settings.
func parseFlags(args []string) (*benchFlags, error) {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	var (
		clients   = fs.String("clients", "1000,10000", "comma-separated client counts N")
		variants  = fs.String("variants", "delta,sotw", "comma-separated variants")
		modes     = fs.String("modes", "direct,relayed", "comma-separated modes: direct (clients of the origin), relayed (of the relay at its defaults), bare (of the relay with the propagation ledger and safe delivery off: what the defaults cost, in the same run)")
		workloads = fs.String("workloads", "one,all,envoy", "comma-separated workloads: one (each update changes one resource), all (each update changes every resource), envoy (each client its own window of many resources, each update a few percent of them; at the largest --clients only)")
		resources = fs.Int("resources", 10, "resources every client subscribes to (workloads one and all)")
		envoyRes  = fs.Int("envoy-resources", 1000, "resources the origin holds (workload envoy)")
		window    = fs.Int("window", 20, "resources each client subscribes to, its own overlapping window (workload envoy)")
		changed   = fs.Int("changed", 50, "resources each update changes, in one origin change (workload envoy)")
		clusters  = fs.Int("node-clusters", 1, "node clusters the clients are spread over (workload envoy; the relay keeps one upstream stream per cluster for plain names)")
		schemes   = fs.String("names", "xdstp,plain", "comma-separated resource name schemes of workload envoy: xdstp, plain")
		size      = fs.Int("size", 1024, "approximate bytes per resource")
		updates   = fs.Int("updates", 10, "updates pushed per scenario")
		pin       = fs.Bool("pin", false, "pin the serving process to CPU 0 (relayed: the relay and the origin) and the load generator to CPU 1, with taskset -c")
		ledger    = fs.Bool("propagation", true, "run the relay with its propagation ledger (propagation.enabled); false to measure what the ledger costs")
		fair      = fairnessFlags(fs)
		safe      = fs.Bool("delivery", true, "run the relay with safe delivery at its defaults (validation, the NACK breaker, the deletion guard); false turns them off, to measure what they cost")
		f         benchFlags
	)
	f.register(fs)
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if f.outDir == "" {
		f.outDir = localDir
		if f.publish {
			f.outDir = publishedDir
		}
	}
	ns, err := parseInts(*clients)
	if err != nil {
		return nil, fmt.Errorf("--clients: %w", err)
	}
	f.settings = Settings{Clients: ns, Variants: split(*variants), Modes: split(*modes), Workloads: split(*workloads),
		Resources: *resources, ResourceBytes: *size, Updates: *updates,
		Envoy: envoyShape{Resources: *envoyRes, Window: *window, Changed: *changed, NodeClusters: *clusters}, NameSchemes: split(*schemes),
		LedgerOff: !*ledger, DeliveryOff: !*safe,
		Fairness: fair()}
	if err := f.check(); err != nil {
		return nil, err
	}
	if *pin {
		if err := checkPin(runtime.NumCPU(), exec.LookPath); err != nil {
			return nil, err
		}
		if err := tryPin(pinned); err != nil {
			return nil, err
		}
		p := pinned
		f.settings.Pin = &p
	}
	return &f, nil
}

// register adds the flags that say where a run writes and how it
// measures besides the scenarios.
func (f *benchFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.outDir, "out", "", "where to write the results (default "+localDir+", ignored by git; with --publish "+publishedDir+")")
	fs.BoolVar(&f.publish, "publish", false, "update the published results in "+publishedDir+" (what make bench and its siblings do)")
	fs.StringVar(&f.name, "name", "latest", "results file names: NAME.json, NAME.md and the chart fanout_p99SUFFIX.png, SUFFIX being what follows \"latest\" in NAME")
	fs.BoolVar(&f.micro, "micro", true, "also run the Go micro-benchmarks under ./internal/...")
	fs.StringVar(&f.benchtime, "benchtime", "200ms", "go test -benchtime for micro-benchmarks")
	fs.BoolVar(&f.profile, "profile", true, "save a CPU profile of the relay over each relayed update phase")
	fs.BoolVar(&f.profileSync, "profile-sync", false, "also save CPU profiles of the relay over the initial sync and the reconnect storm (TAG-sync-relay-cpu.prof, TAG-storm-relay-cpu.prof), each as long as the phase takes at most (syncProfileSeconds); slows each relayed scenario by about that")
	fs.DurationVar(&f.timeout, "timeout", 13*time.Minute, "bound on the whole run")
}

// check checks the workloads, the envoy shape and names when envoy runs,
// and the results' name.
func (f *benchFlags) check() error {
	if err := f.settings.Fairness.check(); err != nil {
		return err
	}
	fairOnly := len(f.settings.Workloads) == 0 && f.settings.Fairness != nil
	if err := checkWorkloads(f.settings.Workloads); err != nil && !fairOnly {
		return fmt.Errorf("--workloads: %w (none only with --fairness)", err)
	}
	if slices.Contains(f.settings.Workloads, workloadEnvoy) {
		if err := f.settings.Envoy.check(); err != nil {
			return err
		}
		if err := checkNameSchemes(f.settings.NameSchemes); err != nil {
			return fmt.Errorf("--names: %w", err)
		}
	}
	if f.name == "" || strings.ContainsRune(f.name, filepath.Separator) {
		return fmt.Errorf("--name %q: want a file name without a directory", f.name)
	}
	return nil
}

// tryPin runs true under taskset on every CPU p names, so a CPU this
// process may not use is refused before any scenario starts.
func tryPin(p Pinning) error {
	cpus := strings.Join([]string{p.Relay, p.Origin, p.Loadgen}, ",")
	if out, err := exec.Command("taskset", "-c", cpus, "true").CombinedOutput(); err != nil {
		return fmt.Errorf("--pin: taskset -c %s true: %v: %s", cpus, err, bytes.TrimSpace(out))
	}
	return nil
}

// env is what every scenario of the run shares, its binaries and logs in
// work.
func (f *benchFlags) env(work string) *env {
	e := &env{
		relayBin:     filepath.Join(work, "xds-relay"),
		originBin:    filepath.Join(work, "origin"),
		logDir:       work,
		resources:    f.settings.Resources,
		envoy:        f.settings.Envoy,
		updates:      f.settings.Updates,
		resourceSize: f.settings.ResourceBytes,
		authority:    "bench.local",
		goBin:        goBinary(),
		maxRun:       f.timeout,
		ledgerOff:    f.settings.LedgerOff,
		deliveryOff:  f.settings.DeliveryOff,
	}
	if f.profile || f.profileSync {
		e.profileDir = f.profileDir()
	}
	e.profileUpdates, e.profilePhases = f.profile, f.profileSync
	if f.settings.Pin != nil {
		e.pin = *f.settings.Pin
	}
	return e
}

// checkPin refuses --pin where it cannot do what it says: taskset (from
// util-linux) must be found by lookPath, and this process must have at
// least 2 CPUs (numCPU), one for the serving process and one for the load
// generator.
func checkPin(numCPU int, lookPath func(string) (string, error)) error {
	if _, err := lookPath("taskset"); err != nil {
		return fmt.Errorf("--pin: taskset, which pins the processes, is not installed (%v); it comes with util-linux", err)
	}
	if numCPU < 2 {
		return fmt.Errorf("--pin: needs 2 CPUs, one for the serving process and one for the load generator; this machine gives the harness %d", numCPU)
	}
	return nil
}

// build builds the relay and the benchmark origin.
func (e *env) build(ctx context.Context) error {
	for pkg, out := range map[string]string{"./cmd/xds-relay": e.relayBin, "./bench/origin": e.originBin} {
		cmd := exec.CommandContext(ctx, e.goBin, "build", "-o", out, pkg)
		if b, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("go build %s: %w\n%s", pkg, err, b)
		}
	}
	return nil
}

// runAll runs every scenario of res.Settings into res and reports whether
// any failed. Rows of one N and variant stay together: each workload's
// direct and relayed side by side.
func (e *env) runAll(ctx context.Context, res *Results) (failed bool) {
	s := res.Settings
	for _, n := range s.Clients {
		for _, v := range s.Variants {
			for _, w := range s.Workloads {
				if !slices.Contains(clientsFor(w, s.Clients), n) {
					continue
				}
				for _, names := range schemesFor(w, s.NameSchemes) {
					for _, m := range s.Modes {
						sc := e.runLogged(ctx, m, v, w, names, n)
						failed = failed || sc.Error != ""
						res.Scenarios = append(res.Scenarios, sc)
					}
				}
			}
		}
	}
	return failed
}

// profileDir is where the relay's profiles go.
func (f *benchFlags) profileDir() string { return filepath.Join(f.outDir, "profiles") }

// outputs are the files and directories a run writes: its results and,
// when it profiles, the profiles' directory.
func (f *benchFlags) outputs() []string {
	out := resultFiles(f.outDir, f.name)
	if f.profile || f.profileSync {
		out = append(out, f.profileDir())
	}
	return out
}

// resultFiles are the results named name in outDir: name.json, name.md
// and the chart.
func resultFiles(outDir, name string) []string {
	return []string{filepath.Join(outDir, name+".json"), filepath.Join(outDir, name+".md"), filepath.Join(outDir, chartName(name))}
}

// writeResults writes res into outDir as name.json, name.md and the chart,
// and returns the Markdown.
func writeResults(outDir, name string, res Results) ([]byte, error) {
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return nil, err
	}
	js, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return nil, err
	}
	var md bytes.Buffer
	writeMarkdown(&md, res)
	files := resultFiles(outDir, name)
	if err := errors.Join(
		os.WriteFile(files[0], append(js, '\n'), 0o644),
		os.WriteFile(files[1], md.Bytes(), 0o644),
		writeChart(files[2], res),
	); err != nil {
		return nil, fmt.Errorf("write results: %w", err)
	}
	return md.Bytes(), nil
}

// chartName is the chart's file name for results named name:
// fanout_p99.png for latest, fanout_p99-50k.png for latest-50k.
func chartName(name string) string {
	suffix, ok := strings.CutPrefix(name, "latest")
	if !ok {
		suffix = "-" + name
	}
	return "fanout_p99" + suffix + ".png"
}

// runLogged runs one scenario, unless ctx has ended, and logs how it went.
func (e *env) runLogged(ctx context.Context, mode, variant, workload, names string, n int) Scenario {
	if ctx.Err() != nil {
		return Scenario{Mode: mode, Variant: variant, Workload: workload, Names: names, Clients: n, Error: "not run: " + ctx.Err().Error()}
	}
	t0 := time.Now()
	logf("scenario %s %s %s N=%d ...", mode, variant, label(workload, names), n)
	sc := e.runScenario(ctx, mode, variant, workload, names, n)
	switch {
	case sc.Error != "":
		logf("  failed after %.1fs: %s", time.Since(t0).Seconds(), sc.Error)
	case sc.Envoy != nil:
		logf("  %.1fs: fan-out p99 %.1fms, per affected client per update %.2f responses, %.2f resources (%.2f changed in its window), %d responses to unaffected clients, initial sync %.2fs with %.2f responses/client",
			time.Since(t0).Seconds(), sc.FanoutP99MS, sc.Envoy.ResponsesPerAffected, sc.Envoy.ResourcesPerAffected,
			sc.Envoy.ChangedInWindowPerAffected, sc.Envoy.UnaffectedResponses, sc.InitialSyncS, sc.InitialResponsesPerClient)
	default:
		logf("  %.1fs: fan-out p99 %.1fms, %.2f responses/client/update, origin streams %d, storm %.2fs",
			time.Since(t0).Seconds(), sc.FanoutP99MS, sc.ClientResponsesPerUpdate, sc.OriginStreams, sc.StormS)
	}
	if sc.Error == "" {
		logf("  sync %.2fs, CPU s: serving %.2f, origin %.2f, loadgen %.2f; storm %.2fs, CPU s: serving %.2f, origin %.2f, loadgen %.2f",
			sc.InitialSyncS, sc.SyncCPU.Serving, sc.SyncCPU.Origin, sc.SyncCPU.Loadgen,
			sc.StormS, sc.StormCPU.Serving, sc.StormCPU.Origin, sc.StormCPU.Loadgen)
	}
	return sc
}

// raiseFileLimit lifts the soft open-file limit to the hard one, for this
// process and the children it starts. The clients share N/100 connections,
// so N streams take about N/100 descriptors in each process; the limit
// matters when --clients is large or a process holds more.
func raiseFileLimit() error {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		return err
	}
	l.Cur = l.Max
	return syscall.Setrlimit(syscall.RLIMIT_NOFILE, &l)
}

// goBinary is the go command that runs this harness, else go on PATH.
func goBinary() string {
	if p := filepath.Join(runtime.GOROOT(), "bin", "go"); fileExists(p) {
		return p
	}
	return "go"
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, time.Now().Format("15:04:05 ")+format+"\n", args...)
}

func split(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

func parseInts(s string) ([]int, error) {
	var out []int
	for _, f := range split(s) {
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%q is not a positive integer", f)
		}
		out = append(out, n)
	}
	return out, nil
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
