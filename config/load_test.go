package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"go.yaml.in/yaml/v3"

	"github.com/xds-relay/xds-relay/internal/access"
	"github.com/xds-relay/xds-relay/internal/xdstype"
)

// problem is what tests compare of a FieldError: where, and a fragment of what.
type problem struct {
	Path string
	Line int
	Has  string // substring of Problem
}

func problemsOf(t *testing.T, err error) []problem {
	t.Helper()
	var out []problem
	for _, fe := range Problems(err) {
		out = append(out, problem{Path: fe.Path, Line: fe.Line, Has: fe.Problem})
	}
	return out
}

// diffProblems compares paths and lines exactly and requires each Has to be
// contained in the actual problem text.
func diffProblems(want, got []problem) string {
	return cmp.Diff(want, got, cmp.Comparer(func(a, b problem) bool {
		return a.Path == b.Path && a.Line == b.Line &&
			(strings.Contains(a.Has, b.Has) || strings.Contains(b.Has, a.Has))
	}))
}

func TestLoadExample(t *testing.T) {
	c, err := Load("example.yaml")
	if err != nil {
		t.Fatalf("Load(example.yaml): %v", err)
	}
	want := Default()
	want.Authorities = []Authority{
		{Name: "auth.example", Origins: []string{"127.0.0.1:19000", "127.0.0.1:19001"}, Transport: xdstype.TransportDelta, GlobCollections: GlobNative},
		{Name: "legacy", Origins: []string{"127.0.0.1:19100"}, Transport: xdstype.TransportSotW, GlobCollections: GlobEmulated, PlainNames: new(true)},
	}
	want.Authorities[0].Allow = []access.AllowEntry{{URISAN: "spiffe://fleet.example/ns/prod/*"}, {DNSSAN: "*.prod.example"}, {NodeCluster: "prod-*"}, {NodeID: "envoy-*"}}
	want.Authorities[0].AllowByType = map[string][]access.AllowEntry{secretTypeURL: {{URISAN: "spiffe://fleet.example/ns/prod/sa/gateway"}}}
	// The rule schema is internal/aggregation's; here only their number.
	if diff := cmp.Diff(want, c, cmpopts.IgnoreUnexported(Config{}), cmpopts.EquateEmpty(), cmpopts.IgnoreFields(Config{}, "Aggregation")); diff != "" {
		t.Errorf("example.yaml is not Default() plus its authorities and rules (-want +got):\n%s", diff)
	}
	if got := len(c.Aggregation.Rules); got != 2 {
		t.Errorf("example.yaml has %d aggregation rules, want 2", got)
	}
	if got := c.Source(); got != "example.yaml" {
		t.Errorf("Source() = %q, want example.yaml", got)
	}
}

func TestDemo(t *testing.T) {
	onDisk, err := os.ReadFile("demo/relay.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(onDisk), string(DemoYAML())); diff != "" {
		t.Errorf("embedded demo differs from demo/relay.yaml (-disk +embedded):\n%s", diff)
	}
	dir := t.TempDir()
	c, err := Demo(dir)
	if err != nil {
		t.Fatalf("Demo: %v", err)
	}
	a, ok := c.Authority("demo.xds-relay.local")
	if !ok {
		t.Fatalf("demo has no authority demo.xds-relay.local: %+v", c.Authorities)
	}
	wantOrigins := []string{"file://" + filepath.Join(dir, "config/demo/resources")}
	if diff := cmp.Diff(wantOrigins, a.Origins); diff != "" {
		t.Errorf("demo origins not rooted in the extracted tree (-want +got):\n%s", diff)
	}
	if fi, err := os.Stat(filepath.Join(dir, "config/demo/resources")); err != nil || !fi.IsDir() {
		t.Errorf("demo resources not extracted: %v", err)
	}
	if c.Listen != "127.0.0.1:18000" || c.Admin != "127.0.0.1:18001" {
		t.Errorf("demo addresses = %s, %s; want 127.0.0.1:18000, 127.0.0.1:18001", c.Listen, c.Admin)
	}
	// The config is a file in the tree, so the demo reloads from it.
	if want := filepath.Join(dir, "config/demo/relay.yaml"); c.Source() != want {
		t.Errorf("demo config source = %q, want %q (a file a reload can read)", c.Source(), want)
	}
	if again, err := Load(c.Source()); err != nil {
		t.Errorf("demo config file does not load again: %v", err)
	} else if diff := cmp.Diff(c, again, cmpopts.IgnoreUnexported(Config{})); diff != "" {
		t.Errorf("demo config file loads as another config (-demo +file):\n%s", diff)
	}

	// Addresses given on the command line are in the file too.
	dir2 := t.TempDir()
	c2, err := DemoWith(dir2, DemoAddrs{Listen: "127.0.0.1:0", Admin: "127.0.0.1:0", REST: "127.0.0.1:0"})
	if err != nil {
		t.Fatalf("DemoWith: %v", err)
	}
	if c2.Listen != "127.0.0.1:0" || c2.Admin != "127.0.0.1:0" || c2.RESTListen != "127.0.0.1:0" {
		t.Errorf("DemoWith addresses = %s, %s, %s; want 127.0.0.1:0 each", c2.Listen, c2.Admin, c2.RESTListen)
	}
}

