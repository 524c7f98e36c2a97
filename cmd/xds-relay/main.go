// Command xds-relay is a caching xDS relay: serve | validate | demo |
// explain | reload | status | version | loadgen | migrate-rules.
//
// main parses the subcommand and its flags, loads the config and calls run;
// everything else lives in internal/relay.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"syscall"
	"text/tabwriter"

	"github.com/xds-relay/xds-relay/config"
)

// version is set at build time: -ldflags "-X main.version=v1.2.3".
var version = "dev"

// Exit codes.
const (
	exitOK    = 0
	exitFail  = 1
	exitUsage = 2
)

// command is one subcommand. run gets the arguments after the subcommand's
// name; it returns a usageError for bad flags or arguments.
type command struct {
	name    string
	args    string
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

// commands is the subcommand table: a new subcommand is one line here and
// a function in its own file.
var commands = []command{
	{"serve", "--config FILE", "run the relay until SIGINT or SIGTERM", cmdServe},
	{"validate", "--config FILE", "check a config file; list every problem with its line", cmdValidate},
	{"demo", "[--listen ADDR] [--admin ADDR]", "run the relay on its embedded demo config", cmdDemo},
	{"explain", "--config FILE --type T [flags]", "which aggregation rule, authority and group key serve a request", cmdExplain},
	{"reload", "[--admin ADDR]", "ask a running relay to re-read its config file, as SIGHUP does", cmdReload},
	{"status", "--csds ADDR [--node ID] [--json] [TLS flags]", "what each connected client was sent and answered (CSDS): synced, stale, NACKed, per type", cmdStatus},
	{"version", "", "print the version (also --version)", cmdVersion},
	{"loadgen", "--target ADDR --clients N [--names A,B | --glob G | --envoy]", "simulate a fleet of xDS clients (or of Envoys) against any xDS server", cmdLoadgen},
	{"migrate-rules", "[--verify] [--authority NAME] [--origin ADDR | --bootstrap FILE] OLD.yaml", "convert an earlier-relay (envoyproxy/xds-relay) aggregation rules file; --verify compares the two relays' grouping", cmdMigrateRules},
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	code := dispatch(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// dispatch runs the subcommand named by args[0] and returns the exit code.
func dispatch(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return exitUsage
	}
	switch args[0] {
	case "help", "-h", "-help", "--help":
		usage(stdout)
		return exitOK
	case "-version", "--version":
		args = append([]string{"version"}, args[1:]...)
	}
	for _, c := range commands {
		if c.name != args[0] {
			continue
		}
		err := c.run(ctx, args[1:], stdout, stderr)
		var ue usageError
		switch {
		case err == nil, errors.Is(err, flag.ErrHelp):
			return exitOK
		case errors.As(err, &ue):
			fmt.Fprintf(stderr, "xds-relay %s: %v\nusage: xds-relay %s %s\n", c.name, err, c.name, c.args)
			return exitUsage
		case errors.Is(err, errReported):
			return exitFail
		default:
			fmt.Fprintf(stderr, "xds-relay %s: %v\n", c.name, err)
			return exitFail
		}
	}
	fmt.Fprintf(stderr, "xds-relay: unknown command %q\n", args[0])
	usage(stderr)
	return exitUsage
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: xds-relay <command> [flags]\n\ncommands:")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, c := range commands {
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", c.name, c.args, c.summary)
	}
	_ = tw.Flush()
}

// usageError is a bad command line (exit 2).
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

// errReported means the command already printed what went wrong (exit 1).
var errReported = errors.New("reported")

// parseFlags parses a subcommand's flags; positional arguments are an error.
// -h prints the flags and returns flag.ErrHelp.
func parseFlags(fs *flag.FlagSet, args []string, stderr io.Writer) error {
	fs.SetOutput(stderr)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usageError{err.Error()}
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Sprintf("unexpected argument %q", fs.Arg(0))}
	}
	return nil
}

// configFlag parses the --config flag that serve and validate share and
// loads the file.
func loadConfigFlag(name string, args []string, stderr io.Writer) (*config.Config, error) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	path := fs.String("config", "", "config file (YAML)")
	if err := parseFlags(fs, args, stderr); err != nil {
		return nil, err
	}
	if *path == "" {
		return nil, usageError{"--config FILE is required"}
	}
	return config.Load(*path)
}

func cmdServe(ctx context.Context, args []string, _, stderr io.Writer) error {
	cfg, err := loadConfigFlag("serve", args, stderr)
	if err != nil {
		return err
	}
	return run(ctx, cfg, stderr, nil, configHint(cfg))
}

func cmdValidate(_ context.Context, args []string, stdout, stderr io.Writer) error {
	_, err := loadConfigFlag("validate", args, stderr)
	var ue usageError
	switch {
	case err == nil:
		fmt.Fprintln(stdout, "config OK")
		return nil
	case errors.As(err, &ue), errors.Is(err, flag.ErrHelp):
		return err
	}
	// Every problem, one per line (errors.Join puts each on its own).
	fmt.Fprintln(stdout, err)
	return errReported
}

func cmdDemo(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	listen := fs.String("listen", "", "override the demo's xDS address (default "+config.DefaultListen+")")
	admin := fs.String("admin", "", "override the demo's admin address (default "+config.DefaultAdmin+")")
	rest := fs.String("rest-listen", "", "override the demo's REST-JSON polling address (default "+demoRESTListen+")")
	if err := parseFlags(fs, args, stderr); err != nil {
		return err
	}
	dir, cleanup, err := makeDemoDir()
	if err != nil {
		return err
	}
	defer cleanup()
	// The flags are written into the demo's config file, which a reload
	// re-reads.
	cfg, err := config.DemoWith(dir, config.DemoAddrs{Listen: *listen, Admin: *admin, REST: *rest})
	if err != nil {
		return err
	}
	// The guide once the relay listens: a busy port fails before it, naming
	// the flag that moves that listener.
	guide := func() error { return printDemoGuide(stdout, dir, cfg.Listen, cfg.Admin, cfg.RESTListen) }
	return run(ctx, cfg, stderr, guide, demoHint)
}

func cmdVersion(_ context.Context, args []string, stdout, stderr io.Writer) error {
	if err := parseFlags(flag.NewFlagSet("version", flag.ContinueOnError), args, stderr); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "xds-relay %s (%s %s/%s)\n", version, runtime.Version(), runtime.GOOS, runtime.GOARCH)
	return nil
}
