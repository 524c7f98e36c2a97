package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"

	adminv3 "github.com/envoyproxy/go-control-plane/envoy/admin/v3"
	statusv3 "github.com/envoyproxy/go-control-plane/envoy/service/status/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
)

// csdsTruncatedHeader is the relay's note on a response cut at its bounds
// (internal/csds.TruncatedHeader).
const csdsTruncatedHeader = "x-xds-relay-csds-truncated"

// statusFlags is what `xds-relay status` was asked for.
type statusFlags struct {
	csds, node                string
	asJSON                    bool
	timeout                   time.Duration
	tls                       bool
	caFile, certFile, keyFile string
	serverName                string
}

// cmdStatus implements `xds-relay status`: it asks a relay's CSDS listener
// (csds_listen) what each connected client stream was sent and answered,
// for one node (--node) or all, and prints a table, one row per client
// stream and type, or the response as JSON (--json). Exit 1 when the relay
// cannot be asked, or --node matches no connected client.
func cmdStatus(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f, err := parseStatusFlags(args, stderr)
	if err != nil {
		return err
	}
	creds, err := f.credentials()
	if err != nil {
		return err
	}
	conn, err := grpc.NewClient(f.csds, grpc.WithTransportCredentials(creds))
	if err != nil {
		return usageError{fmt.Sprintf("--csds %q: %v", f.csds, err)}
	}
	defer conn.Close()
	req := &statusv3.ClientStatusRequest{}
	if f.node != "" {
		req.NodeMatchers = []*matcherv3.NodeMatcher{{NodeId: &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: f.node}}}}
	}
	cctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	var header metadata.MD
	resp, err := statusv3.NewClientStatusDiscoveryServiceClient(conn).FetchClientStatus(cctx, req, grpc.Header(&header))
	if err != nil {
		return fmt.Errorf("CSDS at %s: %s: %s", f.csds, status.Code(err), status.Convert(err).Message())
	}
	for _, note := range header.Get(csdsTruncatedHeader) {
		fmt.Fprintf(stderr, "xds-relay status: the relay cut its answer: %s\n", note)
	}
	if f.asJSON {
		out, err := protojson.MarshalOptions{Multiline: true, Indent: "  "}.Marshal(resp)
		if err != nil {
			return err
		}
		fmt.Fprintln(stdout, string(out))
	} else if err := printStatusTable(stdout, resp); err != nil {
		return err
	}
	if f.node != "" && len(resp.GetConfig()) == 0 {
		fmt.Fprintf(stderr, "xds-relay status: no connected client stream has node id %q\n", f.node)
		return errReported
	}
	return nil
}

// parseStatusFlags defines status' flags and parses args.
func parseStatusFlags(args []string, stderr io.Writer) (*statusFlags, error) {
	fs := flag.NewFlagSet("status", flag.ContinueOnError)
	var f statusFlags
	fs.StringVar(&f.csds, "csds", "", "the relay's CSDS `host:port` (its csds_listen; required)")
	fs.StringVar(&f.node, "node", "", "only the client streams of this node `id`")
	fs.BoolVar(&f.asJSON, "json", false, "print the CSDS response as JSON (protojson), every resource with its version, status and error")
	fs.DurationVar(&f.timeout, "timeout", 10*time.Second, "how long to wait for the answer")
	fs.BoolVar(&f.tls, "tls", false, "use TLS (on by itself with any of the flags below; the system roots verify the relay without --ca-file)")
	fs.StringVar(&f.caFile, "ca-file", "", "PEM roots that verify the relay's certificate (downstream.tls.cert_file)")
	fs.StringVar(&f.certFile, "cert-file", "", "a client certificate (PEM), when the relay requires one (downstream.tls.ca_file; csds_allow)")
	fs.StringVar(&f.keyFile, "key-file", "", "the key of --cert-file (PEM)")
	fs.StringVar(&f.serverName, "server-name", "", "the name to verify in the relay's certificate (default: the host of --csds)")
	if err := parseFlags(fs, args, stderr); err != nil {
		return nil, err
	}
	if f.csds == "" {
		return nil, usageError{"--csds host:port is required (the relay's csds_listen)"}
	}
	if (f.certFile == "") != (f.keyFile == "") {
		return nil, usageError{"--cert-file and --key-file go together"}
	}
	if f.timeout <= 0 {
		return nil, usageError{"--timeout must be positive"}
	}
	return &f, nil
}

