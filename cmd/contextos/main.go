package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"encoding/json"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/internal/wire"
	"github.com/contextos/contextos/runcontext"
	"github.com/contextos/contextos/schemas"
)

// Exit codes.
const (
	exitOK      = 0
	exitInvalid = 1 // the input was read and is invalid
	exitUsage   = 2 // bad flags or arguments, unreadable files, internal errors
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

type command struct {
	name, summary string
	run           func(args []string, stdin io.Reader, stdout, stderr io.Writer) int
}

func commands() []command {
	return []command{
		{"version", "print the runtime version", cmdVersion},
		{"schemas", "list the published JSON Schemas, or write them to a directory", cmdSchemas},
		{"validate", "validate an invoke-agent or run-context document", cmdValidate},
		{"pack", "validate, sign, verify and diff Context Packs (contextos pack -h)", cmdPack},
		{"compile", "compile packs, a request and a run context into a CompiledContext", cmdCompile},
		{"run", "run one invocation with a scripted planner and scripted or live (--endpoints) tools", cmdRun},
		{"replay", "replay a replay packet offline; exit 0 on replay_equal", cmdReplay},
		{"resume", "continue a run paused in a durable store (--store) with an approval", cmdResume},
		{"records", "list, show and verify the decision records of a durable store (contextos records -h)", cmdRecords},
		{"approvals", "list the runs of a durable store that await an approval (contextos approvals -h)", cmdApprovals},
		{"agent", "run a coding-agent CLI through the Universal Agent API (contextos agent -h)", cmdAgent},
		{"serve", "serve the runtime over HTTP: the /v1 API, the approvals inbox, health checks", cmdServe},
	}
}

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return dispatch("contextos", commands(), args, stdin, stdout, stderr)
}

// dispatch runs the command args[0] names from cmds, or prints usage.
func dispatch(prog string, cmds []command, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	usage := func(w io.Writer) {
		fmt.Fprintf(w, "Usage: %s <command> [flags] [args]\n\nCommands:\n", prog)
		for _, c := range cmds {
			fmt.Fprintf(w, "  %-10s %s\n", c.name, c.summary)
		}
		fmt.Fprintf(w, "\nRun '%s <command> -h' for a command's flags.\n", prog)
	}
	if len(args) == 0 {
		usage(stderr)
		return exitUsage
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		usage(stdout)
		return exitOK
	}
	for _, c := range cmds {
		if c.name == args[0] {
			return c.run(args[1:], stdin, stdout, stderr)
		}
	}
	fmt.Fprintf(stderr, "%s: unknown command %q\n\n", prog, args[0])
	usage(stderr)
	return exitUsage
}

// parse parses a subcommand's flags; ok false means return code.
func parse(fs *flag.FlagSet, args []string, stderr io.Writer) (code int, ok bool) {
	fs.SetOutput(stderr)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK, false
		}
		return exitUsage, false
	}
	return 0, true
}

func cmdVersion(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("version", flag.ContinueOnError)
	fs.Usage = func() { fmt.Fprintln(fs.Output(), "Usage: contextos version") }
	if code, ok := parse(fs, args, stderr); !ok {
		return code
	}
	if fs.NArg() != 0 {
		fmt.Fprintln(stderr, "contextos version: takes no arguments")
		return exitUsage
	}
	fmt.Fprintf(stdout, "contextos %s\n", contextos.Version)
	return exitOK
}

func cmdSchemas(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("schemas", flag.ContinueOnError)
	out := fs.String("out", "", "write every schema file into `DIR` (created if missing)")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "Usage: contextos schemas [--out DIR]\n\nWithout --out, prints the published schema names.")
		fs.PrintDefaults()
	}
	if code, ok := parse(fs, args, stderr); !ok {
		return code
	}
	if fs.NArg() != 0 {
		fmt.Fprintln(stderr, "contextos schemas: unexpected arguments:", strings.Join(fs.Args(), " "))
		return exitUsage
	}
	names := schemas.Names()
	if *out == "" {
		for _, n := range names {
			fmt.Fprintln(stdout, n)
		}
		return exitOK
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		fmt.Fprintln(stderr, "contextos schemas:", err)
		return exitUsage
	}
	for _, n := range names {
		b, err := schemas.File(n)
		if err != nil {
			fmt.Fprintln(stderr, "contextos schemas:", err)
			return exitUsage
		}
		p := filepath.Join(*out, n)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			fmt.Fprintln(stderr, "contextos schemas:", err)
			return exitUsage
		}
		fmt.Fprintln(stdout, p)
	}
	return exitOK
}

