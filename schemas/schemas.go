// Package schemas owns the published JSON Schemas of the ContextOS wire
// contracts (draft 2020-12): the files, generated from the Go types by
// `go generate ./schemas` and embedded here, and [Validate], which checks
// an incoming document against one of them and reports every problem with
// its JSON pointer and the keyword it fails, in the *ValidationError that
// runcontext, pack and decision return too.
//
// Published now: run-context.v1, invoke-agent.v1, context-pack.v2,
// compiled-context.v1, tool-envelope.v1, decision-record.v1,
// replay-packet.v1 and plan.v1 (what a model planner answers a turn with:
// steps and a decision, see agent.Planner). Their field names, required lists and enums include
// those of the upstream ContextOS schemas. Where the upstream openings do
// not show a required list, ours asks no more than the seeds' examples
// carry (decision-record.v1 follows seed 000's record; a compiled
// context's ledger requires the members of seed 000's ledger); where they
// do, ours keeps it even when a seed's abbreviated example leaves a member
// out.
package schemas

//go:generate go run ./internal/gen

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/contextos/contextos/internal/problem"
	"github.com/contextos/contextos/internal/schemaerr"
)

// BaseURL is the prefix of every schema's $id.
const BaseURL = "https://contextosai.com/schemas/"

//go:embed *.schema.json
var files embed.FS

// Sentinel errors.
var (
	// ErrUnknownSchema reports a name that is not a published schema.
	ErrUnknownSchema = errors.New("schemas: unknown schema")
	// ErrInvalid reports a document that does not conform; the error is a
	// *ValidationError.
	ErrInvalid = errors.New("schemas: document does not conform")
)

// Names returns the published schema file names, sorted.
func Names() []string {
	entries, _ := files.ReadDir(".")
	out := make([]string, 0, len(entries))
	for _, e := range entries {
		out = append(out, e.Name())
	}
	sort.Strings(out)
	return out
}

// Resolve maps a schema name to its file name. It accepts the file name
// ("run-context.v1.schema.json"), the versioned name ("run-context.v1") or
// the kind alone ("run-context", the newest version).
func Resolve(name string) (string, error) {
	names := Names()
	for _, n := range names {
		if n == name || strings.TrimSuffix(n, ".schema.json") == name {
			return n, nil
		}
	}
	best := ""
	for _, n := range names {
		kind, _, _ := strings.Cut(n, ".v")
		if kind == name && n > best {
			best = n
		}
	}
	if best == "" {
		return "", fmt.Errorf("%w: %q (known: %s)", ErrUnknownSchema, name, strings.Join(names, ", "))
	}
	return best, nil
}

// File returns the bytes of a published schema.
func File(name string) ([]byte, error) {
	file, err := Resolve(name)
	if err != nil {
		return nil, err
	}
	return files.ReadFile(file)
}

// Problem is one way a document fails a schema: Path is the JSON pointer
// of the offending value ("" for the document), Code the JSON Schema
// keyword it fails ("required", "type", "additionalProperties", …, or
// CodeSyntax) and a message. It is the Problem of every validating package
// (runcontext, pack, decision).
type Problem = problem.Problem

// Code names the keyword a problem fails.
type Code = problem.Code

// CodeSyntax is the code of a document that is not JSON.
const CodeSyntax Code = "syntax"

// ValidationError lists every problem of a document against a schema. It
// matches ErrInvalid; Has(code) and HasAt(code, pointer) look a problem up.
// It is one type shared by runcontext, pack, decision and schemas, so
// errors.As finds it whichever package refused; errors.Is(err, ErrInvalid)
// tells this package's refusals from the others'.
type ValidationError = problem.ValidationError

func invalid(label string, probs []Problem, cause error) *ValidationError {
	return problem.New(ErrInvalid, "schemas: document does not conform to "+label, probs, cause)
}

var (
	compileOnce sync.Once
	compiler    *jsonschema.Compiler
	compiled    map[string]*jsonschema.Schema
	compileErr  error
	// fragMu guards compiler and compiled after compileOnce: fragments
	// ("file#/$defs/Name") are compiled on first use.
	fragMu sync.Mutex
)

func compileAll() (map[string]*jsonschema.Schema, error) {
	compileOnce.Do(func() {
		c := jsonschema.NewCompiler()
		names := Names()
		for _, n := range names {
			b, _ := files.ReadFile(n)
			doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
			if err != nil {
				compileErr = fmt.Errorf("schemas: embedded %s: %w", n, err)
				return
			}
			if err := c.AddResource(BaseURL+n, doc); err != nil {
				compileErr = fmt.Errorf("schemas: embedded %s: %w", n, err)
				return
			}
		}
		out := make(map[string]*jsonschema.Schema, len(names))
		for _, n := range names {
			s, err := c.Compile(BaseURL + n)
			if err != nil {
				compileErr = fmt.Errorf("schemas: compile %s: %w", n, err)
				return
			}
			out[n] = s
		}
		compiler, compiled = c, out
	})
	return compiled, compileErr
}

// schemaFor returns the compiled schema of a file, or of the subschema a
// fragment (a JSON pointer: "/$defs/<Name>", "/properties/<name>") points
// at.
func schemaFor(file, fragment string) (*jsonschema.Schema, error) {
	all, err := compileAll()
	if err != nil {
		return nil, err
	}
	fragMu.Lock()
	defer fragMu.Unlock()
	if fragment == "" {
		return all[file], nil
	}
	key := file + "#" + fragment
	if s, ok := all[key]; ok {
		return s, nil
	}
	if !strings.HasPrefix(fragment, "/") {
		return nil, fmt.Errorf("%w: %q: a fragment is a JSON pointer into the schema, as #/$defs/<Name>", ErrUnknownSchema, key)
	}
	s, err := compiler.Compile(BaseURL + key)
	if err != nil {
		return nil, fmt.Errorf("%w: %s has no subschema at %q", ErrUnknownSchema, file, fragment)
	}
	all[key] = s
	return s, nil
}

// Validate checks data (one JSON document) against the named schema (see
// Resolve for accepted names), or against one of its subschemas when the
// name ends in a fragment, a JSON pointer into the schema
// ("context-pack.v2#/$defs/PackMeta" checks one layer of a pack,
// "invoke-agent.v1#/properties/context_pack_refs" one member of an
// envelope). It returns nil, a *ValidationError listing
// every problem with its JSON pointer (errors.Is(err, ErrInvalid)), or an
// error for an unknown schema or definition (ErrUnknownSchema) or a
// document that is not JSON.
func Validate(name string, data []byte) error {
	base, fragment, _ := strings.Cut(name, "#")
	file, err := Resolve(base)
	if err != nil {
		return err
	}
	sch, err := schemaFor(file, fragment)
	if err != nil {
		return err
	}
	label := file
	if fragment != "" {
		label += "#" + fragment
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		return invalid(label, []Problem{{Code: CodeSyntax, Message: "not a JSON document"}}, err)
	}
	err = sch.Validate(inst)
	if err == nil {
		return nil
	}
	probs, ok := schemaerr.Problems(err)
	if !ok {
		return fmt.Errorf("schemas: validate against %s: %w", label, err)
	}
	// A message quotes the value it refuses ("'…' does not match
	// pattern …"), the caller's text: a credential or card number in it
	// is shown as [REDACTED].
	for i := range probs {
		probs[i].Message = problem.Quiet(probs[i].Message)
	}
	return invalid(label, probs, nil)
}
