// Command apitxt prints the exported API of every public package of the
// module, one declaration per line, sorted, so that a change to the public
// surface shows up as a diff of api.txt in review.
//
// A package is public when its import path has no "internal" element and
// it is not a main package or an example. The listing covers exported
// constants, variables, functions, types (with their exported fields and
// embedded types) and the exported methods of exported types; it is built
// from the syntax tree alone, so it needs no type checking and reads no
// dependency.
//
// Usage, from the module root:
//
//	go run ./internal/apitxt > api.txt   # regenerate
//	go run ./internal/apitxt -count      # exported identifiers and fields
//
// CI regenerates api.txt and fails when it differs from the checked-in one.
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"go/ast"
	"go/build"
	"go/parser"
	"go/printer"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

const module = "github.com/contextos/contextos"

func main() {
	count := flag.Bool("count", false, "print the number of exported identifiers and exported fields instead of the listing")
	flag.Parse()
	lines, idents, fields, err := dump(".")
	if err != nil {
		fmt.Fprintln(os.Stderr, "apitxt:", err)
		os.Exit(1)
	}
	if *count {
		fmt.Printf("exported identifiers: %d\nexported fields: %d\n", idents, fields)
		return
	}
	for _, l := range lines {
		fmt.Println(l)
	}
}

// dump walks the module at root and returns the sorted listing, the number
// of exported identifiers (constants, variables, functions, types and
// methods) and the number of exported struct fields.
func dump(root string) (lines []string, idents, fields int, err error) {
	fset := token.NewFileSet()
	var dirs []string
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		name := d.Name()
		if path != root && (name == "testdata" || name == "internal" || name == "examples" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
			return filepath.SkipDir
		}
		dirs = append(dirs, path)
		return nil
	})
	if err != nil {
		return nil, 0, 0, err
	}
	for _, dir := range dirs {
		// The package's files as the go command builds them on this
		// platform (build tags and file-name constraints applied).
		bp, err := build.Default.ImportDir(dir, 0)
		if err != nil {
			var none *build.NoGoError
			if errors.As(err, &none) {
				continue
			}
			return nil, 0, 0, err
		}
		if bp.Name == "main" {
			continue
		}
		files := make([]*ast.File, 0, len(bp.GoFiles))
		for _, name := range bp.GoFiles {
			f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.SkipObjectResolution)
			if err != nil {
				return nil, 0, 0, err
			}
			files = append(files, f)
		}
		path := module
		if rel := filepath.ToSlash(dir); rel != "." {
			path += "/" + strings.TrimPrefix(rel, "./")
		}
		l, i, f := pkgAPI(fset, path, files)
		lines, idents, fields = append(lines, l...), idents+i, fields+f
	}
	sort.Strings(lines)
	return lines, idents, fields, nil
}

func pkgAPI(fset *token.FileSet, path string, files []*ast.File) (lines []string, idents, fields int) {
	src := func(n ast.Node) string {
		var b bytes.Buffer
		printer.Fprint(&b, fset, n)
		return strings.Join(strings.Fields(b.String()), " ")
	}
	add := func(s string) { lines = append(lines, path+": "+s) }
	for _, file := range files {
		for _, d := range file.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if !d.Name.IsExported() {
					continue
				}
				sig := strings.TrimPrefix(src(d.Type), "func")
				if d.Recv == nil {
					add("func " + d.Name.Name + sig)
					idents++
					continue
				}
				recv := src(d.Recv.List[0].Type)
				base := strings.TrimPrefix(recv, "*")
				if i := strings.IndexByte(base, '['); i >= 0 {
					base = base[:i]
				}
				if !ast.IsExported(base) {
					continue
				}
				add("method (" + recv + ") " + d.Name.Name + sig)
				idents++
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.ValueSpec:
						kind := d.Tok.String()
						for i, nm := range s.Names {
							if !nm.IsExported() {
								continue
							}
							line := kind + " " + nm.Name
							if s.Type != nil {
								line += " " + src(s.Type)
							} else if kind == "const" && i < len(s.Values) {
								line += " = " + src(s.Values[i])
							}
							add(line)
							idents++
						}
					case *ast.TypeSpec:
						if !s.Name.IsExported() {
							continue
						}
						idents++
						tp := ""
						if s.TypeParams != nil {
							var ps []string
							for _, f := range s.TypeParams.List {
								var ns []string
								for _, n := range f.Names {
									ns = append(ns, n.Name)
								}
								ps = append(ps, strings.Join(ns, ", ")+" "+src(f.Type))
							}
							tp = "[" + strings.Join(ps, ", ") + "]"
						}
						assign := " "
						if s.Assign.IsValid() {
							assign = " = "
						}
						switch t := s.Type.(type) {
						case *ast.StructType:
							add("type " + s.Name.Name + tp + " struct")
							for _, f := range t.Fields.List {
								ty := src(f.Type)
								if len(f.Names) == 0 {
									emb := strings.TrimPrefix(ty, "*")
									if i := strings.LastIndexByte(emb, '.'); i >= 0 {
										emb = emb[i+1:]
									}
									if ast.IsExported(emb) {
										add("type " + s.Name.Name + " struct, embeds " + ty)
										fields++
									}
									continue
								}
								for _, fn := range f.Names {
									if fn.IsExported() {
										add("type " + s.Name.Name + " struct, " + fn.Name + " " + ty)
										fields++
									}
								}
							}
						case *ast.InterfaceType:
							add("type " + s.Name.Name + tp + " interface")
							for _, m := range t.Methods.List {
								if len(m.Names) == 0 {
									add("type " + s.Name.Name + " interface, embeds " + src(m.Type))
									continue
								}
								for _, mn := range m.Names {
									if mn.IsExported() {
										add("type " + s.Name.Name + " interface, " + mn.Name + strings.TrimPrefix(src(m.Type), "func"))
									}
								}
							}
						default:
							add("type " + s.Name.Name + tp + assign + src(s.Type))
						}
					}
				}
			}
		}
	}
	return lines, idents, fields
}