func TestLoadReportsAllThreeMistakes(t *testing.T) {
	_, err := Load("testdata/three_mistakes.yaml")
	if !errors.Is(err, ErrInvalid) {
		t.Fatalf("Load = %v, want an ErrInvalid", err)
	}
	want := []problem{
		{Path: "listen", Line: 3, Has: `"127.0.0.1" is not host:port`},
		{Path: "authorities[0].transport", Line: 8, Has: `"grpc" is not one of delta, sotw`},
		{Path: "cache.max_bytes", Line: 11, Has: `invalid byte size: "12 parsecs"`},
	}
	if diff := diffProblems(want, problemsOf(t, err)); diff != "" {
		t.Errorf("problems (-want +got):\n%s", diff)
	}
	lines := strings.Split(err.Error(), "\n")
	if len(lines) != 3 {
		t.Fatalf("error has %d lines, want one per problem:\n%v", len(lines), err)
	}
	for _, l := range lines {
		if !strings.HasPrefix(l, "testdata/three_mistakes.yaml: ") {
			t.Errorf("problem %q does not name its source file", l)
		}
	}
	if got, want := lines[0], `testdata/three_mistakes.yaml: listen (line 3): "127.0.0.1" is not host:port: missing port in address`; got != want {
		t.Errorf("first line = %q\nwant %q", got, want)
	}
}

func TestParseRejectsUnknownKeys(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want []problem
	}{
		{
			name: "top level",
			yaml: "listn: \"127.0.0.1:1\"\n" + minimalAuthorities,
			want: []problem{{Path: "listn", Line: 1, Has: `unknown key "listn" (did you mean "listen"?)`}},
		},
		{
			name: "nested",
			yaml: minimalAuthorities + "cache:\n  max_resource: 10\n",
			want: []problem{{Path: "cache.max_resource", Line: 5, Has: `unknown key "max_resource"`}},
		},
		{
			name: "in a list entry",
			yaml: minimalAuthorities + "  - name: b\n    origins: [\"h:2\"]\n    transprt: sotw\n",
			want: []problem{{Path: "authorities[1].transprt", Line: 6, Has: `unknown key "transprt"`}},
		},
		{
			name: "two at once",
			yaml: "foo: 1\n" + minimalAuthorities + "log:\n  colour: true\n",
			want: []problem{
				{Path: "foo", Line: 1, Has: `unknown key "foo"`},
				{Path: "log.colour", Line: 6, Has: `unknown key "colour"`},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.yaml), "test.yaml")
			if diff := diffProblems(tt.want, problemsOf(t, err)); diff != "" {
				t.Errorf("problems (-want +got):\n%s\nerror: %v", diff, err)
			}
		})
	}
}

// minimalAuthorities is the smallest valid config body (3 lines).
const minimalAuthorities = "authorities:\n  - name: a\n    origins: [\"h:1\"]\n"

