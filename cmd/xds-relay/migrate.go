package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"

	"go.yaml.in/yaml/v3"

	"github.com/xds-relay/xds-relay/internal/aggregation"
	"github.com/xds-relay/xds-relay/internal/migrate"
	"github.com/xds-relay/xds-relay/internal/migrate/legacykey"
)

// migrateOutput is the config fragment migrate-rules prints.
type migrateOutput struct {
	Node        migrateNode        `yaml:"node"`
	Authorities []migrateAuthority `yaml:"authorities"`
	Aggregation struct {
		Rules []aggregation.Rule `yaml:"rules"`
	} `yaml:"aggregation"`
}

type migrateNode struct {
	ID string `yaml:"id"`
}

type migrateAuthority struct {
	Name       string   `yaml:"name"`
	Origins    []string `yaml:"origins"`
	Transport  string   `yaml:"transport"`
	PlainNames bool     `yaml:"plain_names"`
}

// legacyBootstrap is the part of the earlier relay's bootstrap file
// migrate-rules reads: its origin's address.
type legacyBootstrap struct {
	OriginServer struct {
		Address struct {
			Address   string `yaml:"address"`
			PortValue int    `yaml:"port_value"`
		} `yaml:"address"`
	} `yaml:"origin_server"`
}

// cmdMigrateRules implements `xds-relay migrate-rules`: it converts the
// earlier relay's aggregation rules file into this relay's config (the
// authority, the node, the rules) and prints it, or refuses, naming each
// rule that cannot be converted and why (exit 1). With --verify it replays
// generated requests through both key builders and lists every request
// they group differently (exit 1 when any).
func cmdMigrateRules(_ context.Context, args []string, stdout, stderr io.Writer) error {
	f, err := parseMigrateFlags(args, stderr)
	if err != nil {
		return err
	}
	data, err := os.ReadFile(f.file)
	if err != nil {
		return err
	}
	legacy, err := legacykey.Parse(data)
	if err != nil {
		return fmt.Errorf("%s: not an earlier-relay rules file: %w", f.file, err)
	}
	conv, err := migrate.Convert(legacy, f.authority)
	if err != nil {
		fmt.Fprintf(stdout, "%s: %v\n", f.file, err)
		return errReported
	}
	if f.verify {
		return verifyConversion(stdout, f.file, legacy, conv, f.requests, f.seed, f.show)
	}
	addr, err := originAddress(f.origin, f.bootstrap)
	if err != nil {
		return err
	}
	return writeMigratedConfig(stdout, f.file, f.authority, addr, conv)
}

// migrateFlags is what `xds-relay migrate-rules` was asked for.
type migrateFlags struct {
	file              string
	verify            bool
	authority, origin string
	bootstrap         string
	requests          int
	seed              uint64
	show              int
}

// parseMigrateFlags defines migrate-rules' flags and parses args, the
// rules file before or after the flags.
func parseMigrateFlags(args []string, stderr io.Writer) (*migrateFlags, error) {
	fs := flag.NewFlagSet("migrate-rules", flag.ContinueOnError)
	var f migrateFlags
	fs.BoolVar(&f.verify, "verify", false, "replay generated requests through both key builders and report every difference, instead of printing the config")
	fs.StringVar(&f.authority, "authority", "legacy", "the name of the authority the rules feed")
	fs.StringVar(&f.origin, "origin", "", "the origin's host:port (default: the --bootstrap file's origin_server, else 127.0.0.1:18000)")
	fs.StringVar(&f.bootstrap, "bootstrap", "", "the earlier relay's bootstrap `file`, for its origin_server address")
	fs.IntVar(&f.requests, "requests", 20000, "how many requests --verify generates")
	fs.Uint64Var(&f.seed, "seed", 1, "the seed of --verify's generator")
	fs.IntVar(&f.show, "show", 20, "how many differences --verify prints")
	// The file may come before or after the flags.
	fs.SetOutput(stderr)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, err
		}
		return nil, usageError{err.Error()}
	}
	rest := fs.Args()
	if len(rest) == 0 {
		return nil, usageError{"the earlier relay's rules file is required"}
	}
	f.file = rest[0]
	if err := parseFlags(fs, rest[1:], stderr); err != nil {
		return nil, err
	}
	if f.requests <= 0 {
		return nil, usageError{"--requests must be positive"}
	}
	return &f, nil
}

// originAddress is the origin's host:port: --origin, else the bootstrap
// file's origin_server, else 127.0.0.1:18000.
func originAddress(origin, bootstrap string) (string, error) {
	addr := origin
	if addr == "" && bootstrap != "" {
		var err error
		if addr, err = bootstrapOrigin(bootstrap); err != nil {
			return "", err
		}
	}
	if addr == "" {
		addr = "127.0.0.1:18000"
	}
	return addr, nil
}

// writeMigratedConfig prints the converted config: the authority at addr,
// the node and the rules, after a comment on how to read them.
func writeMigratedConfig(stdout io.Writer, file, authority, addr string, conv *migrate.Converted) error {
	out := migrateOutput{
		Node:        migrateNode{ID: "xds-relay"},
		Authorities: []migrateAuthority{{Name: authority, Origins: []string{addr}, Transport: "sotw"}},
	}
	out.Aggregation.Rules = conv.Rules
	var buf bytes.Buffer
	fmt.Fprintf(&buf, "# Converted by xds-relay migrate-rules from %s.\n", file)
	fmt.Fprintf(&buf, "# First match wins: the order of the rules matters. Every group key starts\n")
	fmt.Fprintf(&buf, "# with %q; the rest is the earlier relay's key. The origin sees, for\n", migrate.KeyPrefix)
	fmt.Fprintf(&buf, "# each group, a node built from the group key with node.id below (the earlier\n")
	fmt.Fprintf(&buf, "# relay forwarded the first client's node).\n")
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(out); err != nil {
		return err
	}
	_, err := stdout.Write(buf.Bytes())
	return err
}

// bootstrapOrigin reads origin_server's host:port from the earlier
// relay's bootstrap file.
func bootstrapOrigin(path string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	var b legacyBootstrap
	if err := yaml.Unmarshal(data, &b); err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	a := b.OriginServer.Address
	if a.Address == "" || a.PortValue == 0 {
		return "", fmt.Errorf("%s: no origin_server.address", path)
	}
	host := a.Address
	if host == "0.0.0.0" {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, strconv.Itoa(a.PortValue)), nil
}

// verifyConversion replays generated requests and reports.
func verifyConversion(stdout io.Writer, file string, legacy *legacykey.Config, conv *migrate.Converted, n int, seed uint64, show int) error {
	// Authorities are the converter's own: check everything else.
	rep, err := migrate.Verify(legacy, conv.Rules, migrate.Generate(legacy, n, seed))
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s: %d converted rules; %d requests replayed: %d groups, %d refused by both, %d differences\n",
		file, len(conv.Rules), rep.Requests, rep.Groups, rep.Refused, len(rep.Differences))
	for i, d := range rep.Differences {
		if i == show {
			fmt.Fprintf(stdout, "... and %d more\n", len(rep.Differences)-show)
			break
		}
		fmt.Fprintf(stdout, "difference: %v\n", d)
	}
	if len(rep.Differences) > 0 {
		return errReported
	}
	return nil
}
