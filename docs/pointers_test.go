package docs

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// The pointers prose makes into the repository, checked in every Markdown
// file and in the comments of every Go file (tests included, generated
// files aside), so that a moved section, file, function or test fails the
// build where it is pointed to:
//   - a section cited by its heading (sectionCitation, citations_test.go);
//   - a path from the repository's root: a file (`docs/limits.md`,
//     `internal/aggregation/compile.go`) exists; a package's identifier
//     (`internal/xdsname.IsXDSTP`) is declared in it; a package's test
//     (`internal/aggregation/TestExplain`) is defined in it;
//   - a project package's identifier (`aggregation.Explain`,
//     `aggregation.Result.Node`) is declared in it, and a member of a type
//     is its method or field; in Go comments and package READMEs, a member
//     of a type the package declares (`Rules.Match`) too;
//   - in Go comments and package READMEs, a Go file's name (`groupmemo.go`)
//     is a file of the package, or of a directory the paragraph names
//     before it (`package migrate's part (walk.go)`,
//     `internal/migrate/walk.go, check.go`).

// prose is the text a pointer may be in: a Markdown file whole, or a Go
// file's comments, each at its line (the code blanked), a comment's "// "
// dropped so that a pointer wraps as in Markdown.
type prose struct {
	file string // from the repository's root
	dir  string // the Go package's directory, for a Go file or a package README; else ""
	text string
}

func (p prose) line(off int) int { return strings.Count(p.text[:off], "\n") + 1 }

// goProse is the comments of every Go file that is not generated.
func goProse(t *testing.T) []prose {
	t.Helper()
	var out []prose
	for _, f := range repoFiles(t, ".go") {
		text, generated, err := goComments(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		if !generated {
			out = append(out, prose{file: f, dir: path.Dir(f), text: text})
		}
	}
	return out
}

// goComments returns the comments of the Go file file, each on its line.
func goComments(file string) (text string, generated bool, err error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, file, nil, parser.ParseComments|parser.SkipObjectResolution)
	if err != nil {
		return "", false, err
	}
	if ast.IsGenerated(f) {
		return "", true, nil
	}
	lines := make([]string, fset.File(f.Pos()).LineCount())
	for _, cg := range f.Comments {
		for _, c := range cg.List {
			line := fset.Position(c.Pos()).Line - 1
			body, ok := strings.CutPrefix(c.Text, "//")
			if ok {
				body = strings.TrimPrefix(body, " ")
			} else {
				body = strings.TrimSuffix(strings.TrimPrefix(c.Text, "/*"), "*/")
			}
			for i, l := range strings.Split(body, "\n") {
				lines[line+i] = strings.TrimSpace(lines[line+i] + " " + l)
			}
		}
	}
	return strings.Join(lines, "\n"), false, nil
}

// markdownProse is every Markdown file; a README beside Go files is its
// package's.
func markdownProse(t *testing.T) []prose {
	t.Helper()
	var out []prose
	for _, f := range markdownFiles(t) {
		data, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		p := prose{file: f, text: string(data)}
		if filepath.Base(f) == "README.md" {
			if gos, _ := filepath.Glob(filepath.Join(root, filepath.Dir(f), "*.go")); len(gos) > 0 {
				p.dir = filepath.ToSlash(filepath.Dir(f))
			}
		}
		out = append(out, p)
	}
	return out
}

// TestGoCommentPointers: the pointers in Go comments name sections, files,
// identifiers and tests that exist (see the top of this file).
func TestGoCommentPointers(t *testing.T) {
	idx, n := newDeclIndex(t), tally{}
	for _, p := range goProse(t) {
		checkSectionCitations(t, p, n)
		checkPaths(t, idx, p, n)
		checkIdentifiers(t, idx, p, n)
		checkGoFileNames(t, idx, p, n)
	}
	n.require(t, "section", "path", "pkg.Ident", "Type.Member", "file.go")
}

// TestMarkdownPointers: the paths and identifiers in Markdown name files,
// identifiers and tests that exist (sections: TestSectionCitationsExist).
func TestMarkdownPointers(t *testing.T) {
	idx, n := newDeclIndex(t), tally{}
	for _, p := range markdownProse(t) {
		checkPaths(t, idx, p, n)
		checkIdentifiers(t, idx, p, n)
		if p.dir != "" {
			checkGoFileNames(t, idx, p, n)
		}
	}
	n.require(t, "path", "path/TestX", "pkg.Ident", "Type.Member", "file.go")
}

