package docs

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestREADMEsNameTheirFiles: every package under internal/ has a README.md
// that names each of its Go files other than tests and doc.go (the
// package's words, always there), literally or by a backticked pattern
// such as `snapshottrust_*.go`, so a reader can go from the README to the
// file that does a thing.
func TestREADMEsNameTheirFiles(t *testing.T) {
	dirs, err := filepath.Glob(filepath.Join(root, "internal", "*"))
	if err != nil {
		t.Fatal(err)
	}
	patternRE := regexp.MustCompile("`([A-Za-z0-9_]*\\*[A-Za-z0-9_*]*\\.go)`")
	for _, dir := range dirs {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		if len(files) == 0 {
			continue
		}
		readme, err := os.ReadFile(filepath.Join(dir, "README.md"))
		if err != nil {
			t.Errorf("%s: no README.md: %v", rel(t, dir), err)
			continue
		}
		var patterns []string
		for _, m := range patternRE.FindAllStringSubmatch(string(readme), -1) {
			patterns = append(patterns, m[1])
		}
		for _, f := range files {
			name := filepath.Base(f)
			if strings.HasSuffix(name, "_test.go") || name == "doc.go" || strings.Contains(string(readme), name) {
				continue
			}
			if !matchesAny(patterns, name) {
				t.Errorf("%s/README.md does not name %s", rel(t, dir), name)
			}
		}
	}
}

// integrationAreas are the areas integration/doc.go lists: the prefix of
// each integration test file's name.
var integrationAreas = []string{"access", "admin", "aggregation", "cache", "config", "csds", "delivery", "downstream",
	"faults", "loadgen", "metrics", "propagation", "relay", "snapshot", "upstream"}

// TestIntegrationFilesHaveAreas: every file of integration/ but the
// harness (harness_test.go), main_test.go and doc.go is named
// <area>_<topic>_test.go or <area>_test.go, its area one integration/doc.go
// lists, so a reader finds the tests of a package or doc topic by name.
func TestIntegrationFilesHaveAreas(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join(root, "integration", "doc.go"))
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range integrationAreas {
		if !regexp.MustCompile(`\b` + a + `\b`).Match(doc) {
			t.Errorf("integration/doc.go does not list the area %s", a)
		}
	}
	files, err := filepath.Glob(filepath.Join(root, "integration", "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		name := filepath.Base(f)
		if name == "doc.go" || name == "main_test.go" || name == "harness_test.go" {
			continue
		}
		area, _, _ := strings.Cut(strings.TrimSuffix(name, "_test.go"), "_")
		if !strings.HasSuffix(name, "_test.go") || !slices.Contains(integrationAreas, area) {
			t.Errorf("integration/%s: not named <area>_<topic>_test.go with an area of integration/doc.go", name)
		}
	}
}

func matchesAny(patterns []string, name string) bool {
	for _, p := range patterns {
		if ok, _ := filepath.Match(p, name); ok {
			return true
		}
	}
	return false
}

// TestGoroutinesCheckedByGoleak: every package whose code (tests aside)
// starts a goroutine runs goleak in its tests, so each goroutine is shown
// to have an owner that ends it.
func TestGoroutinesCheckedByGoleak(t *testing.T) {
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		if p != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		starts, leakChecked, err := goroutinesAndGoleak(p)
		if err != nil {
			return err
		}
		if starts != "" && !leakChecked {
			t.Errorf("%s starts goroutines (%s) and no test of it runs goleak", rel(t, p), starts)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// goroutinesAndGoleak reports where dir's non-test code first starts a
// goroutine ("" if nowhere) and whether a test file of dir imports goleak.
func goroutinesAndGoleak(dir string) (starts string, leakChecked bool, err error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return "", false, err
	}
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			af, err := parser.ParseFile(fset, f, nil, parser.ImportsOnly)
			if err != nil {
				return "", false, err
			}
			for _, imp := range af.Imports {
				if imp.Path.Value == `"go.uber.org/goleak"` {
					leakChecked = true
				}
			}
			continue
		}
		if starts != "" {
			continue
		}
		af, err := parser.ParseFile(fset, f, nil, parser.SkipObjectResolution)
		if err != nil {
			return "", false, err
		}
		ast.Inspect(af, func(n ast.Node) bool {
			if g, ok := n.(*ast.GoStmt); ok && starts == "" {
				starts = fset.Position(g.Pos()).String()
			}
			return starts == ""
		})
	}
	if starts != "" {
		if r, err := filepath.Rel(root, starts); err == nil {
			starts = filepath.ToSlash(r)
		}
	}
	return starts, leakChecked, nil
}
