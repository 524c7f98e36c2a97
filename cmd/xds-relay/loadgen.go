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

	if f.duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, f.duration)
		defer cancel()
	}

	if f.cpuprof != "" {
		stop, err := startCPUProfile(f.cpuprof)
		if err != nil {
			return err
		}
		defer stop()
	}

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

	if err := fleet.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	sum := fleet.Summary()
	if err := writeLoadgenSummary(stdout, sum, f.asJSON); err != nil {
		return err
	}
	// Exit 1 when clients did not sync: nothing the summary measured
	// describes a working fleet.
	return sum.SyncError()
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
	fs.StringVar(&names, "names", "", "comma-separated resource names every client subscribes to")
	fs.StringVar(&namesAt, "names-file", "", "read the names from `file`, one per line (instead of --names)")
	fs.IntVar(&cfg.Window, "window", 0, "each client subscribes to its own window of this many of the names, client i's starting at name i×stride (0: all names)")
	fs.IntVar(&cfg.Stride, "stride", 0, "distance between consecutive clients' windows (default: names/clients, at least 1)")
	fs.IntVar(&cfg.NodeClusters, "node-clusters", 1, "spread the clients over this many node clusters, loadgen-0, loadgen-1, ... (1: all in cluster loadgen)")
	fs.StringVar(&cfg.Glob, "glob", "", "xdstp glob collection URL every client subscribes to (instead of --names)")
	fs.StringVar(&cfg.TypeURL, "type", "eds", "resource type: a type URL or eds, cds, lds, rds, sds")
	fs.DurationVar(&f.duration, "duration", 0, "how long to run (0: until interrupted)")
	fs.Float64Var(&cfg.NackFraction, "nack-fraction", 0, "fraction of responses to NACK, in [0, 1]")
	fs.IntVar(&cfg.StallEvery, "stall-every", 0, "every this-many-th client (0, N, 2N, ...) stops reading on POST /stall, on connections of its own with 64 KiB windows (0: none)")
	fs.StringVar(&f.admin, "admin", "", "serve GET /status, GET /summary, GET /clients, POST /reconnect, POST /stall, POST and DELETE /churn, POST /latency on this `host:port`")
	fs.BoolVar(&f.asJSON, "json", false, "print the summary as JSON")
	fs.BoolVar(&f.quiet, "quiet", false, "no progress line")
	fs.StringVar(&f.cpuprof, "cpuprofile", "", "write the load generator's own CPU profile to `file`")
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

// startCPUProfile profiles this process into path until stop is called.
func startCPUProfile(path string) (stop func(), err error) {
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