// tally counts the pointers checked, by kind.
type tally map[string]int

// require fails the test when no pointer of a kind was found: its pattern
// no longer matches how the prose writes them.
func (n tally) require(t *testing.T, kinds ...string) {
	t.Helper()
	for _, k := range kinds {
		if n[k] == 0 {
			t.Errorf("no %s pointer found: the pattern is broken", k)
		}
	}
	t.Logf("pointers checked: %v", map[string]int(n))
}

// repoPath is a path in prose: its first element is checked to be a
// top-level directory of the repository.
var repoPath = regexp.MustCompile(`[\w.-]+(?:/[\w.-]+)+`)

// testFunc is the name of a Go test, benchmark or fuzz target.
var testFunc = regexp.MustCompile(`^(?:Test|Benchmark|Fuzz)[A-Z0-9_]\w*$`)

// goIdent is a Go identifier.
var goIdent = regexp.MustCompile(`^[A-Za-z_]\w*$`)

// checkPaths checks the paths from the repository's root in p: a file
// (its last element has an extension) exists; dir.Ident is declared in
// the package at dir; dir/TestX is defined in its tests. A path naming a
// directory only is not checked (grpc-go's internal/transport, kubectl's
// deploy/xds-relay).
func checkPaths(t *testing.T, idx *declIndex, p prose, n tally) {
	t.Helper()
	for _, m := range repoPath.FindAllStringIndex(p.text, -1) {
		ptr := strings.TrimRight(p.text[m[0]:m[1]], ".")
		top, _, _ := strings.Cut(ptr, "/")
		if !idx.topDirs[top] {
			continue
		}
		dir, last := path.Split(ptr)
		dir = strings.TrimSuffix(dir, "/")
		switch name, ident, dotted := strings.Cut(last, "."); {
		case dotted && idx.isPackage(dir+"/"+name) && goIdent.MatchString(ident):
			n["path.Ident"]++
			if !idx.pkg(dir + "/" + name).declared(ident) {
				t.Errorf("%s:%d: %s: package %s declares no %s", p.file, p.line(m[0]), ptr, dir+"/"+name, ident)
			}
		case dotted:
			n["path"]++
			if !anyExists([]string{ptr}) {
				t.Errorf("%s:%d: %s does not exist", p.file, p.line(m[0]), ptr)
			}
		case testFunc.MatchString(last):
			n["path/TestX"]++
			if !idx.pkg(dir).tests[last] {
				t.Errorf("%s:%d: %s: %s defines no %s", p.file, p.line(m[0]), ptr, dir, last)
			}
		}
	}
}

// goFileName is a Go file's name, or a path ending in one.
var goFileName = regexp.MustCompile(`[\w./*-]*\.go\b`)

// dirWord is a word that may name a directory: a package's name
// (downstream), a path (internal/upstream, integration/upstream_tiers_test.go's
// directory).
var dirWord = regexp.MustCompile(`[\w./-]+`)

// elsewhere are files of other projects that comments name.
var elsewhere = map[string]bool{
	"http2_server.go": true, // grpc-go's internal/transport
}

// checkGoFileNames checks the Go files p names: each is a file of p's
// package, a path from the root, from p's directory or from internal/, or
// a file of a directory named earlier in its paragraph. Patterns
// (`snapshottrust_*.go`) and suffixes (`_test.go`) are not names.
func checkGoFileNames(t *testing.T, idx *declIndex, p prose, n tally) {
	t.Helper()
	for _, m := range goFileName.FindAllStringIndex(p.text, -1) {
		name := strings.TrimLeft(p.text[m[0]:m[1]], "./")
		if strings.Contains(name, "*") || strings.HasPrefix(name, "_") || elsewhere[name] {
			continue
		}
		n["file.go"]++
		cands := []string{path.Join(p.dir, name), name, path.Join(path.Dir(p.file), name), path.Join("internal", name)}
		para := p.text[:m[0]]
		para = para[strings.LastIndex(para, "\n\n")+1:]
		for _, w := range dirWord.FindAllString(para, -1) {
			w = strings.Trim(w, "./")
			for _, d := range append(idx.dirsNamed(w), idx.dirsNamed(path.Dir(w))...) {
				cands = append(cands, path.Join(d, name))
			}
		}
		if !anyExists(cands) {
			t.Errorf("%s:%d: %s is no file of %s nor of a directory its paragraph names before it (write the file's path)", p.file, p.line(m[0]), name, p.dir)
		}
	}
}

