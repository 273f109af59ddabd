package main

import (
	"bufio"
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The CLI's documentation covers the CLI: every command, and every flag of
// every command, appears in docs/cli.md's command table and in the
// package doc (go doc ./cmd/contextos), and neither lists a command or flag
// the CLI does not have.

// groups are the commands that dispatch to subcommands.
var groups = map[string]func() []command{"pack": packCommands, "records": recordsCommands, "approvals": approvalsCommands, "agent": agentCommands}

// helpFlag matches a flag line of flag.PrintDefaults ("  -name value").
var helpFlag = regexp.MustCompile(`^  -([A-Za-z][A-Za-z0-9-]*)`)

// docFlag matches a flag as the docs spell it.
var docFlag = regexp.MustCompile(`--([A-Za-z][A-Za-z0-9-]*)`)

// cliFlags runs every command and subcommand with -h and collects the
// flags its flag set prints: command path ("pack sign") → flag names.
func cliFlags(t *testing.T) map[string][]string {
	t.Helper()
	help := func(c command) string {
		var out, errOut bytes.Buffer
		if code := c.run([]string{"-h"}, strings.NewReader(""), &out, &errOut); code != exitOK {
			t.Fatalf("%s -h exited %d: %s", c.name, code, errOut.String())
		}
		return out.String() + errOut.String()
	}
	flags := func(text string) []string {
		names := []string{}
		sc := bufio.NewScanner(strings.NewReader(text))
		for sc.Scan() {
			if m := helpFlag.FindStringSubmatch(sc.Text()); m != nil {
				names = append(names, m[1])
			}
		}
		return names
	}
	got := map[string][]string{}
	for _, c := range commands() {
		text := help(c)
		sub, isGroup := groups[c.name]
		if strings.Contains(text, "Commands:") != isGroup {
			t.Fatalf("%s -h: a command group is not in groups, or a group no longer lists its commands:\n%s", c.name, text)
		}
		if !isGroup {
			got[c.name] = flags(text)
			continue
		}
		for _, s := range sub() {
			got[c.name+" "+s.name] = flags(help(s))
		}
	}
	return got
}

// declaredFlags is every flag name the package's non-test source declares
// on a flag set (fs.String("name", …), fs.Var(&v, "name", …), …): a check
// that every flag set prints its flags with -h.
func declaredFlags(t *testing.T) []string {
	t.Helper()
	nameArg := map[string]int{
		"String": 0, "Bool": 0, "Int": 0, "Int64": 0, "Uint": 0, "Uint64": 0, "Float64": 0, "Duration": 0, "Func": 0, "BoolFunc": 0,
		"StringVar": 1, "BoolVar": 1, "IntVar": 1, "Int64Var": 1, "UintVar": 1, "Uint64Var": 1, "Float64Var": 1, "DurationVar": 1, "TextVar": 1, "Var": 1,
	}
	fset := token.NewFileSet()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || len(call.Args) < 3 {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			i, ok := nameArg[sel.Sel.Name]
			if !ok {
				return true
			}
			if lit, ok := call.Args[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
				s, err := strconv.Unquote(lit.Value)
				if err == nil {
					names = append(names, s)
				}
			}
			return true
		})
	}
	if len(names) == 0 {
		t.Fatal("no flag declarations found in the package source")
	}
	return names
}

// usageEntry parses "contextos pack sign --key KEYFILE …" into its command
// path and the flags it names; ok is false for text that names no command.
func usageEntry(text string) (cmd string, flags []string, ok bool) {
	words := strings.Fields(text)
	if len(words) < 2 || words[0] != "contextos" {
		return "", nil, false
	}
	cmd = words[1]
	if _, isGroup := groups[cmd]; isGroup && len(words) > 2 {
		cmd += " " + words[2]
	}
	for _, m := range docFlag.FindAllStringSubmatch(text, -1) {
		flags = append(flags, m[1])
	}
	return cmd, flags, true
}

