package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime/pprof"
	"strings"
	"sync"
	"time"

	"github.com/xds-relay/xds-relay/internal/loadgen"
)

// progressInterval is how often loadgen prints its progress line.
const progressInterval = time.Second

// loadgenFlags is what `xds-relay loadgen` was asked for.
type loadgenFlags struct {
	cfg      loadgen.Config
	duration time.Duration
	admin    string
	asJSON   bool
	quiet    bool
	cpuprof  string
	// wait bounds how long to wait for the target to accept connections
	// before the clients start (0: start at once).
	wait time.Duration
	// onSynced is a shell command run once every client synced.
	onSynced string
	// updates, when not 0, ends the run once every client has received
	// that many updates after it synced.
	updates int
}

// cmdLoadgen is `xds-relay loadgen`: a simulated fleet of xDS clients
// against any xDS server. Progress goes to stderr once a second, the
// summary to stdout when the duration ends or on SIGINT/SIGTERM; it exits
// 1, saying why on stderr, when clients did not sync.
func cmdLoadgen(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f, err := parseLoadgenFlags(args, stderr)
	if err != nil {
		return err
	}
	fleet, err := loadgen.New(f.cfg)
	if err != nil {
		return usageError{err.Error()}
	}
	if err := waitTarget(ctx, f.cfg.Target, f.wait, stderr); err != nil {
		return err
	}

	if f.duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, f.duration)
		defer cancel()
	}

	stopProfile, err := startCPUProfile(f.cpuprof)
	if err != nil {
		return err
	}
	defer stopProfile()

	var wg sync.WaitGroup
	defer wg.Wait()
	if f.admin != "" {
		closeAdmin, err := serveLoadgenAdmin(f.admin, fleet, &wg, stderr)
		if err != nil {
			return err
		}
		defer closeAdmin()
	}
	if !f.quiet {
		pctx, cancel := context.WithCancel(ctx)
		defer cancel()
		wg.Add(1)
		go func() {
			defer wg.Done()
			printProgress(pctx, fleet, stderr)
		}()
	}

	runCtx, stopRun := context.WithCancel(ctx)
	defer stopRun()
	watched := make(chan error, 1)
	go func() { watched <- watchRun(runCtx, stopRun, fleet, f, stderr) }()
	if err := fleet.Run(runCtx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	sum := fleet.Summary()
	if err := writeLoadgenSummary(stdout, sum, f.asJSON); err != nil {
		return err
	}
	// Exit 1 when clients did not sync (nothing the summary measured
	// describes a working fleet), when --on-synced failed, or when
	// --updates were not all received.
	return errors.Join(sum.SyncError(), <-watched)
}

