package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"
)

var update = flag.Bool("update", false, "rewrite testdata/output.golden")

// page is the guide this example backs.
var page = filepath.Join("..", "..", "docs", "getting-started.md")

// TestOutput runs the example and checks its whole output: the pack
// published, the pause at the security review, the approved run DECIDED,
// the replay equal, and IAM called once. Run with -update after an
// intended change.
func TestOutput(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	var buf bytes.Buffer
	if err := run(context.Background(), &buf); err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "output.golden")
	if *update {
		if err := os.WriteFile(golden, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(want), buf.String()); diff != "" {
		t.Errorf("output differs from %s (-want +got):\n%s", golden, diff)
	}
	for _, must := range []string{
		"DEFERRED, awaiting GATE_SECURITY_REVIEW by a security_lead",
		"DECIDED granted, approved by usr_sec_9",
		"replay   replay_equal, 0 differences",
		"iam      1 grant(s): grt_5512 admin on billing-db",
	} {
		if !bytes.Contains(buf.Bytes(), []byte(must)) {
			t.Errorf("output lacks %q", must)
		}
	}
	// The guide shows this output as the program's.
	doc, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(doc, []byte("```text\n"+buf.String()+"```\n")) {
		t.Errorf("%s does not show the example's output as a text block:\n%s", page, buf.String())
	}
}

// block is one fenced block of a Markdown page.
type block struct {
	info string // the fence's info string: json, sh, text, go
	text string
	line int    // the line of the opening fence
	para string // the paragraph before the block, its lines joined by spaces
	// afterBlock: only blank lines separate this block from the one before.
	afterBlock bool
}

// blocks returns the fenced blocks of a Markdown document, in order.
func blocks(t *testing.T, doc string) []block {
	t.Helper()
	var out []block
	var para []string // the last paragraph
	var cur *block
	blank := true   // only blank lines since the last block
	inPara := false // the line before was part of para
	for i, line := range strings.Split(doc, "\n") {
		switch {
		case cur == nil && strings.HasPrefix(line, "```"):
			cur = &block{info: strings.TrimPrefix(line, "```"), line: i + 1, para: strings.Join(para, " "), afterBlock: len(out) > 0 && blank}
		case cur != nil && line == "```":
			out = append(out, *cur)
			cur, para, blank, inPara = nil, nil, true, false
		case cur != nil:
			cur.text += line + "\n"
		case strings.TrimSpace(line) == "":
			inPara = false
		default:
			if !inPara {
				para = nil
			}
			para = append(para, line)
			blank, inPara = false, true
		}
	}
	if cur != nil {
		t.Fatalf("line %d: a fenced block is not closed", cur.line)
	}
	return out
}

// savedAs matches the file name a paragraph asks the reader to save a
// block as.
var savedAs = regexp.MustCompile("as `([A-Za-z0-9_.-]+\\.json)`")

