package docs

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/xds-relay/xds-relay/config"
	"github.com/xds-relay/xds-relay/internal/migrate"
	"github.com/xds-relay/xds-relay/internal/migrate/legacykey"
)

// root is the repository, from this package's directory.
const root = ".."

// yamlDocs are the documents whose YAML blocks are checked: the README,
// docs/*.md, bench/README.md and every README under deploy/.
func yamlDocs(t *testing.T) []string {
	t.Helper()
	files := []string{"README.md", "bench/README.md"}
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range docs {
		files = append(files, rel(t, d))
	}
	err = filepath.WalkDir(filepath.Join(root, "deploy"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && d.Name() == "README.md" {
			files = append(files, rel(t, p))
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

func rel(t *testing.T, p string) string {
	t.Helper()
	r, err := filepath.Rel(root, p)
	if err != nil {
		t.Fatal(err)
	}
	return filepath.ToSlash(r)
}

// block is one fenced code block of a Markdown file.
type block struct {
	file string
	line int // the fence's line
	lang string
	// attrs are the info string's words after the language: key="value",
	// key='value' or a bare key (value ""), e.g. ```sh ready="synced 100";
	// a repeated key's values are joined by newlines.
	attrs   map[string]string
	section int // the number of headings above it
	text    string
}

func (b block) String() string { return fmt.Sprintf("%s:%d", b.file, b.line) }

var (
	fence     = regexp.MustCompile("^\\s*```\\s*([A-Za-z0-9_-]*)(.*)$")
	fenceAttr = regexp.MustCompile(`([A-Za-z][A-Za-z0-9_-]*)(?:="([^"]*)"|='([^']*)')?`)
)

// fencedBlocks are the fenced code blocks of file, each block's lines
// without the fence's indentation.
func fencedBlocks(t *testing.T, file string) []block {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, file))
	if err != nil {
		t.Fatal(err)
	}
	var out []block
	var cur *block
	var indent string
	section := 0
	for i, line := range strings.Split(string(data), "\n") {
		m := fence.FindStringSubmatch(line)
		switch {
		case m != nil && cur == nil:
			cur = &block{file: file, line: i + 1, lang: m[1], attrs: make(map[string]string), section: section}
			for _, a := range fenceAttr.FindAllStringSubmatch(m[2], -1) {
				v := a[2] + a[3] // "value" or 'value'
				if prev, ok := cur.attrs[a[1]]; ok {
					v = prev + "\n" + v // a repeated key: every value, a line each
				}
				cur.attrs[a[1]] = v
			}
			indent = line[:len(line)-len(strings.TrimLeft(line, " \t"))]
		case m != nil && strings.TrimSpace(line) == "```":
			out = append(out, *cur)
			cur = nil
		case cur != nil:
			cur.text += strings.TrimPrefix(line, indent) + "\n"
		case heading.MatchString(line):
			section++
		}
	}
	if cur != nil {
		t.Errorf("%s:%d: a code block is not closed", file, cur.line)
	}
	return out
}

// yamlBlocks are the ```yaml (or ```yml) blocks of file.
func yamlBlocks(t *testing.T, file string) []block {
	t.Helper()
	var out []block
	for _, b := range fencedBlocks(t, file) {
		if b.lang == "yaml" || b.lang == "yml" {
			out = append(out, b)
		}
	}
	return out
}

// A block is one of these, by its top-level keys.
type blockKind int

const (
	relayConfig      blockKind = iota
	kubernetes                 // apiVersion: a Kubernetes object
	envoy                      // static_resources, dynamic_resources: an Envoy bootstrap
	promConfig                 // groups (rules), rule_files, scrape_configs: Prometheus's
	earlierRules               // fragments: an earlier relay's (envoyproxy/xds-relay) rules file
	earlierBootstrap           // origin_server: an earlier relay's bootstrap file
)

func kindOf(top map[string]any) blockKind {
	switch {
	case top["apiVersion"] != nil:
		return kubernetes
	case top["static_resources"] != nil || top["dynamic_resources"] != nil:
		return envoy
	case top["groups"] != nil || top["scrape_configs"] != nil || top["rule_files"] != nil:
		return promConfig
	case top["fragments"] != nil:
		return earlierRules
	case top["origin_server"] != nil:
		return earlierBootstrap
	}
	return relayConfig
}

// minimalAuthorities completes a relay config fragment that has no
// authorities: the authority aggregation examples send plain names to (an
// origin of its own: 127.0.0.1:18000 is the relay's default listen address).
const minimalAuthorities = `authorities:
  - name: "legacy"
    origins: ["origin.example:15000"]
`

// checkRelayConfig loads and validates text as a relay config. File paths
// in the docs are examples: a problem that is only a missing file is not
// one.
func checkRelayConfig(t *testing.T, b block, text string) {
	t.Helper()
	_, err := config.Parse([]byte(text), b.String())
	if err == nil {
		return
	}
	problems := config.Problems(err)
	if len(problems) == 0 {
		t.Errorf("%v: the relay config does not load: %v", b, err)
		return
	}
	for _, p := range problems {
		if strings.HasSuffix(p.Problem, "no such file or directory") {
			continue
		}
		line := ""
		if p.Line > 0 {
			line = fmt.Sprintf(" (line %d of the doc)", b.line+p.Line)
		}
		t.Errorf("%v: the relay config does not validate: %s%s: %s", b, p.Path, line, p.Problem)
	}
}

// Every YAML block in the docs parses. A relay config block loads and
// validates as `xds-relay validate` would. The rule, by a block's
// top-level keys: apiVersion is a Kubernetes object, static_resources or
// dynamic_resources an Envoy bootstrap, groups, rule_files or
// scrape_configs Prometheus's, origin_server an earlier relay's bootstrap,
// and all of those must only parse; fragments is an earlier relay's rules
// file, which must pass its checks (legacykey.Parse) and convert
// (migrate.Convert); anything else is a relay config, or a fragment of
// one: a fragment without
// authorities is completed with one authority named "legacy" (what
// aggregation examples send plain names to). A block holding several
// configs separates them with "---". A relay config block marked invalid
// (```yaml invalid) shows mistakes: it must not validate.
func TestDocsYAMLBlocks(t *testing.T) {
	n := 0
	for _, file := range yamlDocs(t) {
		for _, b := range yamlBlocks(t, file) {
			dec := yaml.NewDecoder(strings.NewReader(b.text))
			docs := strings.Split(b.text, "\n---\n")
			for i := 0; ; i++ {
				var top map[string]any
				err := dec.Decode(&top)
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Errorf("%v: not YAML: %v", b, err)
					break
				}
				n++
				if kindOf(top) == earlierRules && i < len(docs) {
					checkEarlierRules(t, b, docs[i])
				}
				if kindOf(top) != relayConfig || i >= len(docs) {
					continue
				}
				text := docs[i]
				if _, invalid := b.attrs["invalid"]; invalid {
					if _, err := config.Parse([]byte(text), b.String()); err == nil {
						t.Errorf("%v: marked invalid (an example of mistakes), but the config validates", b)
					}
					continue
				}
				if top["authorities"] == nil {
					text += "\n" + minimalAuthorities
				}
				checkRelayConfig(t, b, text)
			}
		}
	}
	if n == 0 {
		t.Fatal("no YAML blocks found in the docs")
	}
}

// checkEarlierRules checks an earlier relay's rules file as migrate-rules
// reads it: it passes the earlier relay's checks and converts.
func checkEarlierRules(t *testing.T, b block, text string) {
	t.Helper()
	c, err := legacykey.Parse([]byte(text))
	if err != nil {
		t.Errorf("%v: not an earlier-relay rules file: %v", b, err)
		return
	}
	if _, err := migrate.Convert(c, "legacy"); err != nil {
		t.Errorf("%v: the earlier-relay rules do not convert: %v", b, err)
	}
}

// markdownFiles are every Markdown file of the repository.
func markdownFiles(t *testing.T) []string { return repoFiles(t, ".md") }

// repoFiles are the repository's files whose names end in suffix, from
// its root (hidden directories, testdata and node_modules aside).
func repoFiles(t *testing.T, suffix string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && p != root && skippedDir(d.Name()) {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(d.Name(), suffix) {
			out = append(out, rel(t, p))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// skippedDir reports whether a directory of that name holds none of the
// repository's own files.
func skippedDir(name string) bool {
	return strings.HasPrefix(name, ".") || name == "testdata" || name == "node_modules"
}

// mdLink is an inline Markdown link or image: [text](target "title").
var mdLink = regexp.MustCompile(`!?\[[^\]]*\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)

// heading is an ATX heading.
var heading = regexp.MustCompile(`^#{1,6}\s+(.*?)\s*#*\s*$`)

// anchors are the heading anchors of a Markdown file as GitHub makes them:
// lower case, punctuation dropped, spaces to '-', repeats suffixed -1, -2.
func anchors(data []byte) map[string]bool {
	out := make(map[string]bool)
	seen := make(map[string]int)
	inCode := false
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			inCode = !inCode
			continue
		}
		m := heading.FindStringSubmatch(line)
		if inCode || m == nil {
			continue
		}
		var b strings.Builder
		for _, r := range strings.ToLower(m[1]) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 127:
				b.WriteRune(r)
			}
		}
		a := b.String()
		if k := seen[a]; k > 0 {
			out[fmt.Sprintf("%s-%d", a, k)] = true
		} else {
			out[a] = true
		}
		seen[a]++
	}
	return out
}

// Every relative link in the repository's Markdown names a file or
// directory that exists, and its #anchor, in a Markdown file, a heading
// of it.
func TestDocsLinks(t *testing.T) {
	cache := make(map[string]map[string]bool)
	anchorsOf := func(file string) map[string]bool {
		if a, ok := cache[file]; ok {
			return a
		}
		data, err := os.ReadFile(filepath.Join(root, file))
		if err != nil {
			t.Fatal(err)
		}
		cache[file] = anchors(data)
		return cache[file]
	}
	n := 0
	for _, file := range markdownFiles(t) {
		data, err := os.ReadFile(filepath.Join(root, file))
		if err != nil {
			t.Fatal(err)
		}
		inCode := false
		for i, line := range bytes.Split(data, []byte("\n")) {
			if bytes.HasPrefix(bytes.TrimSpace(line), []byte("```")) {
				inCode = !inCode
				continue
			}
			if inCode {
				continue
			}
			for _, m := range mdLink.FindAllSubmatch(line, -1) {
				target := string(m[1])
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				n++
				path, anchor, _ := strings.Cut(target, "#")
				dest := file
				if path != "" {
					dest = filepath.ToSlash(filepath.Clean(filepath.Join(filepath.Dir(file), path)))
					if _, err := os.Stat(filepath.Join(root, dest)); err != nil {
						t.Errorf("%s:%d: link %q: %s does not exist", file, i+1, target, dest)
						continue
					}
				}
				if anchor != "" && strings.HasSuffix(dest, ".md") && !anchorsOf(dest)[anchor] {
					t.Errorf("%s:%d: link %q: %s has no heading whose anchor is #%s", file, i+1, target, dest, anchor)
				}
			}
		}
	}
	if n == 0 {
		t.Fatal("no relative links found")
	}
}

// testName is a Go test, benchmark or fuzz target named in prose.
var testName = regexp.MustCompile(`\b(?:Test|Benchmark|Fuzz)[A-Z][A-Za-z0-9_]*`)

// Every test, benchmark and fuzz target a Markdown file names (as the
// proof of a claim) exists in some _test.go file.
func TestDocsNameRealTests(t *testing.T) {
	defined := make(map[string]bool)
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && p != root && strings.HasPrefix(d.Name(), ".") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(d.Name(), "_test.go") {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, line := range strings.Split(string(data), "\n") {
			if name, ok := strings.CutPrefix(line, "func "); ok {
				if m := testName.FindString(name); m != "" && strings.HasPrefix(name, m+"(") {
					defined[m] = true
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, file := range markdownFiles(t) {
		data, err := os.ReadFile(filepath.Join(root, file))
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(data), "\n") {
			for _, name := range testName.FindAllString(line, -1) {
				if !defined[name] {
					t.Errorf("%s:%d: names %s, which no _test.go file defines: name the test that proves it", file, i+1, name)
				}
			}
		}
	}
}