// waitTarget waits up to wait for target to accept a TCP connection, so
// that clients started with the servers do not count their refusals.
func waitTarget(ctx context.Context, target string, wait time.Duration, stderr io.Writer) error {
	if wait <= 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	var d net.Dialer
	for said := false; ; said = true {
		conn, err := d.DialContext(ctx, "tcp", target)
		if err == nil {
			return conn.Close()
		}
		if !said {
			fmt.Fprintf(stderr, "loadgen: waiting up to %v for %s (%v)\n", wait, target, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("loadgen: --wait: %s accepted no connection within %v: %w", target, wait, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// watchRun runs --on-synced once every client synced, then ends the run
// (stop) once every client has received --updates updates; it returns why
// the run failed, if it did, when ctx ends.
func watchRun(ctx context.Context, stop context.CancelFunc, fleet *loadgen.Fleet, f *loadgenFlags, stderr io.Writer) error {
	if f.onSynced != "" {
		select {
		case <-ctx.Done():
			return nil
		case <-fleet.Synced(0):
		}
		cmd := exec.CommandContext(ctx, "sh", "-c", f.onSynced)
		cmd.Stdout, cmd.Stderr = stderr, stderr
		if err := cmd.Run(); err != nil && ctx.Err() == nil {
			stop()
			return fmt.Errorf("loadgen: --on-synced %q: %w", f.onSynced, err)
		}
	}
	if f.updates == 0 {
		return nil
	}
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			if n := fleet.UpdatedClients(f.updates); n < f.cfg.Clients {
				return fmt.Errorf("loadgen: --updates %d: %d of %d clients received them", f.updates, n, f.cfg.Clients)
			}
			return nil
		case <-t.C:
			if fleet.UpdatedClients(f.updates) == f.cfg.Clients {
				stop()
			}
		}
	}
}

// parseLoadgenFlags defines loadgen's flags, parses args and reads the
// names they point at.
func parseLoadgenFlags(args []string, stderr io.Writer) (*loadgenFlags, error) {
	fs := flag.NewFlagSet("loadgen", flag.ContinueOnError)
	var (
		f       loadgenFlags
		cfg     = &f.cfg
		variant string
		names   string
		namesAt string
	)
	fs.StringVar(&cfg.Target, "target", "", "xDS server `host:port` (required)")
	fs.IntVar(&cfg.Clients, "clients", 10, "number of simulated clients, one ADS stream each")
	fs.IntVar(&cfg.Conns, "conns", 0, "gRPC connections the clients share (default: one per 100 clients)")
	fs.StringVar(&variant, "variant", "delta", "protocol variant: delta or sotw")
	fs.StringVar(&names, "names", "", "comma-separated resource names every client subscribes to (* is the wildcard; none, with --type lds or cds: the wildcard, as Envoy asks)")
	fs.StringVar(&namesAt, "names-file", "", "read the names from `file`, one per line (instead of --names)")
	fs.IntVar(&cfg.Window, "window", 0, "each client subscribes to its own window of this many of the names, client i's starting at name i×stride (0: all names)")
	fs.IntVar(&cfg.Stride, "stride", 0, "distance between consecutive clients' windows (default: names/clients, at least 1)")
	fs.IntVar(&cfg.NodeClusters, "node-clusters", 1, "spread the clients over this many node clusters, loadgen-0, loadgen-1, ... (1: all in cluster loadgen)")
	fs.StringVar(&cfg.Glob, "glob", "", "xdstp glob collection URL every client subscribes to (instead of --names)")
	fs.StringVar(&cfg.TypeURL, "type", "", "resource type: a type URL or eds, cds, lds, rds, sds (default eds)")
	fs.BoolVar(&cfg.Envoy, "envoy", false, "each client subscribes as an Envoy bootstraps over ADS: wildcard LDS and CDS, then RDS and EDS for what they name (no --type, --names, --glob)")
	fs.StringVar(&cfg.NodeIDPrefix, "node-id-prefix", "", "client i's node id is PREFIX-i (default: loadgen- and 6 random hex digits, distinct for each run)")
	fs.DurationVar(&f.duration, "duration", 0, "how long to run (0: until interrupted)")
	fs.Float64Var(&cfg.NackFraction, "nack-fraction", 0, "fraction of responses to NACK, in [0, 1]")
	fs.IntVar(&cfg.StallEvery, "stall-every", 0, "every this-many-th client (0, N, 2N, ...) stops reading on POST /stall, on connections of its own with 64 KiB windows (0: none)")
	fs.StringVar(&f.admin, "admin", "", "serve GET /status, GET /summary, GET /clients, POST /reconnect, POST /stall, POST and DELETE /churn, POST /latency on this `host:port`")
	fs.BoolVar(&f.asJSON, "json", false, "print the summary as JSON")
	fs.BoolVar(&f.quiet, "quiet", false, "no progress line")
	fs.StringVar(&f.cpuprof, "cpuprofile", "", "write the load generator's own CPU profile to `file`")
	fs.DurationVar(&f.wait, "wait", 0, "wait up to this long for the target to accept connections before the clients start (0: start at once)")
	fs.StringVar(&f.onSynced, "on-synced", "", "run this shell `command` once every client synced (e.g. a push at the origin)")
	fs.IntVar(&f.updates, "updates", 0, "end once every client has received this many updates after it synced (0: run for --duration); exit 1 if they did not")
	if err := parseFlags(fs, args, stderr); err != nil {
		return nil, err
	}
	cfg.Variant = loadgen.Variant(variant)
	if names != "" {
		cfg.Names = strings.Split(names, ",")
	}
	if namesAt != "" {
		if names != "" {
			return nil, usageError{"loadgen: --names and --names-file: set one"}
		}
		b, err := os.ReadFile(namesAt)
		if err != nil {
			return nil, usageError{fmt.Sprintf("loadgen: --names-file: %v", err)}
		}
		cfg.Names = strings.Fields(string(b))
	}
	return &f, nil
}

// startCPUProfile profiles this process into path until stop is called
// (no path: nothing to stop).
func startCPUProfile(path string) (stop func(), err error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("loadgen: cpu profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("loadgen: cpu profile: %w", err)
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}

// serveLoadgenAdmin serves the fleet's control endpoints on addr, in a
// goroutine wg waits for, until the returned func closes the server.
func serveLoadgenAdmin(addr string, fleet *loadgen.Fleet, wg *sync.WaitGroup, stderr io.Writer) (func(), error) {
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("loadgen: admin listener: %w", err)
	}
	srv := &http.Server{Handler: fleet.Handler(), ReadHeaderTimeout: 5 * time.Second}
	wg.Add(1)
	go func() {
		defer wg.Done()
		_ = srv.Serve(lis) // ends with ErrServerClosed at shutdown
	}()
	fmt.Fprintf(stderr, "loadgen: control on http://%s\n", lis.Addr())
	return func() { _ = srv.Close() }, nil
}

// printProgress prints the fleet's progress line every progressInterval
// until ctx ends.
func printProgress(ctx context.Context, fleet *loadgen.Fleet, stderr io.Writer) {
	t := time.NewTicker(progressInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			fmt.Fprintln(stderr, fleet.Status().ProgressLine())
		}
	}
}

// writeLoadgenSummary prints the summary, as JSON or as text.
func writeLoadgenSummary(stdout io.Writer, sum loadgen.Summary, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(sum)
	}
	return sum.WriteText(stdout)
}