// maxDocBytes bounds what validate reads.
const maxDocBytes = 16 << 20

func cmdValidate(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("validate", flag.ContinueOnError)
	kind := fs.String("kind", "", "document `kind`: invoke-agent or run-context")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "Usage: contextos validate --kind invoke-agent|run-context FILE\n\nFILE '-' reads standard input. Exit 0: valid; 1: invalid, one 'path: message' line per problem.")
		fs.PrintDefaults()
	}
	if code, ok := parse(fs, args, stderr); !ok {
		return code
	}
	if *kind != runcontext.KindInvokeAgent && *kind != runcontext.KindRunContext {
		fmt.Fprintf(stderr, "contextos validate: --kind must be %s or %s\n", runcontext.KindInvokeAgent, runcontext.KindRunContext)
		return exitUsage
	}
	if fs.NArg() != 1 {
		fmt.Fprintln(stderr, "contextos validate: exactly one FILE is required")
		return exitUsage
	}
	data, err := readInput(fs.Arg(0), stdin)
	if err != nil {
		fmt.Fprintln(stderr, "contextos validate:", err)
		return exitUsage
	}
	problems, err := validate(*kind, data)
	if err != nil {
		fmt.Fprintln(stderr, "contextos validate:", err)
		return exitUsage
	}
	if len(problems) == 0 {
		return exitOK
	}
	for _, p := range problems {
		fmt.Fprintln(stdout, p)
	}
	return exitInvalid
}

func readInput(name string, stdin io.Reader) ([]byte, error) {
	var r io.Reader = stdin
	if name != "-" {
		f, err := os.Open(name)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		r = f
	}
	b, err := io.ReadAll(io.LimitReader(r, maxDocBytes+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxDocBytes {
		return nil, fmt.Errorf("%s is larger than %d bytes", name, maxDocBytes)
	}
	return b, nil
}

// validate runs the published schema and the package's own rules and
// returns "path: message" lines, one per path, sorted by path.
func validate(kind string, data []byte) ([]string, error) {
	byPath := map[string]string{}
	add := func(path, msg string) {
		if path == "" {
			path = "(document)"
		}
		if _, ok := byPath[path]; !ok {
			byPath[path] = msg
		}
	}
	// Duplicate members and invalid UTF-8 first: the schema would see only
	// the last duplicate, and its message would hide the cause.
	for _, p := range wire.CheckStrict(data) {
		add(p.Path, p.Message)
	}
	var doc any
	_ = json.Unmarshal(data, &doc) // only used to render pointers; nil is fine
	var sve *schemas.ValidationError
	if err := schemas.Validate(kind, data); errors.As(err, &sve) {
		for _, p := range sve.Problems {
			add(dotted(p.Path, doc), p.Message)
		}
	} else if err != nil {
		return nil, err
	}
	var err error
	if kind == runcontext.KindInvokeAgent {
		_, err = runcontext.DecodeInvokeRequest(data)
	} else {
		_, err = runcontext.DecodeRunContext(data)
	}
	var rve *runcontext.ValidationError
	if errors.As(err, &rve) {
		for _, p := range rve.Problems {
			add(p.Path, p.Message)
		}
	} else if err != nil {
		return nil, err
	}
	paths := make([]string, 0, len(byPath))
	for p := range byPath {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	out := make([]string, len(paths))
	for i, p := range paths {
		out[i] = p + ": " + byPath[p]
	}
	return out, nil
}

// dotted renders a JSON pointer in the path style of runcontext
// ("user.delegation.scopes[1]"), using the document to tell array indexes
// from object keys.
func dotted(ptr string, doc any) string {
	if ptr == "" {
		return ""
	}
	var b strings.Builder
	for _, tok := range strings.Split(ptr[1:], "/") {
		tok = strings.NewReplacer("~1", "/", "~0", "~").Replace(tok)
		if arr, ok := doc.([]any); ok {
			if i, err := strconv.Atoi(tok); err == nil && i >= 0 && i < len(arr) {
				b.WriteString("[" + tok + "]")
				doc = arr[i]
				continue
			}
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(tok)
		if obj, ok := doc.(map[string]any); ok {
			doc = obj[tok]
		} else {
			doc = nil
		}
	}
	return b.String()
}
