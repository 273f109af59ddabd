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
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"

	"github.com/google/go-cmp/cmp"
)

// Docs a user can follow: the repository's documents and Go comments
// point only at files inside the repository, their relative links and
// anchors resolve, the Go blocks of the README and docs/ compile, and the
// README, docs/, package docs and error messages describe the module as it
// is, not its history (which CHANGELOG.md keeps).

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

// headingAnchors returns the anchors GitHub gives a Markdown document's
// headings (outside fenced blocks): lower case, punctuation other than
// "-" and "_" dropped, spaces as "-", a repeated anchor numbered.
func headingAnchors(doc string) map[string]bool {
	anchors := map[string]bool{}
	seen := map[string]int{}
	fenced := false
	for _, line := range strings.Split(doc, "\n") {
		if strings.HasPrefix(line, "```") {
			fenced = !fenced
			continue
		}
		if fenced || !strings.HasPrefix(line, "#") {
			continue
		}
		level := len(line) - len(strings.TrimLeft(line, "#"))
		text := strings.TrimSpace(line[level:])
		if level > 6 || text == "" || line[level] != ' ' {
			continue
		}
		var b strings.Builder
		for _, r := range strings.ToLower(text) {
			switch {
			case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
				b.WriteRune(r)
			case r == ' ':
				b.WriteByte('-')
			}
		}
		a := b.String()
		if n := seen[a]; n > 0 {
			seen[a]++
			a = fmt.Sprintf("%s-%d", a, n)
		} else {
			seen[a] = 1
		}
		anchors[a] = true
	}
	return anchors
}

// Every relative link of every Markdown file resolves to a file of the
// repository, and a #anchor (on the same page or on a Markdown file it
// links) names one of that page's headings.
func TestDocsRelativeLinksResolve(t *testing.T) {
	root, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	anchorsOf := map[string]map[string]bool{} // absolute path → anchors
	anchors := func(abs string) map[string]bool {
		if a, ok := anchorsOf[abs]; ok {
			return a
		}
		data, err := os.ReadFile(abs)
		if err != nil {
			t.Fatal(err)
		}
		anchorsOf[abs] = headingAnchors(string(data))
		return anchorsOf[abs]
	}
	for _, name := range repoFiles(t, ".md") {
		data, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		self, err := filepath.Abs(name)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range mdLink.FindAllStringSubmatch(string(data), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			file, anchor, _ := strings.Cut(target, "#")
			abs := self
			if file != "" {
				abs, err = filepath.Abs(filepath.Join(filepath.Dir(name), filepath.FromSlash(file)))
				if err != nil {
					t.Fatal(err)
				}
				if rel, err := filepath.Rel(root, abs); err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
					t.Errorf("%s: link %q leaves the repository", name, m[1])
					continue
				}
				if _, err := os.Stat(abs); err != nil {
					t.Errorf("%s: link %q does not resolve: %v", name, m[1], err)
					continue
				}
			}
			if anchor != "" && strings.HasSuffix(abs, ".md") && !anchors(abs)[anchor] {
				t.Errorf("%s: link %q: %s has no heading with the anchor #%s", name, m[1], filepath.Base(abs), anchor)
			}
		}
	}
}

// history matches what belongs in CHANGELOG.md, not in the docs: an issue
// number ("issue 16", "issues 13", "issue #16"), or a statement of what
// was so before or after one.
var history = regexp.MustCompile(`(?i)\bissues? #?[0-9]|after issue|before issue`)

// userDocs are the files a user reads as the module's description: the
// README, every page under docs/, and the non-test Go files (their
// package docs, comments and error messages), testdata left out.
func userDocs(t *testing.T) []string {
	t.Helper()
	files := []string{"README.md"}
	for _, name := range repoFiles(t, ".md") {
		if strings.HasPrefix(filepath.ToSlash(name), "docs/") {
			files = append(files, name)
		}
	}
	for _, name := range repoFiles(t, ".go") {
		if !strings.HasSuffix(name, "_test.go") && !slices.Contains(strings.Split(filepath.ToSlash(name), "/"), "testdata") {
			files = append(files, name)
		}
	}
	return files
}

// The README, docs/, godoc and error messages carry no history or issue
// numbers: they say what the module does now.
func TestDocsCarryNoHistory(t *testing.T) {
	for _, name := range userDocs(t) {
		data, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(data), "\n") {
			if m := history.FindString(line); m != "" {
				t.Errorf("%s:%d: %q is history (it belongs in CHANGELOG.md): %s", name, i+1, m, strings.TrimSpace(line))
			}
		}
	}
}

