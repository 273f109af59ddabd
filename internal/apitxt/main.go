// Command apitxt prints the exported API of every public package of the
// module, one declaration per line, sorted, so that a change to the public
// surface shows up as a diff of api.txt in review.
//
// A package is public when its import path has no "internal" element and
// it is not a main package or an example. The listing covers exported
// constants, variables, functions, types (with their exported fields and
// embedded types) and the exported methods of exported types; an alias of
// a type of one of the module's internal packages (type ValidationError =
// problem.ValidationError) is followed by that type's exported fields and
// methods, since they are public through the alias. It is built from the
// syntax tree alone, so it needs no type checking and reads no dependency.
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
	"slices"
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
	var internals []string
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		name := d.Name()
		if path != root && (name == "testdata" || name == "examples" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
			return filepath.SkipDir
		}
		if slices.Contains(strings.Split(filepath.ToSlash(path), "/"), "internal") {
			internals = append(internals, path)
		} else {
			dirs = append(dirs, path)
		}
		return nil
	})
	if err != nil {
		return nil, 0, 0, err
	}
	members := map[string][]string{} // "import/path.Type" → its exported fields and methods
	for _, dir := range internals {
		files, path, err := parseDir(fset, dir)
		if err != nil {
			return nil, 0, 0, err
		}
		for k, v := range typeMembers(fset, path, files) {
			members[k] = v
		}
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
		files, path, err := parseDir(fset, dir)
		if err != nil {
			return nil, 0, 0, err
		}
		l, i, f := pkgAPI(fset, path, files, members)
		lines, idents, fields = append(lines, l...), idents+i, fields+f
	}
	sort.Strings(lines)
	return lines, idents, fields, nil
}

// parseDir parses the files of the package in dir as the go command
// builds them on this platform (build tags and file-name constraints
// applied) and returns them with the package's import path; a directory
// without Go files gives none.
func parseDir(fset *token.FileSet, dir string) ([]*ast.File, string, error) {
	path := module
	if rel := filepath.ToSlash(dir); rel != "." {
		path += "/" + strings.TrimPrefix(rel, "./")
	}
	bp, err := build.Default.ImportDir(dir, 0)
	if err != nil {
		var none *build.NoGoError
		if errors.As(err, &none) {
			return nil, path, nil
		}
		return nil, "", err
	}
	files := make([]*ast.File, 0, len(bp.GoFiles))
	for _, name := range bp.GoFiles {
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, "", err
		}
		files = append(files, f)
	}
	return files, path, nil
}

func printed(fset *token.FileSet, n ast.Node) string {
	var b bytes.Buffer
	printer.Fprint(&b, fset, n)
	return strings.Join(strings.Fields(b.String()), " ")
}

// typeMembers lists, for each exported type of an internal package, its
// exported fields and the exported methods of its method set, or, for an
// interface, its methods and embedded interfaces, keyed by
// "import/path.Type".
func typeMembers(fset *token.FileSet, path string, files []*ast.File) map[string][]string {
	out := map[string][]string{}
	for _, file := range files {
		for _, d := range file.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if d.Recv == nil || !d.Name.IsExported() {
					continue
				}
				recv := printed(fset, d.Recv.List[0].Type)
				base := strings.TrimPrefix(recv, "*")
				if i := strings.IndexByte(base, '['); i >= 0 {
					base = base[:i]
				}
				if ast.IsExported(base) {
					k := path + "." + base
					out[k] = append(out[k], "method ("+recv+") "+d.Name.Name+strings.TrimPrefix(printed(fset, d.Type), "func"))
				}
			case *ast.GenDecl:
				for _, sp := range d.Specs {
					ts, ok := sp.(*ast.TypeSpec)
					if !ok || !ts.Name.IsExported() {
						continue
					}
					k := path + "." + ts.Name.Name
					switch t := ts.Type.(type) {
					case *ast.StructType:
						for _, f := range t.Fields.List {
							for _, fn := range f.Names {
								if fn.IsExported() {
									out[k] = append(out[k], "field "+fn.Name+" "+printed(fset, f.Type))
								}
							}
						}
					case *ast.InterfaceType:
						for _, m := range t.Methods.List {
							if len(m.Names) == 0 {
								out[k] = append(out[k], "embeds "+printed(fset, m.Type))
								continue
							}
							for _, mn := range m.Names {
								if mn.IsExported() {
									out[k] = append(out[k], "interface method "+mn.Name+strings.TrimPrefix(printed(fset, m.Type), "func"))
								}
							}
						}
					}
				}
			}
		}
	}
	return out
}

// importPath is the import path file imports under name, or "".
func importPath(file *ast.File, name string) string {
	for _, im := range file.Imports {
		p := strings.Trim(im.Path.Value, `"`)
		n := p[strings.LastIndexByte(p, '/')+1:]
		if im.Name != nil {
			n = im.Name.Name
		}
		if n == name {
			return p
		}
	}
	return ""
}

func pkgAPI(fset *token.FileSet, path string, files []*ast.File, members map[string][]string) (lines []string, idents, fields int) {
	src := func(n ast.Node) string { return printed(fset, n) }
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
							decl := "type " + s.Name.Name + tp + assign + src(s.Type)
							add(decl)
							// An alias of an internal type makes its
							// fields and methods public.
							if sel, ok := s.Type.(*ast.SelectorExpr); ok && s.Assign.IsValid() {
								if x, ok := sel.X.(*ast.Ident); ok {
									for _, m := range members[importPath(file, x.Name)+"."+sel.Sel.Name] {
										add(decl + ", " + m)
									}
								}
							}
						}
					}
				}
			}
		}
	}
	return lines, idents, fields
}