// anyExists reports whether one of paths (from the root) exists.
func anyExists(paths []string) bool {
	for _, c := range paths {
		if _, err := os.Stat(filepath.Join(root, c)); err == nil {
			return true
		}
	}
	return false
}

// pkgIdent is a project package's identifier, and a member of it:
// `cache.Resource.Change` (the package's name: group 1; the identifier:
// group 2; the member: group 3).
var pkgIdent = regexp.MustCompile(`\b([a-z][a-z0-9]*)\.([A-Z]\w*)(?:\.([A-Za-z_]\w*))?`)

// typeMember is a member of a type: `Rules.Match` (the type: group 1; the
// member: group 2).
var typeMember = regexp.MustCompile(`\b([A-Z]\w*)\.([A-Za-z_]\w*)`)

// checkIdentifiers checks pkg.Ident and pkg.Type.Member for the project's
// packages, and Type.Member for the types of p's own package.
func checkIdentifiers(t *testing.T, idx *declIndex, p prose, n tally) {
	t.Helper()
	after := func(off int) bool { return off > 0 && strings.ContainsRune("./", rune(p.text[off-1])) }
	for _, m := range pkgIdent.FindAllStringSubmatchIndex(p.text, -1) {
		dir, ok := idx.byName[p.text[m[2]:m[3]]]
		if !ok || after(m[0]) {
			continue
		}
		n["pkg.Ident"]++
		ident := p.text[m[4]:m[5]]
		member := ""
		if m[6] >= 0 {
			member = p.text[m[6]:m[7]]
		}
		if m[1] < len(p.text) && p.text[m[1]] == '*' { // a prefix: config.DefaultBackoff*
			if !idx.pkg(dir).hasPrefix(ident) {
				t.Errorf("%s:%d: %s*: its package declares no name starting so", p.file, p.line(m[0]), p.text[m[0]:m[1]])
			}
			continue
		}
		if msg := idx.pkg(dir).check(ident, member); msg != "" {
			t.Errorf("%s:%d: %s: %s", p.file, p.line(m[0]), p.text[m[0]:m[1]], msg)
		}
	}
	if p.dir == "" {
		return
	}
	own := idx.pkg(p.dir)
	for _, m := range typeMember.FindAllStringSubmatchIndex(p.text, -1) {
		typ := p.text[m[2]:m[3]]
		if after(m[0]) || !own.closedTypes[typ] {
			continue
		}
		n["Type.Member"]++
		if msg := own.check(typ, p.text[m[4]:m[5]]); msg != "" {
			t.Errorf("%s:%d: %s: %s", p.file, p.line(m[0]), p.text[m[0]:m[1]], msg)
		}
	}
}

// declIndex is what the repository's Go packages declare, read as needed.
type declIndex struct {
	topDirs map[string]bool     // the repository's top-level directories
	byName  map[string]string   // a project package's name → its directory (names used twice left out)
	dirs    map[string][]string // a directory's name, and its path from the root → its paths
	pkgs    map[string]*pkgDecls
	t       *testing.T
}

// pkgDecls is what one directory's Go files declare.
type pkgDecls struct {
	names       map[string]bool            // top-level identifiers, test files' included
	members     map[string]map[string]bool // a type's methods and fields
	closedTypes map[string]bool            // types whose members are all in members (no embedding, not defined from another type)
	tests       map[string]bool            // tests, benchmarks, fuzz targets
}

func newDeclIndex(t *testing.T) *declIndex {
	t.Helper()
	idx := &declIndex{topDirs: map[string]bool{}, byName: map[string]string{}, pkgs: map[string]*pkgDecls{}, t: t}
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.IsDir() && !strings.HasPrefix(e.Name(), ".") {
			idx.topDirs[e.Name()] = true
		}
	}
	idx.dirs = map[string][]string{}
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() || p == root {
			return err
		}
		if skippedDir(d.Name()) {
			return filepath.SkipDir
		}
		r := rel(t, p)
		idx.dirs[r] = append(idx.dirs[r], r)
		if d.Name() != r {
			idx.dirs[d.Name()] = append(idx.dirs[d.Name()], r)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	twice := map[string]bool{}
	for _, pattern := range []string{"config", "internal/*", "internal/*/*"} {
		dirs, _ := filepath.Glob(filepath.Join(root, pattern))
		for _, d := range dirs {
			if !idx.isPackage(rel(t, d)) {
				continue
			}
			name := filepath.Base(d)
			if _, dup := idx.byName[name]; dup {
				twice[name] = true
			}
			idx.byName[name] = rel(t, d)
		}
	}
	for name := range twice {
		delete(idx.byName, name)
	}
	return idx
}