func TestParseTypeErrors(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want []problem
	}{
		{
			name: "string for integer",
			yaml: minimalAuthorities + "cache:\n  max_resources: many\n",
			want: []problem{{Path: "cache.max_resources", Line: 5, Has: `want an integer, got "many"`}},
		},
		{
			name: "bad duration",
			yaml: minimalAuthorities + "downstream:\n  send_timeout: 30 seconds\n",
			want: []problem{{Path: "downstream.send_timeout", Line: 5, Has: `want a duration such as "30s" or "250ms", got "30 seconds"`}},
		},
		{
			name: "integer duration",
			yaml: minimalAuthorities + "shutdown_grace_period: 10\n",
			want: []problem{{Path: "shutdown_grace_period", Line: 4, Has: `got "10"`}},
		},
		{
			name: "mapping for string",
			yaml: "listen: {host: a}\n" + minimalAuthorities,
			want: []problem{{Path: "listen", Line: 1, Has: "want a string, got a mapping"}},
		},
		{
			name: "scalar for list",
			yaml: "authorities: a\n",
			// Not also "at least one authority is required": derived
			// from the cause above (TestDerivedProblems).
			want: []problem{
				{Path: "authorities", Line: 1, Has: `want a list, got "a"`},
			},
		},
		{
			name: "decimal for integer",
			yaml: minimalAuthorities + "downstream:\n  drain_waves: 2.5\n",
			want: []problem{{Path: "downstream.drain_waves", Line: 5, Has: `want an integer, got "2.5"`}},
		},
		{
			name: "whole decimal for integer",
			yaml: minimalAuthorities + "downstream:\n  drain_waves: 2.0\n",
			want: []problem{{Path: "downstream.drain_waves", Line: 5, Has: `want an integer, got "2.0"`}},
		},
		{
			name: "exponent for integer",
			yaml: minimalAuthorities + "downstream:\n  limits:\n    max_streams: 1e3\n",
			want: []problem{{Path: "downstream.limits.max_streams", Line: 6, Has: `want an integer, got "1e3"`}},
		},
		{
			name: "bool",
			yaml: minimalAuthorities + "upstream:\n  tls:\n    enabled: maybe\n",
			want: []problem{{Path: "upstream.tls.enabled", Line: 6, Has: `want true or false, got "maybe"`}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.yaml), "test.yaml")
			if diff := diffProblems(tt.want, problemsOf(t, err)); diff != "" {
				t.Errorf("problems (-want +got):\n%s\nerror: %v", diff, err)
			}
		})
	}
}

func TestParseDocumentErrors(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		has  string
	}{
		{name: "syntax", yaml: "listen: [\n", has: "test.yaml: line 1: did not find expected node content (YAML syntax)"},
		{name: "duplicate key", yaml: "listen: a:1\n" + minimalAuthorities + "listen: b:2\n", has: `test.yaml: listen (line 5): duplicate key "listen" (first at line 1)`},
		{name: "two documents", yaml: minimalAuthorities + "---\nlisten: x\n", has: "test.yaml: line 4: a second YAML document starts here: a config file holds one"},
		{name: "empty file", yaml: "", has: "test.yaml: authorities (line 1): at least one authority is required"},
		{name: "alias bomb", yaml: aliasBomb, has: "node.id (line 9): want a string, got a list"},
		{name: "merge bomb with a problem in each visit", yaml: mergeBomb("listn: x"), has: "more problems not shown"},
		{name: "merge bomb", yaml: mergeBomb(`listen: "a:1"`), has: "aliases and merges expand too far"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.yaml), "test.yaml")
			if err == nil || !strings.Contains(err.Error(), tt.has) {
				t.Errorf("Parse error = %v\nwant it to contain %q", err, tt.has)
			}
		})
	}
}

// mergeBomb merges a mapping holding entry 10^6 times into the root
// mapping: 200 bytes of YAML.
func mergeBomb(entry string) string {
	var b strings.Builder
	b.WriteString("m0: &m0 {" + entry + "}\n")
	for i := 1; i <= 6; i++ {
		fmt.Fprintf(&b, "m%d: &m%d {", i, i)
		for range 10 {
			fmt.Fprintf(&b, "<<: *m%d, ", i-1)
		}
		b.WriteString("}\n")
	}
	b.WriteString("<<: *m6\n")
	return b.String()
}

// aliasBomb expands to 10^8 strings if aliases are followed naively: Parse
// must still answer at once (the test's deadline is the go test timeout).
const aliasBomb = `a: &a ["x","x","x","x","x","x","x","x","x","x"]
b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a,*a]
c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b,*b]
d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c,*c]
e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d,*d]
f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e,*e]
g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f,*f]
node:
  id: [*g,*g,*g,*g,*g,*g,*g,*g,*g,*g]
`