// snippetImports are the packages the Go blocks of the docs may use, by
// name.
var snippetImports = []string{
	"context", "encoding/json", "errors", "log", "log/slog", "net/http", "os", "testing", "time",
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
	"github.com/contextos/contextos/server",
	"github.com/contextos/contextos/store/postgres",
}

// snippetEnv declares what the Go blocks of the docs take as given: the
// host's own values, named as the blocks name them.
const snippetEnv = `
var (
	ctx            context.Context
	t              *testing.T
	myPlanner      contextos.Planner
	planner        contextos.Planner
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
	rt             *contextos.Runtime
	paused         *contextos.Result
	opts           contextos.Options
	issuer         string
	st             *postgres.Store
	mux            *http.ServeMux
	shutdownCtx    context.Context
)
`

// goBlock is one go code block of a Markdown page.
type goBlock struct {
	page string
	line int // of the opening fence
	text string
}

// docsPages are the README and the pages under docs/.
func docsPages(t *testing.T) []string {
	t.Helper()
	pages := []string{"README.md"}
	for _, name := range repoFiles(t, ".md") {
		if strings.HasPrefix(filepath.ToSlash(name), "docs/") {
			pages = append(pages, name)
		}
	}
	return pages
}

// docsGoBlocks returns the go code blocks of the README and docs/.
func docsGoBlocks(t *testing.T) []goBlock {
	t.Helper()
	var out []goBlock
	for _, page := range docsPages(t) {
		data, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		var cur *goBlock
		for i, line := range strings.Split(string(data), "\n") {
			switch {
			case cur == nil && strings.TrimSpace(line) == "```go":
				cur = &goBlock{page: page, line: i + 1}
			case cur != nil && strings.TrimSpace(line) == "```":
				out = append(out, *cur)
				cur = nil
			case cur != nil:
				cur.text += line + "\n"
			}
		}
	}
	if len(out) == 0 {
		t.Fatal("the README and docs/ have no go code blocks")
	}
	return out
}

// excerptOf reports whether block's lines are consecutive lines of a Go
// source file of the repository (outside testdata), indented alike: such
// a block compiles as part of that file. It returns the file.
func excerptOf(t *testing.T, sources map[string][]string, block string) string {
	t.Helper()
	want := strings.Split(strings.TrimSuffix(block, "\n"), "\n")
	tabs := func(s string) int { return len(s) - len(strings.TrimLeft(s, "\t")) }
	for _, name := range slices.Sorted(maps.Keys(sources)) {
		lines := sources[name]
	next:
		for i := 0; i+len(want) <= len(lines); i++ {
			shift := -1
			for j, w := range want {
				got := lines[i+j]
				if strings.TrimLeft(got, "\t") != strings.TrimLeft(w, "\t") {
					continue next
				}
				if strings.TrimSpace(w) == "" {
					continue
				}
				if shift < 0 {
					shift = tabs(got) - tabs(w)
				}
				if shift < 0 || tabs(got)-tabs(w) != shift {
					continue next
				}
			}
			return name
		}
	}
	return ""
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

// TestDocsGoBlocksCompile holds every go block of the README and docs/
// to the current API. A block that is an excerpt of a Go file of the
// repository (same lines, same relative indentation) compiles with that
// file. Any other block is type-checked as the body of a function over
// snippetEnv: variables it declares and leaves unused, and imports it
// does not use, are fine; anything else (an unknown name, a wrong
// argument count or type) fails.
func TestDocsGoBlocksCompile(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the module's export data")
	}
	sources := map[string][]string{}
	for _, name := range repoFiles(t, ".go") {
		if slices.Contains(strings.Split(filepath.ToSlash(name), "/"), "testdata") {
			continue
		}
		data, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		sources[name] = strings.Split(string(data), "\n")
	}
	var checked []goBlock
	for _, b := range docsGoBlocks(t) {
		if excerptOf(t, sources, b.text) == "" {
			checked = append(checked, b)
		}
	}
	if len(checked) == 0 {
		return
	}
	lookup := exportLookup(t, snippetImports)
	var src strings.Builder
	src.WriteString("package snippets\n\nimport (\n")
	for _, p := range snippetImports {
		fmt.Fprintf(&src, "\t%q\n", p)
	}
	src.WriteString(")\n" + snippetEnv)
	starts := make([]int, len(checked))
	for i, b := range checked {
		fmt.Fprintf(&src, "\nfunc snippet%d() error {\n", i)
		starts[i] = strings.Count(src.String(), "\n") + 1
		src.WriteString(b.text + "\treturn nil\n}\n")
	}
	for _, b := range checked {
		if _, err := parser.ParseFile(token.NewFileSet(), "block.go", "package p\nfunc f() error {\n"+b.text+"\treturn nil\n}\n", 0); err != nil {
			t.Errorf("%s:%d: the go block does not parse: %v", b.page, b.line, err)
		}
	}
	if t.Failed() {
		return
	}
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "docs.go", src.String(), 0)
	if err != nil {
		t.Fatalf("the go blocks of the docs do not parse together: %v", err)
	}
	var problems []types.Error
	conf := types.Config{
		Importer: importer.ForCompiler(fset, "gc", lookup),
		Error: func(err error) {
			te := err.(types.Error)
			if strings.Contains(te.Msg, "declared and not used") || strings.Contains(te.Msg, "imported and not used") {
				return
			}
			problems = append(problems, te)
		},
	}
	conf.Check("snippets", fset, []*ast.File{f}, nil)
	for _, p := range problems {
		// Name the page and the line.
		line := fset.Position(p.Pos).Line
		which, at := -1, 0
		for i, s := range starts {
			if line >= s {
				which, at = i, line-s+1
			}
		}
		if which < 0 {
			t.Errorf("%s", p.Msg)
			continue
		}
		b := checked[which]
		t.Errorf("%s:%d: the go block does not compile: %s", b.page, b.line+at, p.Msg)
	}
}