// TestGettingStarted follows docs/getting-started.md as a reader on a
// fresh clone would: it writes every file the page asks to save, runs
// every sh block in order in one shell (from the repository root, with a
// home directory, GOPATH and PATH of its own), and holds each command's
// output to the text block the page shows after it. The page's files are
// this example's files, so the Go program and the page run one pack.
func TestGettingStarted(t *testing.T) {
	if testing.Short() {
		t.Skip("installs the CLI and runs the guide's commands")
	}
	raw, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	bs := blocks(t, string(raw))

	// The script: each file saved where the reader stands, each command
	// block followed by a marker that splits the output per block.
	const marker = "@@contextos-doc-block@@"
	var script strings.Builder
	script.WriteString("set -euo pipefail\n")
	shown := map[string]bool{}
	type expectation struct {
		line int
		want string
	}
	var expect []*expectation // per sh block, in order (nil: no output shown)
	for i, b := range bs {
		switch b.info {
		case "json":
			names := savedAs.FindAllStringSubmatch(b.para, -1)
			if len(names) != 1 {
				t.Fatalf("%s:%d: a json block must follow a paragraph that names the one file to save it as (\"as `name.json`\"); found %d", page, b.line, len(names))
			}
			name := names[0][1]
			want, err := os.ReadFile(name)
			if err != nil {
				t.Fatalf("%s:%d: the page saves %s, which this example does not have: %v", page, b.line, name, err)
			}
			if diff := cmp.Diff(string(want), b.text); diff != "" {
				t.Errorf("%s:%d: the page's %s differs from examples/access/%s (-example +page):\n%s", page, b.line, name, name, diff)
			}
			shown[name] = true
			fmt.Fprintf(&script, "cat > %s <<'CONTEXTOS_DOC_EOF'\n%sCONTEXTOS_DOC_EOF\n", name, b.text)
		case "text":
			if !b.afterBlock || i == 0 || bs[i-1].info != "sh" {
				// Not a command's output: it must be the Go program's,
				// which TestOutput holds to the golden file.
				golden, err := os.ReadFile(filepath.Join("testdata", "output.golden"))
				if err != nil {
					t.Fatal(err)
				}
				if b.text != string(golden) {
					t.Errorf("%s:%d: a text block that follows no sh block must be the example's output (testdata/output.golden)", page, b.line)
				}
			}
		case "sh":
			script.WriteString(b.text)
			fmt.Fprintf(&script, "echo %s\n", marker)
			var e *expectation
			if i+1 < len(bs) && bs[i+1].info == "text" && bs[i+1].afterBlock {
				e = &expectation{line: bs[i+1].line, want: bs[i+1].text}
			}
			expect = append(expect, e)
		}
	}
	files, err := filepath.Glob("*.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if !shown[f] {
			t.Errorf("examples/access/%s is not on the page", f)
		}
	}
	if len(expect) == 0 {
		t.Fatal("the page has no sh blocks")
	}

	// A home, GOPATH and PATH of the test's own; the module and build
	// caches and the go command's settings as they are, so nothing is
	// downloaded again.
	tmp := t.TempDir()
	home := filepath.Join(tmp, "home")
	if err := os.Mkdir(home, 0o755); err != nil {
		t.Fatal(err)
	}
	settings := []string{"GOMODCACHE", "GOCACHE", "GOPROXY", "GOSUMDB", "GOTOOLCHAIN", "GOFLAGS", "GONOPROXY", "GONOSUMDB", "GOPRIVATE", "GOINSECURE", "GOROOT"}
	out, err := exec.Command("go", append([]string{"env", "-json"}, settings...)...).Output()
	if err != nil {
		t.Skipf("the go command is not available: %v", err)
	}
	var goenv map[string]string
	if err := json.Unmarshal(out, &goenv); err != nil {
		t.Fatal(err)
	}
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool {
		k, _, _ := strings.Cut(kv, "=")
		return slices.Contains(settings, k) || slices.Contains([]string{"HOME", "GOPATH", "GOBIN", "GOENV", "PATH"}, k)
	})
	for _, k := range settings {
		if goenv[k] != "" && k != "GOROOT" {
			env = append(env, k+"="+goenv[k])
		}
	}
	env = append(env, "HOME="+home, "GOPATH="+filepath.Join(tmp, "gopath"), "GOENV=off",
		"PATH="+filepath.Join(goenv["GOROOT"], "bin")+string(os.PathListSeparator)+os.Getenv("PATH"))

	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", "-c", script.String())
	cmd.Dir, cmd.Env = root, env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	outputs := strings.Split(stdout.String(), marker+"\n")
	if runErr != nil {
		t.Fatalf("the page's sh block %d of %d failed: %v\nstdout:\n%s\nstderr:\n%s", len(outputs), len(expect), runErr, stdout.String(), stderr.String())
	}
	if len(outputs) != len(expect)+1 {
		t.Fatalf("%d blocks ran, the page has %d", len(outputs)-1, len(expect))
	}
	for i, e := range expect {
		if e == nil {
			continue
		}
		if problem := matchShown(e.want, outputs[i]); problem != "" {
			t.Errorf("%s:%d: the output shown is not what the commands print: %s\nprinted:\n%s", page, e.line, problem, outputs[i])
		}
	}
}

// matchShown reports whether shown, a page's text block, matches got: each
// of its lines, in order, is a line of got (not necessarily adjacent ones),
// where "…" stands for any text; a line that is only "…" stands for lines
// left out. It returns the first line that does not match, or "".
func matchShown(shown, got string) string {
	lines := strings.Split(strings.TrimSuffix(got, "\n"), "\n")
	at := 0
	for want := range strings.Lines(shown) {
		want = strings.TrimSuffix(want, "\n")
		if strings.TrimSpace(want) == "…" {
			continue
		}
		parts := strings.Split(want, "…")
		for i, p := range parts {
			parts[i] = regexp.QuoteMeta(p)
		}
		re := regexp.MustCompile("^" + strings.Join(parts, ".*") + "$")
		for at < len(lines) && !re.MatchString(lines[at]) {
			at++
		}
		if at == len(lines) {
			return fmt.Sprintf("no line matches %q (after the lines matched before it)", want)
		}
		at++
	}
	return ""
}
