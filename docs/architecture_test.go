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
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/xds-relay/xds-relay/"

// importRules reads architecture.md's "What may import what" table:
// package → the project packages it may import.
func importRules(t *testing.T) map[string][]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "## What may import what")
	if !ok {
		t.Fatal(`architecture.md has no "What may import what" section`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	row := regexp.MustCompile("(?m)^\\| `([^`]+)` \\|(.*)\\|$")
	code := regexp.MustCompile("`([^`]+)`")
	rules := map[string][]string{}
	for _, m := range row.FindAllStringSubmatch(section, -1) {
		var allowed []string
		for _, a := range code.FindAllStringSubmatch(m[2], -1) {
			allowed = append(allowed, a[1])
		}
		rules[m[1]] = allowed
	}
	if len(rules) == 0 {
		t.Fatal("architecture.md's import table has no rows")
	}
	return rules
}

// projectImports returns, for each directory of the repository holding
// non-test Go files, the project packages those files import.
func projectImports(t *testing.T) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); p != root && (strings.HasPrefix(n, ".") || n == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		pkg := rel(t, filepath.Dir(p))
		if _, ok := out[pkg]; !ok {
			out[pkg] = nil
		}
		for _, is := range f.Imports {
			path, err := strconv.Unquote(is.Path.Value)
			if err != nil {
				return err
			}
			if dep, ok := strings.CutPrefix(path, module); ok && !slices.Contains(out[pkg], dep) {
				out[pkg] = append(out[pkg], dep)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestImportRules: every package imports only what architecture.md's
// table lets it, and every package has its row, so the rule of which
// package may depend on which is written down and holds.
func TestImportRules(t *testing.T) {
	rules := importRules(t)
	for pkg, deps := range projectImports(t) {
		allowed, ok := rules[pkg]
		if !ok {
			t.Errorf("%s has no row in docs/architecture.md's import table", pkg)
			continue
		}
		for _, d := range deps {
			if !slices.Contains(allowed, d) {
				t.Errorf("%s imports %s, which docs/architecture.md does not allow", pkg, d)
			}
		}
	}
}

// maxFuncLines is the longest a production function may be (from func to
// its closing brace): one that is longer makes more than one decision,
// and is split where its parts are.
const maxFuncLines = 60

// TestFunctionLength: no non-test function of the repository is longer
// than maxFuncLines, so the rule of docs/architecture.md ("Where a new
// feature goes": one function per decision) holds as code is added.
func TestFunctionLength(t *testing.T) {
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); p != root && (strings.HasPrefix(n, ".") || n == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, 0)
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			fd, ok := decl.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			if n := fset.Position(fd.End()).Line - fset.Position(fd.Pos()).Line + 1; n > maxFuncLines {
				t.Errorf("%s: %s is %d lines, more than %d: split it where its parts are", rel(t, p), fd.Name.Name, n, maxFuncLines)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
