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

// cmdLoadgen is `xds-relay loadgen`: a simulated fleet of xDS clients
// against any xDS server. Progress goes to stderr once a second, the
// summary to stdout when the duration ends or on SIGINT/SIGTERM; it exits
// 1, saying why on stderr, when clients did not sync.
func cmdLoadgen(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("loadgen", flag.ContinueOnError)
	var (
		cfg      loadgen.Config
		variant  string
		names    string
		namesAt  string
		duration time.Duration
		admin    string
		asJSON   bool
		quiet    bool
		cpuprof  string
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
	fs.DurationVar(&duration, "duration", 0, "how long to run (0: until interrupted)")
	fs.Float64Var(&cfg.NackFraction, "nack-fraction", 0, "fraction of responses to NACK, in [0, 1]")
	fs.StringVar(&admin, "admin", "", "serve GET /status, GET /summary, POST /reconnect on this `host:port`")
	fs.BoolVar(&asJSON, "json", false, "print the summary as JSON")
	fs.BoolVar(&quiet, "quiet", false, "no progress line")
	fs.StringVar(&cpuprof, "cpuprofile", "", "write the load generator's own CPU profile to `file`")
	if err := parseFlags(fs, args, stderr); err != nil {
		return err
	}
	cfg.Variant = loadgen.Variant(variant)
	if names != "" {
		cfg.Names = strings.Split(names, ",")
	}
	if namesAt != "" {
		if names != "" {
			return usageError{"loadgen: --names and --names-file: set one"}
		}
		b, err := os.ReadFile(namesAt)
		if err != nil {
			return usageError{fmt.Sprintf("loadgen: --names-file: %v", err)}
		}
		cfg.Names = strings.Fields(string(b))
	}
	fleet, err := loadgen.New(cfg)
	if err != nil {
		return usageError{err.Error()}
	}

	if duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, duration)
		defer cancel()
	}

	if cpuprof != "" {
		f, err := os.Create(cpuprof)
		if err != nil {
			return fmt.Errorf("loadgen: cpu profile: %w", err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return fmt.Errorf("loadgen: cpu profile: %w", err)
		}
		defer pprof.StopCPUProfile()
	}

	var wg sync.WaitGroup
	defer wg.Wait()
	if admin != "" {
		lis, err := net.Listen("tcp", admin)
		if err != nil {
			return fmt.Errorf("loadgen: admin listener: %w", err)
		}
		srv := &http.Server{Handler: fleet.Handler(), ReadHeaderTimeout: 5 * time.Second}
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = srv.Serve(lis) // ends with ErrServerClosed at shutdown
		}()
		defer func() { _ = srv.Close() }()
		fmt.Fprintf(stderr, "loadgen: control on http://%s\n", lis.Addr())
	}
	if !quiet {
		pctx, cancel := context.WithCancel(ctx)
		defer cancel()
		wg.Add(1)
		go func() {
			defer wg.Done()
			t := time.NewTicker(progressInterval)
			defer t.Stop()
			for {
				select {
				case <-pctx.Done():
					return
				case <-t.C:
					fmt.Fprintln(stderr, fleet.Status().ProgressLine())
				}
			}
		}()
	}

	if err := fleet.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	sum := fleet.Summary()
	if asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		err = enc.Encode(sum)
	} else {
		err = sum.WriteText(stdout)
	}
	if err != nil {
		return err
	}
	// Exit 1 when clients did not sync: nothing the summary measured
	// describes a working fleet.
	return sum.SyncError()
}
