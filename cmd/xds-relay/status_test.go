package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	statusv3 "github.com/envoyproxy/go-control-plane/envoy/service/status/v3"
	rpcstatus "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/xds-relay/xds-relay/internal/xdstest"
)

const (
	clusterType = "type.googleapis.com/envoy.config.cluster.v3.Cluster"
	statusC1    = "status-c1"
	statusC2    = "status-c2"
	nackWhy     = "connect_timeout too short"
)

// startCSDSRelay runs the relay binary with CSDS on, serving two clusters
// from a file origin; extra is more config (downstream TLS).
func startCSDSRelay(t *testing.T, extra string) servingLog {
	t.Helper()
	dir := t.TempDir()
	res := filepath.Join(dir, "resources")
	if err := os.Mkdir(res, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, c := range []string{statusC1, statusC2} {
		y := "\"@type\": " + clusterType + "\nname: " + c + "\nconnect_timeout: 1s\n"
		if err := os.WriteFile(filepath.Join(res, c+".yaml"), []byte(y), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cfg := filepath.Join(dir, "relay.yaml")
	yaml := fmt.Sprintf("listen: 127.0.0.1:0\nadmin: 127.0.0.1:0\ncsds_listen: 127.0.0.1:0\nauthorities:\n  - name: a\n    origins: [\"file://%s\"]\nshutdown_grace_period: 5s\n%s", res, extra)
	if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startProcess(t, "serve", "--config", cfg)
	s := p.waitServing(t)
	if s.CSDS == "" {
		t.Fatalf("no csds_listen in the serving log:\n%s", p.stderr)
	}
	return s
}

// fleet connects two real clients to the relay at addr: a delta one
// (envoy-acker) that ACKs both clusters, and a SotW one (envoy-nacker)
// that NACKs the first. It returns the versions each was sent (the
// acker's by name).
func fleet(t *testing.T, addr string, creds credentials.TransportCredentials) (acked map[string]string, nackerVersion string) {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	acker, leave := xdstest.Start(t, xdstest.DeltaOpener(conn))
	t.Cleanup(leave)
	acker.Send(&discoveryv3.DeltaDiscoveryRequest{Node: &corev3.Node{Id: "envoy-acker", Cluster: "web"}, TypeUrl: clusterType,
		ResourceNamesSubscribe: []string{statusC1, statusC2}})
	acked = map[string]string{}
	for len(acked) < 2 {
		r := acker.Recv()
		for _, res := range r.GetResources() {
			acked[res.GetName()] = res.GetVersion()
		}
		acker.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: clusterType, ResponseNonce: r.GetNonce()})
	}
	nacker, leave := xdstest.Start(t, xdstest.SotWOpener(conn))
	t.Cleanup(leave)
	nacker.Send(&discoveryv3.DiscoveryRequest{Node: &corev3.Node{Id: "envoy-nacker", Cluster: "web"}, TypeUrl: clusterType, ResourceNames: []string{statusC1}})
	r := nacker.Recv()
	nacker.Send(&discoveryv3.DiscoveryRequest{TypeUrl: clusterType, ResourceNames: []string{statusC1}, ResponseNonce: r.GetNonce(),
		ErrorDetail: &rpcstatus.Status{Code: int32(codes.InvalidArgument), Message: nackWhy}})
	return acked, r.GetVersionInfo()
}

// runStatus runs `xds-relay status` with args.
func runStatus(args ...string) (code int, stdout, stderr string) {
	var out, errOut bytes.Buffer
	code = dispatch(context.Background(), append([]string{"status"}, args...), &out, &errOut)
	return code, out.String(), errOut.String()
}

// tableRows splits a printed table into its cells (tabwriter pads with at
// least two spaces; cells hold single spaces only).
func tableRows(out string) [][]string {
	var rows [][]string
	for _, line := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
		rows = append(rows, regexp.MustCompile(`\s{2,}`).Split(strings.TrimSpace(line), -1))
	}
	return rows
}

// cut is a version as the table shows it: 12 characters, then "…".
func cut(v string) string {
	if len(v) > 12 {
		return v[:12] + "…"
	}
	return v
}