func TestParseAppliesDefaults(t *testing.T) {
	c, err := Parse([]byte(minimalAuthorities+"downstream:\n  send_timeout: 5s\n"), "test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want := Default()
	want.Authorities = []Authority{{Name: "a", Origins: []string{"h:1"}, Transport: xdstype.TransportDelta, GlobCollections: GlobNative}}
	want.Downstream.SendTimeout = 5 * time.Second
	if diff := cmp.Diff(want, c, cmpopts.IgnoreUnexported(Config{}), cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// TestPerTypeGlobDefaults: a per-type transport takes the glob default of
// its ADS variant (emulated over SotW, native over delta).
func TestPerTypeGlobDefaults(t *testing.T) {
	c, err := Parse([]byte("authorities:\n  - name: a\n    origins: [\"h:1\"]\n    transport: sotw-per-type\n  - name: b\n    origins: [\"h:2\"]\n    transport: delta-per-type\n"), "test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if got := []string{c.Authorities[0].GlobCollections, c.Authorities[1].GlobCollections}; !cmp.Equal(got, []string{GlobEmulated, GlobNative}) {
		t.Errorf("glob_collections defaults %v, want [emulated native]", got)
	}
}

func TestParseMergeKeys(t *testing.T) {
	yaml := "x-origin: &o\n  origins: [\"h:1\"]\n  transport: sotw\n" +
		"authorities:\n  - <<: *o\n    name: a\n  - <<: *o\n    name: b\n"
	// x-origin is itself an unknown key: anchors need a home, and strictness
	// wins. Without it the merge works.
	_, err := Parse([]byte(yaml), "test.yaml")
	if diff := diffProblems([]problem{{Path: "x-origin", Line: 1, Has: "unknown key"}}, problemsOf(t, err)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	yaml = "authorities:\n  - &a\n    name: a\n    origins: [\"h:1\"]\n    transport: sotw\n  - name: b\n    <<: *a\n"
	c, err := Parse([]byte(yaml), "test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want := []Authority{
		{Name: "a", Origins: []string{"h:1"}, Transport: xdstype.TransportSotW, GlobCollections: GlobEmulated},
		{Name: "b", Origins: []string{"h:1"}, Transport: xdstype.TransportSotW, GlobCollections: GlobEmulated},
	}
	if diff := cmp.Diff(want, c.Authorities); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	// A list of merges: the earlier mapping wins, explicit keys win over both.
	yaml = "authorities:\n" +
		"  - &a {name: a, origins: [\"h:1\"], transport: sotw}\n" +
		"  - &b {name: b, origins: [\"h:2\"], glob_collections: emulated}\n" +
		"  - {<<: [*b, *a], name: c}\n"
	c, err = Parse([]byte(yaml), "test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	wantC := Authority{Name: "c", Origins: []string{"h:2"}, Transport: xdstype.TransportSotW, GlobCollections: GlobEmulated}
	if diff := cmp.Diff(wantC, c.Authorities[2]); diff != "" {
		t.Errorf("list merge (-want +got):\n%s", diff)
	}
}

func TestLoadMissingFile(t *testing.T) {
	_, err := Load(filepath.Join(t.TempDir(), "nope.yaml"))
	if !errors.Is(err, os.ErrNotExist) || errors.Is(err, ErrInvalid) {
		t.Errorf("Load(missing) = %v, want a not-exist error that is not ErrInvalid", err)
	}
}

func TestLineIndex(t *testing.T) {
	src := "listen: a:1\n" + // 1
		"aggregation:\n" + // 2
		"  rules:\n" + // 3
		"    - name: r0\n" + // 4
		"    - name: r1\n" + // 5
		"      match:\n" + // 6
		"        node: {id: x}\n" // 7
	var n yaml.Node
	if err := yaml.Unmarshal([]byte(src), &n); err != nil {
		t.Fatal(err)
	}
	root, nodes := indexLines(&n)
	if nodes != 12 { // the document, 3 mappings in rules, ... : values, not keys
		t.Errorf("indexLines counted %d nodes, want 12", nodes)
	}
	tests := []struct {
		path string
		want int
	}{
		{"listen", 1},
		{"aggregation.rules[1]", 5},
		{"aggregation.rules[1].match.node.id", 7},
		{"aggregation.rules[1].match.node.id.regex", 7}, // absent: nearest parent
		{"aggregation.rules[0].match", 4},
		{"cache.max_bytes", 1}, // absent section: the document
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			if got := root.line(tt.path); got != tt.want {
				t.Errorf("line(%q) = %d, want %d", tt.path, got, tt.want)
			}
		})
	}
	if got := (lineIndex(nil)).line("listen"); got != 0 {
		t.Errorf("empty index line = %d, want 0", got)
	}
}

// TestSyntaxErrorLine: a YAML syntax error names the line of the mistake,
// not the line where the block around it began (the YAML library said
// "line 1" for a badly indented line 4), and says it is YAML's.
func TestSyntaxErrorLine(t *testing.T) {
	const hint = " (YAML syntax: check this line's indentation against the lines above it)"
	tests := []struct {
		name, yaml, want string
	}{
		{"a list item's key indented one space short", "authorities:\n  - name: a\n    origins: [\"x:1\"]\n   transport: sotw\n",
			"relay.yaml: line 4: did not find expected '-' indicator" + hint},
		{"a key indented too far", "listen: 127.0.0.1:18000\nauthorities:\n  - name: a\n    origins: [\"x:1\"]\n      transport: sotw\n",
			"relay.yaml: line 5: did not find expected key" + hint},
		{"a key indented under a scalar", "listen: 127.0.0.1:18000\nadmin: 127.0.0.1:18001\n  csds_listen: 127.0.0.1:18003\n",
			"relay.yaml: line 3: mapping values are not allowed in this context" + hint},
		{"a key one space short in a mapping", "log:\n  level: info\n format: json\n",
			"relay.yaml: line 3: did not find expected key" + hint},
		{"a tab", "log:\n  level: info\n\tformat: json\n",
			"relay.yaml: line 3: found a tab character that violates indentation" + hint},
		{"an unclosed flow list", "listen: 127.0.0.1:18000\nauthorities: [\n",
			"relay.yaml: line 2: did not find expected node content (YAML syntax)"},
		// 5000 lines: the line is found by a binary search over prefixes
		// (about 13 parses), not by parsing each.
		{"the last line of a long list", "authorities:\n" + strings.Repeat("  - name: a\n    origins: [\"x:1\"]\n", 2500) + "   transport: sotw\n",
			"relay.yaml: line 5002: did not find expected '-' indicator" + hint},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.yaml), "relay.yaml")
			if err == nil || err.Error() != tt.want {
				t.Errorf("Parse error:\n%v\nwant:\n%s", err, tt.want)
			}
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("a syntax error is not ErrInvalid: %v", err)
			}
		})
	}
}

