package contextos_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRootIsAFacade holds the root package to what a host uses: its
// non-test code stays under 800 lines and declares nothing unexported at
// the top level (the run engine's machinery belongs in internal/engine).
func TestRootIsAFacade(t *testing.T) {
	names, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	lines := 0
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		lines += strings.Count(string(src), "\n")
		f, err := parser.ParseFile(fset, name, src, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if !d.Name.IsExported() {
					t.Errorf("%s: func %s is unexported: machinery belongs in internal/engine", fset.Position(d.Pos()), d.Name.Name)
				}
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						if !s.Name.IsExported() {
							t.Errorf("%s: type %s is unexported: machinery belongs in internal/engine", fset.Position(s.Pos()), s.Name.Name)
						}
					case *ast.ValueSpec:
						for _, n := range s.Names {
							if !n.IsExported() && n.Name != "_" {
								t.Errorf("%s: %s is unexported: machinery belongs in internal/engine", fset.Position(n.Pos()), n.Name)
							}
						}
					}
				}
			}
		}
	}
	if lines >= 800 {
		t.Errorf("the root package's non-test code is %d lines; a facade stays under 800 (move machinery to internal/engine)", lines)
	}
}
