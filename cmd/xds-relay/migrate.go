package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/xds-relay/xds-relay/config"
	"github.com/xds-relay/xds-relay/internal/aggregation"
	"github.com/xds-relay/xds-relay/internal/migrate"
	"github.com/xds-relay/xds-relay/internal/migrate/legacykey"
)

// migrateOutput is the config fragment migrate-rules prints.
type migrateOutput struct {
	Listen      string             `yaml:"listen,omitempty"`
	Admin       string             `yaml:"admin,omitempty"`
	Log         *migrateLog        `yaml:"log,omitempty"`
	Node        migrateNode        `yaml:"node"`
	Authorities []migrateAuthority `yaml:"authorities"`
	Aggregation struct {
		Rules []aggregation.Rule `yaml:"rules"`
	} `yaml:"aggregation"`
}

type migrateLog struct {
	Level string `yaml:"level"`
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

// originPlaceholder is written in place of an origin migrate-rules does
// not know, or that would be the relay itself: not a host:port, so the
// config does not validate until the operator writes the origin's.
const originPlaceholder = "ORIGIN-HOST:PORT"

// cmdMigrateRules implements `xds-relay migrate-rules`: it converts the
// earlier relay's aggregation rules file into this relay's config (the
// authority, the node, the rules; with --bootstrap, the listeners and log
// level too) and prints it, or refuses, naming each rule that cannot be
// converted and why (exit 1). What the bootstrap sets that has no place
// in this relay's config is listed on stderr with where it goes now. With
// --verify it replays generated requests through both key builders and
// lists every request they group differently (exit 1 when any).
func cmdMigrateRules(_ context.Context, args []string, stdout, stderr io.Writer) error {
	f, err := parseMigrateFlags(args, stderr)
	if err != nil {
		return err
	}
	data, err := os.ReadFile(f.file)
	if err != nil {
		return err
	}
	if kind, keys := migrate.Kind(data); kind == migrate.KindBootstrap {
		return usageError{fmt.Sprintf("%s: this looks like the earlier relay's bootstrap (it has %s), not its aggregation rules: pass it with --bootstrap %s, and the rules file (fragments: ...) as the argument",
			f.file, strings.Join(keys, ", "), f.file)}
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
	out, notes, err := migratedConfig(f, conv)
	if err != nil {
		return err
	}
	for _, n := range notes {
		fmt.Fprintln(stderr, n)
	}
	return writeMigratedConfig(stdout, f.file, out)
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
	fs.StringVar(&f.origin, "origin", "", "the origin's host:port (default: the --bootstrap file's origin_server, else a placeholder to edit)")
	fs.StringVar(&f.bootstrap, "bootstrap", "", "the earlier relay's bootstrap `file`: its origin_server, server (listen), admin and logging.level are carried over, and every other setting listed with where it goes now")
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

// migratedConfig is the config migrate-rules prints, and what it tells
// the operator on the way: the bootstrap's settings and where each went,
// and an origin left for the operator to write (unknown, or the relay's
// own listener: never written).
func migratedConfig(f *migrateFlags, conv *migrate.Converted) (*migrateOutput, []string, error) {
	out := &migrateOutput{Node: migrateNode{ID: "xds-relay"}}
	out.Aggregation.Rules = conv.Rules
	origin := f.origin
	var notes []string
	if f.bootstrap != "" {
		b, err := readBootstrap(f.bootstrap)
		if err != nil {
			return nil, nil, err
		}
		out.Listen, out.Admin = b.Listen, b.Admin
		if b.LogLevel != "" {
			out.Log = &migrateLog{Level: b.LogLevel}
		}
		if origin == "" {
			origin = b.Origin
		}
		notes = append(notes, fmt.Sprintf("migrate-rules: the earlier relay's bootstrap %s, setting by setting:", f.bootstrap))
		for _, n := range b.Notes {
			notes = append(notes, "  "+n.String())
		}
	}
	switch key, addr, own := ownListener(out, origin); {
	case origin == "":
		notes = append(notes, fmt.Sprintf("migrate-rules: no --origin or --bootstrap: authorities[0].origins[0] is the placeholder %s; write your origin control plane's host:port there", originPlaceholder))
		origin = originPlaceholder
	case own:
		notes = append(notes, fmt.Sprintf("migrate-rules: the origin %s would be this relay's own %s address (%s), and the relay would ask itself: authorities[0].origins[0] is the placeholder %s. Write your origin control plane's host:port there; if it is %s, also set %s to another address (for listen, where your clients connect: the earlier relay's server.address, which --bootstrap carries over)",
			origin, key, addr, originPlaceholder, origin, key))
		origin = originPlaceholder
	}
	out.Authorities = []migrateAuthority{{Name: f.authority, Origins: []string{origin}, Transport: "sotw"}}
	return out, notes, nil
}

// ownListener reports which of the listeners out configures (this
// relay's defaults for the others) dialling origin would reach.
func ownListener(out *migrateOutput, origin string) (key, addr string, ok bool) {
	if origin == "" {
		return "", "", false
	}
	cfg := config.Default()
	if out.Listen != "" {
		cfg.Listen = out.Listen
	}
	if out.Admin != "" {
		cfg.Admin = out.Admin
	}
	return cfg.OwnListener(origin)
}

// writeMigratedConfig prints the converted config after a comment on how
// to read it; a placeholder origin carries a comment of its own.
func writeMigratedConfig(stdout io.Writer, file string, out *migrateOutput) error {
	var doc yaml.Node
	if err := doc.Encode(out); err != nil {
		return err
	}
	markPlaceholder(&doc)
	var buf bytes.Buffer
	fmt.Fprintf(&buf, "# Converted by xds-relay migrate-rules from %s.\n", file)
	fmt.Fprintf(&buf, "# First match wins: the order of the rules matters. Every group key starts\n")
	fmt.Fprintf(&buf, "# with %q; the rest is the earlier relay's key. The origin sees, for\n", migrate.KeyPrefix)
	fmt.Fprintf(&buf, "# each group, a node built from the group key with node.id below (the earlier\n")
	fmt.Fprintf(&buf, "# relay forwarded the first client's node).\n")
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(&doc); err != nil {
		return err
	}
	_, err := stdout.Write(buf.Bytes())
	return err
}

// markPlaceholder comments the placeholder origin, wherever it is in n.
func markPlaceholder(n *yaml.Node) {
	if n.Kind == yaml.ScalarNode && n.Value == originPlaceholder {
		n.LineComment = "# placeholder: your origin control plane's host:port"
	}
	for _, c := range n.Content {
		markPlaceholder(c)
	}
}

// readBootstrap reads the earlier relay's bootstrap file.
func readBootstrap(path string) (*migrate.Bootstrap, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	b, err := migrate.ParseBootstrap(data)
	if err != nil {
		return nil, fmt.Errorf("--bootstrap %s: %w", path, err)
	}
	return b, nil
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
