package contextos_test

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// Docs a user can follow: the repository's documents and Go comments
// point only at files inside the repository, their relative links
// resolve, and the README's Go snippets type-check against the current
// API.

// outsideRef matches a reference to a file outside the repository: the
// development workspace's shared folder (design notes, spec copies,
// reference notes, upstream schema fragments) or an absolute workspace
// path. A folder of seed copies inside the repository (under testdata)
// is a path of its own and does not match.
var outsideRef = regexp.MustCompile(`\.\./shared\b|(^|[\s("'` + "`" + `])/work/|\bDESIGN\.md\b|(^|[^/\w.-])seeds/|\bupstream-schemas\b|\bshared/(seeds|reference|fixtures|hooks)\b`)

// repoFiles returns the repository's files with the given extension,
// relative to the root, skipping .git.
func repoFiles(t *testing.T, ext string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == ".git" {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(p, ext) {
			out = append(out, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(out) == 0 {
		t.Fatalf("no %s files found", ext)
	}
	return out
}

func TestDocsPointOnlyInsideTheRepository(t *testing.T) {
	for _, name := range repoFiles(t, ".md") {
		data, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(data), "\n") {
			if m := outsideRef.FindString(line); m != "" {
				t.Errorf("%s:%d: refers to %q, outside the repository: %s", name, i+1, strings.TrimSpace(m), strings.TrimSpace(line))
			}
		}
	}
	fset := token.NewFileSet()
	for _, name := range repoFiles(t, ".go") {
		f, err := parser.ParseFile(fset, name, nil, parser.ParseComments|parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, cg := range f.Comments {
			for _, c := range cg.List {
				if m := outsideRef.FindString(c.Text); m != "" {
					t.Errorf("%s: a comment refers to %q, outside the repository: %s", fset.Position(c.Pos()), strings.TrimSpace(m), c.Text)
				}
			}
		}
	}
}

// Every package says what it is: go doc shows a package comment for each.
func TestEveryPackageHasADoc(t *testing.T) {
	dirs := map[string]bool{} // directory → has a package comment
	fset := token.NewFileSet()
	for _, name := range repoFiles(t, ".go") {
		if strings.HasSuffix(name, "_test.go") || slices.Contains(strings.Split(filepath.ToSlash(name), "/"), "testdata") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.PackageClauseOnly|parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		dir := filepath.Dir(name)
		dirs[dir] = dirs[dir] || f.Doc != nil
	}
	for _, dir := range slices.Sorted(maps.Keys(dirs)) {
		if !dirs[dir] {
			t.Errorf("package %s has no package comment (put one in %s)", dir, filepath.Join(dir, "doc.go"))
		}
	}
}

// mdLink matches an inline Markdown link or image target.
var mdLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)

func TestDocsRelativeLinksResolve(t *testing.T) {
	root, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range repoFiles(t, ".md") {
		data, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range mdLink.FindAllStringSubmatch(string(data), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") || strings.HasPrefix(target, "#") {
				continue
			}
			target, _, _ = strings.Cut(target, "#")
			p := filepath.Join(filepath.Dir(name), filepath.FromSlash(target))
			abs, err := filepath.Abs(p)
			if err != nil {
				t.Fatal(err)
			}
			if rel, err := filepath.Rel(root, abs); err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
				t.Errorf("%s: link %q leaves the repository", name, m[1])
				continue
			}
			if _, err := os.Stat(abs); err != nil {
				t.Errorf("%s: link %q does not resolve: %v", name, m[1], err)
			}
		}
	}
}

// snippetImports are the packages README snippets may use, by name.
var snippetImports = []string{
	"context", "encoding/json", "errors", "log", "log/slog", "os", "testing", "time",
	"go.opentelemetry.io/otel/trace",
	"github.com/contextos/contextos",
	"github.com/contextos/contextos/agent",
	"github.com/contextos/contextos/agent/claudecode",
	"github.com/contextos/contextos/agent/codex",
	"github.com/contextos/contextos/compiler",
	"github.com/contextos/contextos/contextostest",
	"github.com/contextos/contextos/decision",
	"github.com/contextos/contextos/gateway",
	"github.com/contextos/contextos/pack",
	"github.com/contextos/contextos/planner/openai",
	"github.com/contextos/contextos/replay",
	"github.com/contextos/contextos/runcontext",
	"github.com/contextos/contextos/store/postgres",
}

// snippetEnv declares what README snippets take as given: the host's own
// values, named as the snippets name them.
const snippetEnv = `
var (
	ctx            context.Context
	t              *testing.T
	myPlanner      contextos.Planner
	registry       pack.Registry
	keys           pack.KeyResolver
	payments       gateway.Adapter
	caps           map[string]gateway.Capability
	myGraph        compiler.EvidenceSource
	myMemory       compiler.MemoryRecall
	tp             trace.TracerProvider
	logger         *slog.Logger
	req            *runcontext.InvokeRequest
	runCtx         *runcontext.RunContext
	approval       gateway.Approval
	runID          string
	lookupPlan     *contextos.Plan
	refundPlan     *contextos.Plan
	packJSON       []byte
	rc             *runcontext.RunContext
	body           []byte
	hostRunContext *runcontext.RunContext
	clock          interface{ Now() time.Time }
	doc            []byte
	kid            string
	res            *pack.Resolved
	prepared       *compiler.Prepared
	cc             *compiler.CompiledContext
	privateKey     []byte
	reg            pack.Registry
	registrations  []gateway.Registration
	sink           gateway.TranscriptSink
	store          gateway.IdempotencyStore
	args           map[string]any
	records        decision.Store
)
`