// dirsNamed are the directories word names: a path from the root, or a
// directory's own name.
func (idx *declIndex) dirsNamed(word string) []string { return idx.dirs[word] }

// isPackage reports whether dir (from the root) holds Go files.
func (idx *declIndex) isPackage(dir string) bool {
	files, _ := filepath.Glob(filepath.Join(root, dir, "*.go"))
	return len(files) > 0
}

// pkg is what the Go files of dir (from the root) declare.
func (idx *declIndex) pkg(dir string) *pkgDecls {
	if d, ok := idx.pkgs[dir]; ok {
		return d
	}
	d := &pkgDecls{names: map[string]bool{}, members: map[string]map[string]bool{}, closedTypes: map[string]bool{}, tests: map[string]bool{}}
	idx.pkgs[dir] = d
	files, _ := filepath.Glob(filepath.Join(root, dir, "*.go"))
	sort.Strings(files)
	for _, f := range files {
		af, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.SkipObjectResolution)
		if err != nil {
			idx.t.Fatal(err)
		}
		d.add(af)
	}
	return d
}

// add records the declarations of one file.
func (d *pkgDecls) add(f *ast.File) {
	for _, decl := range f.Decls {
		switch decl := decl.(type) {
		case *ast.FuncDecl:
			if decl.Recv == nil {
				d.names[decl.Name.Name] = true
				if testFunc.MatchString(decl.Name.Name) {
					d.tests[decl.Name.Name] = true
				}
				continue
			}
			d.member(receiverType(decl.Recv.List[0].Type), decl.Name.Name)
		case *ast.GenDecl:
			for _, spec := range decl.Specs {
				switch spec := spec.(type) {
				case *ast.TypeSpec:
					d.names[spec.Name.Name] = true
					d.addType(spec)
				case *ast.ValueSpec:
					for _, n := range spec.Names {
						d.names[n.Name] = true
					}
				}
			}
		}
	}
}

// addType records a type's fields (or an interface's methods), and
// whether those are all its members.
func (d *pkgDecls) addType(spec *ast.TypeSpec) {
	name := spec.Name.Name
	var fields *ast.FieldList
	switch st := spec.Type.(type) {
	case *ast.StructType:
		fields = st.Fields
	case *ast.InterfaceType:
		fields = st.Methods
	default:
		return // defined from another type: its members are that type's
	}
	if spec.Assign.IsValid() {
		return
	}
	d.closedTypes[name] = true
	for _, f := range fields.List {
		if len(f.Names) == 0 {
			delete(d.closedTypes, name) // embedding promotes members
		}
		for _, n := range f.Names {
			d.member(name, n.Name)
		}
	}
	if d.members[name] == nil {
		d.members[name] = map[string]bool{}
	}
}

func (d *pkgDecls) member(typ, name string) {
	if d.members[typ] == nil {
		d.members[typ] = map[string]bool{}
	}
	d.members[typ][name] = true
}

// receiverType is the name of a method's receiver type.
func receiverType(e ast.Expr) string {
	for {
		switch x := e.(type) {
		case *ast.StarExpr:
			e = x.X
		case *ast.IndexExpr:
			e = x.X
		case *ast.IndexListExpr:
			e = x.X
		case *ast.Ident:
			return x.Name
		default:
			return ""
		}
	}
}

func (d *pkgDecls) declared(ident string) bool { return d.names[ident] }

// isMember reports whether name is a method or field of one of the
// package's types (`cache.Lookup` is written for the Cache's method).
func (d *pkgDecls) isMember(name string) bool {
	for _, ms := range d.members {
		if ms[name] {
			return true
		}
	}
	return false
}

// hasPrefix reports whether some top-level name starts with prefix.
func (d *pkgDecls) hasPrefix(prefix string) bool {
	for n := range d.names {
		if strings.HasPrefix(n, prefix) {
			return true
		}
	}
	return false
}

// check returns what is wrong with ident (and member, if not "") as a
// pointer into the package, or "". A member with an underscore is a
// protobuf or YAML field (`Resource.cache_control`), not checked.
func (d *pkgDecls) check(ident, member string) string {
	switch {
	case !d.names[ident] && !d.isMember(ident):
		return "declared nowhere in its package"
	case member == "" || !d.closedTypes[ident] || strings.Contains(member, "_"):
		return ""
	case !d.members[ident][member]:
		return ident + " has no method or field " + member
	}
	return ""
}