// cliPage is the page that documents the CLI.
var cliPage = filepath.Join("..", "..", "docs", "cli.md")

// docsTable is docs/cli.md's command table: command path → flags named.
func docsTable(t *testing.T) map[string][]string {
	t.Helper()
	data, err := os.ReadFile(cliPage)
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string][]string{}
	for line := range strings.Lines(string(data)) {
		rest, ok := strings.CutPrefix(line, "| `contextos ")
		if !ok {
			continue
		}
		cell, _, _ := strings.Cut(rest, "` |")
		cmd, flags, ok := usageEntry("contextos " + cell)
		if !ok {
			continue
		}
		if _, dup := rows[cmd]; dup {
			t.Errorf("docs/cli.md: the CLI table has two rows for %q", cmd)
		}
		rows[cmd] = flags
	}
	if len(rows) == 0 {
		t.Fatal("docs/cli.md: no CLI table rows (| `contextos …` | … |) found")
	}
	return rows
}

// packageDocUsage is the Usage block of the package doc: command path →
// flags named (an entry continues on the indented lines that follow it).
func packageDocUsage(t *testing.T) map[string][]string {
	t.Helper()
	fset := token.NewFileSet()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	var doc string
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.PackageClauseOnly|parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		if f.Doc != nil {
			if doc != "" {
				t.Errorf("%s: a second package comment (keep it in doc.go)", name)
			}
			doc = f.Doc.Text()
		}
	}
	_, usage, ok := strings.Cut(doc, "\nUsage:\n")
	if !ok {
		t.Fatal("package doc: no Usage: block")
	}
	var entries []string
	for line := range strings.Lines(usage) {
		line = strings.TrimRight(line, "\n")
		switch {
		case line == "":
			if len(entries) > 0 {
				goto done
			}
		case strings.HasPrefix(line, "\tcontextos "):
			entries = append(entries, line)
		case strings.HasPrefix(line, "\t") && len(entries) > 0:
			entries[len(entries)-1] += " " + line
		default:
			goto done
		}
	}
done:
	out := map[string][]string{}
	for _, e := range entries {
		cmd, flags, ok := usageEntry(strings.TrimSpace(e))
		if !ok {
			continue
		}
		if _, dup := out[cmd]; dup {
			t.Errorf("package doc: two Usage lines for %q", cmd)
		}
		out[cmd] = flags
	}
	return out
}

func TestDocsListEveryCommandAndFlag(t *testing.T) {
	cli := cliFlags(t)
	var all []string
	for _, fl := range cli {
		all = append(all, fl...)
	}
	for _, name := range declaredFlags(t) {
		if !slices.Contains(all, name) {
			t.Errorf("flag --%s is declared in the source but no command's -h lists it (does its Usage call PrintDefaults?)", name)
		}
	}
	for _, src := range []struct {
		name    string
		entries map[string][]string
	}{
		{"docs/cli.md command table", docsTable(t)},
		{"package doc (cmd/contextos/doc.go)", packageDocUsage(t)},
	} {
		for _, cmd := range slices.Sorted(maps.Keys(cli)) {
			documented, ok := src.entries[cmd]
			if !ok {
				t.Errorf("%s: command %q is missing", src.name, cmd)
				continue
			}
			for _, f := range cli[cmd] {
				if !slices.Contains(documented, f) {
					t.Errorf("%s: contextos %s: flag --%s is missing", src.name, cmd, f)
				}
			}
			for _, f := range documented {
				if !slices.Contains(cli[cmd], f) {
					t.Errorf("%s: contextos %s: names --%s, which the command does not have", src.name, cmd, f)
				}
			}
		}
		for _, cmd := range slices.Sorted(maps.Keys(src.entries)) {
			if _, ok := cli[cmd]; !ok {
				t.Errorf("%s: lists %q, which is not a command", src.name, cmd)
			}
		}
	}
}