// readmeGoSnippets returns the README's go code blocks.
func readmeGoSnippets(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	var cur *strings.Builder
	for _, line := range strings.Split(string(data), "\n") {
		switch {
		case cur == nil && strings.TrimSpace(line) == "```go":
			cur = &strings.Builder{}
		case cur != nil && strings.TrimSpace(line) == "```":
			out = append(out, cur.String())
			cur = nil
		case cur != nil:
			cur.WriteString(line + "\n")
		}
	}
	if len(out) == 0 {
		t.Fatal("README.md has no go code blocks")
	}
	return out
}

// exportLookup builds the packages with go list -export and returns an
// importer lookup over their export data.
func exportLookup(t *testing.T, pkgs []string) func(string) (io.ReadCloser, error) {
	t.Helper()
	goTool := filepath.Join(runtimeGOROOT(t), "bin", "go")
	cmd := exec.Command(goTool, append([]string{"list", "-export", "-deps", "-f", "{{.ImportPath}}\t{{.Export}}"}, pkgs...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -export: %v\n%s", err, stderr.String())
	}
	files := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		p, f, _ := strings.Cut(line, "\t")
		files[p] = f
	}
	return func(p string) (io.ReadCloser, error) {
		f, ok := files[p]
		if !ok || f == "" {
			return nil, fmt.Errorf("no export data for %s", p)
		}
		return os.Open(f)
	}
}

func runtimeGOROOT(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		t.Skipf("the go command is not available: %v", err)
	}
	return strings.TrimSpace(string(out))
}

// TestREADMESnippetsCompile type-checks every go block of the README as
// the body of a function, against the packages as they are. Variables a
// snippet declares and leaves unused, and imports it does not use, are
// fine; anything else (an unknown name, a wrong argument count or type)
// fails.
func TestREADMESnippetsCompile(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the module's export data")
	}
	lookup := exportLookup(t, snippetImports)
	var src strings.Builder
	src.WriteString("package snippets\n\nimport (\n")
	for _, p := range snippetImports {
		fmt.Fprintf(&src, "\t%q\n", p)
	}
	src.WriteString(")\n" + snippetEnv)
	snippets := readmeGoSnippets(t)
	starts := make([]int, len(snippets))
	for i, s := range snippets {
		fmt.Fprintf(&src, "\nfunc snippet%d() error {\n", i)
		starts[i] = strings.Count(src.String(), "\n") + 1
		src.WriteString(s + "\treturn nil\n}\n")
	}
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "README.md.go", src.String(), 0)
	if err != nil {
		t.Fatalf("a README snippet does not parse: %v", err)
	}
	var problems []string
	conf := types.Config{
		Importer: importer.ForCompiler(fset, "gc", lookup),
		Error: func(err error) {
			msg := err.Error()
			if strings.Contains(msg, "declared and not used") || strings.Contains(msg, "imported and not used") {
				return
			}
			problems = append(problems, msg)
		},
	}
	conf.Check("snippets", fset, []*ast.File{f}, nil)
	for _, p := range problems {
		// Name the snippet and its line.
		line := 0
		fmt.Sscanf(strings.TrimPrefix(p, "README.md.go:"), "%d", &line)
		which, at := -1, 0
		for i, s := range starts {
			if line >= s {
				which, at = i, line-s+1
			}
		}
		t.Errorf("README go block %d, line %d: %s", which+1, at, p)
	}
}

// TestREADMEPackageMapMatches holds the README's package map to the
// packages on disk: every package (a directory with non-test Go files
// outside testdata) has a row, and every row names a package that exists.
// The root package's row is `contextos` (root).
func TestREADMEPackageMapMatches(t *testing.T) {
	pkgs := map[string]bool{}
	for _, name := range repoFiles(t, ".go") {
		if strings.HasSuffix(name, "_test.go") || slices.Contains(strings.Split(filepath.ToSlash(name), "/"), "testdata") {
			continue
		}
		pkgs[filepath.ToSlash(filepath.Dir(name))] = true
	}
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(readme)
	start := strings.Index(text, "\n## Package map\n")
	if start < 0 {
		t.Fatal("README has no Package map section")
	}
	section := text[start+1:]
	if end := strings.Index(section[3:], "\n## "); end >= 0 {
		section = section[:end+3]
	}
	listed := map[string]bool{}
	cell := regexp.MustCompile("`([^`]+)`")
	for _, line := range strings.Split(section, "\n") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		first := strings.SplitN(line[1:], "|", 2)[0]
		for _, m := range cell.FindAllStringSubmatch(first, -1) {
			p := m[1]
			if p == "contextos" {
				p = "."
			}
			listed[p] = true
		}
	}
	for _, p := range slices.Sorted(maps.Keys(pkgs)) {
		if !listed[p] {
			t.Errorf("package %s has no row in the README's package map", p)
		}
	}
	for _, p := range slices.Sorted(maps.Keys(listed)) {
		if !pkgs[p] {
			t.Errorf("the README's package map lists %s, which is not a package", p)
		}
	}
}