// TestDerivedProblems: a problem that follows from another is never listed
// before its cause: validation's problems at a value decoding could not
// read (a misspelt key, a string for a list) are left out, and a missing
// field another requires is reported on the requiring field's line.
func TestDerivedProblems(t *testing.T) {
	tests := []struct {
		name, yaml, want string
	}{
		{"a misspelt key, not also its absence",
			"listen: 127.0.0.1:18000\nauthorities:\n  - name: a\n    origin: [127.0.0.1:9]\n",
			`relay.yaml: authorities[0].origin (line 4): unknown key "origin" (did you mean "origins"?)`},
		{"a string for a list, not also an empty list",
			"authorities:\n  - name: a\n    origins: 127.0.0.1:9\n",
			`relay.yaml: authorities[0].origins (line 3): want a list, got "127.0.0.1:9"`},
		{"a required field on the line of what requires it, after its problem",
			"listen: 127.0.0.1:18000\ndownstream:\n  tls:\n    cert_file: /nonexistent/cert.pem\nauthorities:\n  - name: a\n    origins: [\"x:1\"]\n",
			"relay.yaml: downstream.tls.cert_file (line 4): /nonexistent/cert.pem: no such file or directory\n" +
				"relay.yaml: downstream.tls.key_file (line 4): required when cert_file is set"},
		{"unrelated problems are all listed",
			"listen: nope\nauthorities:\n  - name: a\n    origin: [127.0.0.1:9]\n    origins: [\"x:1\"]\n",
			"relay.yaml: listen (line 1): \"nope\" is not host:port: missing port in address\n" +
				`relay.yaml: authorities[0].origin (line 4): unknown key "origin" (did you mean "origins"?)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.yaml), "relay.yaml")
			if err == nil || err.Error() != tt.want {
				t.Errorf("Parse error:\n%v\nwant:\n%s", err, tt.want)
			}
		})
	}
}