// TestStatus: `xds-relay status` against the relay binary with real
// clients: a table, one row per client stream and type (resources, how
// many SYNCED, NACKED..., versions, the NACK), for every client or one
// node; the CSDS response as JSON; a node no client has and a relay that
// cannot be asked exit 1.
func TestStatus(t *testing.T) {
	s := startCSDSRelay(t, "")
	acked, nackerVersion := fleet(t, s.Listen, insecure.NewCredentials())
	ackerVersions := []string{acked[statusC1], acked[statusC2]}
	slices.Sort(ackerVersions)
	header := []string{"NODE", "CLUSTER", "TYPE", "RESOURCES", "STATUS", "VERSIONS", "ERROR"}
	ackerRow := []string{"envoy-acker", "web", "Cluster", "2", "2 SYNCED", cut(ackerVersions[0]) + ", " + cut(ackerVersions[1]), "-"}
	nackerRow := []string{"envoy-nacker", "web", "Cluster", "1", "1 NACKED", nackerVersion, statusC1 + ": " + nackWhy}

	// The relay applies an answer after the client sent it: ask until
	// both are seen.
	var stdout string
	xdstest.Poll(t, "both clients' answers in the table", func() error {
		code, out, errOut := runStatus("--csds", s.CSDS)
		stdout = out
		if code != exitOK {
			return fmt.Errorf("exit %d: %s", code, errOut)
		}
		if got := tableRows(out); !slices.EqualFunc(got, [][]string{header, ackerRow, nackerRow}, slices.Equal) {
			return fmt.Errorf("table:\n%s", out)
		}
		return nil
	})
	t.Logf("xds-relay status --csds %s:\n%s", s.CSDS, stdout)

	t.Run("one node", func(t *testing.T) {
		code, out, errOut := runStatus("--csds", s.CSDS, "--node", "envoy-nacker")
		if got := tableRows(out); code != exitOK || !slices.EqualFunc(got, [][]string{header, nackerRow}, slices.Equal) {
			t.Errorf("exit %d, stdout:\n%s\nstderr: %s\nwant the nacker's row alone", code, out, errOut)
		}
	})
	t.Run("json", func(t *testing.T) {
		code, out, errOut := runStatus("--csds", s.CSDS, "--json")
		resp := &statusv3.ClientStatusResponse{}
		if err := protojson.Unmarshal([]byte(out), resp); code != exitOK || err != nil {
			t.Fatalf("exit %d, %v; stdout:\n%s\nstderr: %s", code, err, out, errOut)
		}
		var got []string
		for _, c := range resp.GetConfig() {
			for _, g := range c.GetGenericXdsConfigs() {
				got = append(got, fmt.Sprintf("%s %s %s %s %s %q", c.GetNode().GetId(), g.GetName(), g.GetVersionInfo(),
					g.GetConfigStatus(), g.GetClientStatus(), g.GetErrorState().GetDetails()))
			}
		}
		slices.Sort(got)
		want := []string{
			fmt.Sprintf("envoy-acker %s %s SYNCED ACKED %q", statusC1, acked[statusC1], ""),
			fmt.Sprintf("envoy-acker %s %s SYNCED ACKED %q", statusC2, acked[statusC2], ""),
			fmt.Sprintf("envoy-nacker %s %s ERROR NACKED %q", statusC1, nackerVersion, nackWhy),
		}
		if !slices.Equal(got, want) {
			t.Errorf("JSON entries:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	})
	t.Run("a node no client has", func(t *testing.T) {
		code, out, errOut := runStatus("--csds", s.CSDS, "--node", "nobody")
		if code != exitFail || out != "no connected client streams\n" || !strings.Contains(errOut, `no connected client stream has node id "nobody"`) {
			t.Errorf("exit %d, stdout %q, stderr %q", code, out, errOut)
		}
	})
	t.Run("no relay there", func(t *testing.T) {
		code, _, errOut := runStatus("--csds", s.Admin, "--timeout", "2s") // HTTP, not gRPC
		if code != exitFail || !strings.Contains(errOut, "xds-relay status: CSDS at "+s.Admin+": ") {
			t.Errorf("exit %d, stderr %q", code, errOut)
		}
	})
	t.Run("no --csds", func(t *testing.T) {
		code, _, errOut := runStatus()
		if code != exitUsage || !strings.Contains(errOut, "--csds host:port is required") {
			t.Errorf("exit %d, stderr %q", code, errOut)
		}
	})
}

// TestStatusTLS: the CSDS listener takes downstream.tls (client
// certificates required with ca_file); status asks it with --ca-file,
// --cert-file and --key-file, and a plaintext ask fails.
func TestStatusTLS(t *testing.T) {
	dir := t.TempDir()
	ca := xdstest.NewCA(t, "status test CA")
	caFile := ca.WriteFile(dir, "ca.pem")
	serverCert, serverKey := ca.Server("relay").WriteFiles(t, dir, "server")
	clientLeaf := ca.Client("operator")
	clientCert, clientKey := clientLeaf.WriteFiles(t, dir, "client")
	s := startCSDSRelay(t, fmt.Sprintf("downstream:\n  tls: {cert_file: %q, key_file: %q, ca_file: %q}\n", serverCert, serverKey, caFile))
	fleet(t, s.Listen, credentials.NewTLS(&tls.Config{RootCAs: ca.Pool(), Certificates: []tls.Certificate{clientLeaf.TLS}, MinVersion: tls.VersionTLS12}))

	xdstest.Poll(t, "the clients in the table over TLS", func() error {
		code, out, errOut := runStatus("--csds", s.CSDS, "--ca-file", caFile, "--cert-file", clientCert, "--key-file", clientKey)
		if rows := tableRows(out); code != exitOK || len(rows) != 3 || rows[2][4] != "1 NACKED" {
			return fmt.Errorf("exit %d, stdout:\n%s\nstderr: %s", code, out, errOut)
		}
		return nil
	})
	code, _, errOut := runStatus("--csds", s.CSDS, "--timeout", "2s")
	if code != exitFail || !strings.Contains(errOut, "xds-relay status: CSDS at "+s.CSDS+": Unavailable") {
		t.Errorf("plaintext ask of a TLS listener: exit %d, stderr %q", code, errOut)
	}
}

// grpcurlModule is the grpcurl the documented command is run with (go
// install fetches and builds it once per machine, about 45 s cold; the
// module and build caches make later installs take about a second).
const grpcurlModule = "github.com/fullstorydev/grpcurl/cmd/grpcurl@v1.9.3"

// TestStatusDocumentedGrpcurl runs the grpcurl line of docs/operations.md
// ("Client status (CSDS)") as written, against the relay binary with the
// documented address replaced by its CSDS listener's: grpcurl needs server
// reflection to find the service, and the answer lists the envoy-* clients.
func TestStatusDocumentedGrpcurl(t *testing.T) {
	args := documentedCommand(t, "../../docs/operations.md", "### Client status (CSDS)", "grpcurl")
	s := startCSDSRelay(t, "")
	fleet(t, s.Listen, insecure.NewCredentials())
	const documentedAddr = "127.0.0.1:18003"
	if !slices.Contains(args, documentedAddr) {
		t.Fatalf("the documented command %q does not name %s", args, documentedAddr)
	}
	for i, a := range args {
		if a == documentedAddr {
			args[i] = s.CSDS
		}
	}
	grpcurl := installGrpcurl(t)
	xdstest.Poll(t, "grpcurl's answer lists both clients", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), xdstest.WaitTimeout)
		defer cancel()
		cmd := exec.CommandContext(ctx, grpcurl, args[1:]...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("grpcurl %q: %v\nstderr:\n%s", args[1:], err, stderr.String())
		}
		resp := &statusv3.ClientStatusResponse{}
		if err := protojson.Unmarshal(stdout.Bytes(), resp); err != nil {
			t.Fatalf("grpcurl's output is not a ClientStatusResponse: %v\n%s", err, stdout.String())
		}
		var ids []string
		for _, c := range resp.GetConfig() {
			ids = append(ids, c.GetNode().GetId())
		}
		slices.Sort(ids)
		if !slices.Equal(ids, []string{"envoy-acker", "envoy-nacker"}) {
			return fmt.Errorf("clients %v in:\n%s", ids, stdout.String())
		}
		return nil
	})
}

// installGrpcurl installs grpcurlModule into a directory of the test's
// and returns the binary; the test is skipped when the module cannot be
// fetched here (no module proxy).
func installGrpcurl(t *testing.T) string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go command to install grpcurl with: %v", err)
	}
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, goBin, "install", grpcurlModule)
	cmd.Dir = dir // outside this module: grpcurl's own dependencies
	cmd.Env = append(os.Environ(), "GOBIN="+dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Skipf("grpcurl (%s) could not be installed here: %v\n%s", grpcurlModule, err, out)
	}
	return filepath.Join(dir, "grpcurl")
}

