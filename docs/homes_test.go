package docs

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// adminRouteRE matches a string that is an admin route (a path on the
// admin listener, or a method and one): "/debug/cache", "POST
// /debug/reload", "/metrics". Prose naming a route ("… POST /debug/reload
// …") is not one.
var adminRouteRE = regexp.MustCompile(`^((GET|HEAD|POST|PUT|DELETE) )?/(debug/\S*|metrics|healthz|readyz|assets/\S+)$`)

// listenCalls are the calls that bind an address.
var listenCalls = map[string]bool{"Listen": true, "ListenPacket": true, "ListenTCP": true, "ListenUnix": true,
	"ListenAndServe": true, "ListenAndServeTLS": true}

// TestOneHomeForRoutesAndListeners: under internal/, every admin route is
// written in internal/admin only (a component returns data; admin owns
// the route and page), and every listener is bound in internal/relay only
// (a component is handed its listener, as csds.Server.Serve is). See
// architecture.md, "Where a new feature goes".
func TestOneHomeForRoutesAndListeners(t *testing.T) {
	fset := token.NewFileSet()
	err := filepath.WalkDir(filepath.Join(root, "internal"), func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return err
		}
		pkg := filepath.ToSlash(filepath.Dir(rel(t, p)))
		f, err := parser.ParseFile(fset, p, nil, 0)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.BasicLit:
				if s, err := strconv.Unquote(n.Value); err == nil && n.Kind == token.STRING && adminRouteRE.MatchString(s) && pkg != "internal/admin" {
					t.Errorf("%s: admin route %q outside internal/admin: name its constant there (routes.go), or have relay hand the path in", fset.Position(n.Pos()), s)
				}
			case *ast.CallExpr:
				if sel, ok := n.Fun.(*ast.SelectorExpr); ok && listenCalls[sel.Sel.Name] && pkg != "internal/relay" {
					t.Errorf("%s: %s binds an address outside internal/relay: have relay bind it (listen) and hand the listener over", fset.Position(n.Pos()), sel.Sel.Name)
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