// The README's quick start is examples/access's run, between its
// "quick start" markers: the program that runs in the tests and whose
// output is checked.
func TestQuickStartIsTheAccessExample(t *testing.T) {
	src, err := os.ReadFile(filepath.Join("examples", "access", "main.go"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?s)\t// quick start: begin\n(.*?)\t// quick start: end\n`).FindSubmatch(src)
	if m == nil {
		t.Fatal("examples/access/main.go has no quick start: begin/end markers")
	}
	var want strings.Builder
	for _, line := range strings.SplitAfter(string(m[1]), "\n") {
		want.WriteString(strings.TrimPrefix(line, "\t"))
	}
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	sec := regexp.MustCompile("(?s)\n## Quick start\n.*?```go\n(.*?)```\n").FindSubmatch(readme)
	if sec == nil {
		t.Fatal("README has no go block under ## Quick start")
	}
	if diff := cmp.Diff(want.String(), string(sec[1])); diff != "" {
		t.Errorf("the README's quick start differs from examples/access/main.go's (-example +README):\n%s", diff)
	}
}

// TestPackageMapMatches holds the package map (docs/packages.md) to the
// packages on disk: every package (a directory with non-test Go files
// outside testdata) has one row, and every row names a package that
// exists. The root package's row is `contextos` (root).
func TestPackageMapMatches(t *testing.T) {
	pkgs := map[string]bool{}
	for _, name := range repoFiles(t, ".go") {
		if strings.HasSuffix(name, "_test.go") || slices.Contains(strings.Split(filepath.ToSlash(name), "/"), "testdata") {
			continue
		}
		pkgs[filepath.ToSlash(filepath.Dir(name))] = true
	}
	page, err := os.ReadFile(filepath.Join("docs", "packages.md"))
	if err != nil {
		t.Fatal(err)
	}
	section := string(page)
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
			if listed[p] {
				t.Errorf("docs/packages.md has two rows for %s", p)
			}
			listed[p] = true
		}
	}
	for _, p := range slices.Sorted(maps.Keys(pkgs)) {
		if !listed[p] {
			t.Errorf("package %s has no row in docs/packages.md", p)
		}
	}
	for _, p := range slices.Sorted(maps.Keys(listed)) {
		if !pkgs[p] {
			t.Errorf("docs/packages.md lists %s, which is not a package", p)
		}
	}
}

// Every page under docs/ is on both maps of the docs: the README's and
// docs/README.md's.
func TestDocsMapsListEveryPage(t *testing.T) {
	for _, m := range []struct{ file, prefix string }{{"README.md", "docs/"}, {filepath.Join("docs", "README.md"), ""}} {
		data, err := os.ReadFile(m.file)
		if err != nil {
			t.Fatal(err)
		}
		for _, page := range docsPages(t) {
			name := filepath.ToSlash(page)
			if name == "README.md" || name == "docs/README.md" {
				continue
			}
			link := "](" + m.prefix + strings.TrimPrefix(name, "docs/") + ")"
			if !strings.Contains(string(data), "| ["+path.Base(name)+link) {
				t.Errorf("%s: the docs map has no row for %s (| [%s%s | … |)", m.file, name, path.Base(name), link)
			}
		}
	}
}