// documentedCommand is the first "$ name ..." command line of a console
// block in the section of file that heading starts, its continuation
// lines (a trailing \) joined, split into words as a shell would (single
// and double quotes).
func documentedCommand(t *testing.T, file, heading, name string) []string {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(data), "\n"+heading+"\n")
	if !ok {
		t.Fatalf("%s has no section %q", file, heading)
	}
	section, _, _ = strings.Cut(section, "\n#")
	_, rest, ok := strings.Cut(section, "\n$ "+name+" ")
	if !ok {
		t.Fatalf("%s, %s: no \"$ %s\" command", file, heading, name)
	}
	var line strings.Builder
	line.WriteString(name + " ")
	for _, l := range strings.Split(rest, "\n") {
		l = strings.TrimSpace(l)
		if cont, ok := strings.CutSuffix(l, "\\"); ok {
			line.WriteString(cont + " ")
			continue
		}
		line.WriteString(l)
		break
	}
	return shellWords(t, line.String())
}

// shellWords splits s into words as a POSIX shell would, for the quoting a
// documented command uses: single quotes, double quotes (with \" and \\),
// blanks between words.
func shellWords(t *testing.T, s string) []string {
	t.Helper()
	var words []string
	var w strings.Builder
	inWord := false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				t.Fatalf("unclosed ' in %q", s)
			}
			w.WriteString(s[i+1 : i+1+j])
			i, inWord = i+1+j, true
		case c == '"':
			for i++; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' && i+1 < len(s) && strings.IndexByte(`"\$`+"`", s[i+1]) >= 0 {
					i++
				}
				w.WriteByte(s[i])
			}
			if i == len(s) {
				t.Fatalf("unclosed \" in %q", s)
			}
			inWord = true
		case c == ' ' || c == '\t':
			if inWord {
				words = append(words, w.String())
				w.Reset()
				inWord = false
			}
		default:
			w.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		words = append(words, w.String())
	}
	return words
}