// credentials are plaintext, or TLS when any TLS flag is set.
func (f *statusFlags) credentials() (credentials.TransportCredentials, error) {
	if !f.tls && f.caFile == "" && f.certFile == "" && f.serverName == "" {
		return insecure.NewCredentials(), nil
	}
	cfg := &tls.Config{ServerName: f.serverName, MinVersion: tls.VersionTLS12}
	if f.caFile != "" {
		pem, err := os.ReadFile(f.caFile)
		if err != nil {
			return nil, fmt.Errorf("--ca-file: %w", err)
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--ca-file %s: no PEM certificate in it", f.caFile)
		}
	}
	if f.certFile != "" {
		pair, err := tls.LoadX509KeyPair(f.certFile, f.keyFile)
		if err != nil {
			return nil, fmt.Errorf("--cert-file, --key-file: %w", err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return credentials.NewTLS(cfg), nil
}

// statusRow is one client stream's resources of one type.
type statusRow struct {
	node, cluster, typ string
	resources          int
	states             map[string]int
	versions           []string
	err                string
}

// stateOrder is the order of the STATUS column's words.
var stateOrder = []string{"SYNCED", "DOES_NOT_EXIST", "STALE", "NOT_SENT", "NACKED", "UNKNOWN"}

// printStatusTable prints one row per client stream and type: how many
// resources, how many in each state, their versions, the first NACK.
func printStatusTable(w io.Writer, resp *statusv3.ClientStatusResponse) error {
	if len(resp.GetConfig()) == 0 {
		_, err := fmt.Fprintln(w, "no connected client streams")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tCLUSTER\tTYPE\tRESOURCES\tSTATUS\tVERSIONS\tERROR")
	for _, c := range resp.GetConfig() {
		for _, r := range statusRows(c) {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\n", orDash(r.node), orDash(r.cluster), r.typ, r.resources,
				stateSummary(r.states), versionSummary(r.versions), orDash(r.err))
		}
	}
	return tw.Flush()
}

// statusRows groups a client stream's entries by type, in type order.
func statusRows(c *statusv3.ClientConfig) []*statusRow {
	byType := map[string]*statusRow{}
	var types []string
	for _, g := range c.GetGenericXdsConfigs() {
		r := byType[g.GetTypeUrl()]
		if r == nil {
			r = &statusRow{node: c.GetNode().GetId(), cluster: c.GetNode().GetCluster(), typ: shortType(g.GetTypeUrl()), states: map[string]int{}}
			byType[g.GetTypeUrl()] = r
			types = append(types, g.GetTypeUrl())
		}
		r.resources++
		r.states[stateOf(g)]++
		if v := g.GetVersionInfo(); v != "" && !slices.Contains(r.versions, v) {
			r.versions = append(r.versions, v)
		}
		if d := g.GetErrorState().GetDetails(); d != "" && r.err == "" {
			r.err = oneLine(g.GetName() + ": " + d)
		}
	}
	if len(types) == 0 {
		return []*statusRow{{node: c.GetNode().GetId(), cluster: c.GetNode().GetCluster(), typ: "-", states: map[string]int{}}}
	}
	slices.Sort(types)
	out := make([]*statusRow, len(types))
	for i, t := range types {
		out[i] = byType[t]
	}
	return out
}

// stateOf is one entry's word: CSDS's config_status, NACKED for a NACK,
// DOES_NOT_EXIST for an ACKed absence.
func stateOf(g *statusv3.ClientConfig_GenericXdsConfig) string {
	switch {
	case g.GetClientStatus() == adminv3.ClientResourceStatus_NACKED || g.GetConfigStatus() == statusv3.ConfigStatus_ERROR:
		return "NACKED"
	case g.GetClientStatus() == adminv3.ClientResourceStatus_DOES_NOT_EXIST && g.GetConfigStatus() == statusv3.ConfigStatus_SYNCED:
		return "DOES_NOT_EXIST"
	}
	return g.GetConfigStatus().String()
}

// stateSummary: "2 SYNCED, 1 NACKED".
func stateSummary(states map[string]int) string {
	var parts []string
	for _, s := range stateOrder {
		if n := states[s]; n > 0 {
			parts = append(parts, strconv.Itoa(n)+" "+s)
		}
	}
	for s, n := range states {
		if !slices.Contains(stateOrder, s) {
			parts = append(parts, strconv.Itoa(n)+" "+s)
		}
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ", ")
}

// versionSummary lists the distinct versions, each cut to 12 characters
// (the relay's are 64 hex digits), at most 3.
func versionSummary(vs []string) string {
	const most, width = 3, 12
	if len(vs) == 0 {
		return "-"
	}
	slices.Sort(vs)
	var parts []string
	for i, v := range vs {
		if i == most {
			parts = append(parts, fmt.Sprintf("+%d more", len(vs)-most))
			break
		}
		if len(v) > width {
			v = v[:width] + "…"
		}
		parts = append(parts, v)
	}
	return strings.Join(parts, ", ")
}

// shortType is a type URL's message name: "Cluster" for
// type.googleapis.com/envoy.config.cluster.v3.Cluster.
func shortType(typeURL string) string {
	name := typeURL[strings.LastIndex(typeURL, "/")+1:]
	return name[strings.LastIndex(name, ".")+1:]
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// oneLine makes a client's NACK message fit a table cell: control
// characters as spaces, at most 100 characters.
func oneLine(s string) string {
	const most = 100
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, s)
	if r := []rune(s); len(r) > most {
		s = string(r[:most]) + "…"
	}
	return s
}
