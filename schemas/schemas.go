// Package schemas owns the published JSON Schemas of the ContextOS wire
// contracts (draft 2020-12): the files, generated from the Go types by
// `go generate ./schemas` and embedded here, and [Validate], which checks
// an incoming document against one of them and reports every problem with
// its JSON pointer.
//
// Published now: run-context.v1, invoke-agent.v1, context-pack.v2,
// compiled-context.v1, tool-envelope.v1, decision-record.v1 and
// replay-packet.v1. Their field names, required lists and enums include
// those of the upstream ContextOS schemas.
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

// Problem is one way a document fails a schema: the JSON pointer of the
// offending value ("" for the document) and a message.
type Problem struct {
	Pointer string `json:"pointer"`
	Message string `json:"message"`
}

func (p Problem) String() string {
	ptr := p.Pointer
	if ptr == "" {
		ptr = "/"
	}
	return ptr + ": " + p.Message
}

// ValidationError lists every problem of a document against a schema. It
// matches ErrInvalid.
type ValidationError struct {
	Schema   string
	Problems []Problem
}

func (e *ValidationError) Error() string {
	parts := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		parts[i] = p.String()
	}
	return "schemas: document does not conform to " + e.Schema + ": " + strings.Join(parts, "; ")
}

// Is matches ErrInvalid.
func (e *ValidationError) Is(target error) bool { return target == ErrInvalid }

var (
	compileOnce sync.Once
	compiled    map[string]*jsonschema.Schema
	compileErr  error
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
		compiled = out
	})
	return compiled, compileErr
}

// Validate checks data (one JSON document) against the named schema (see
// Resolve for accepted names). It returns nil, a *ValidationError listing
// every problem with its JSON pointer (errors.Is(err, ErrInvalid)), or an
// error for an unknown schema or a document that is not JSON.
func Validate(name string, data []byte) error {
	file, err := Resolve(name)
	if err != nil {
		return err
	}
	all, err := compileAll()
	if err != nil {
		return err
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		return &ValidationError{Schema: file, Problems: []Problem{{Message: "not a JSON document"}}}
	}
	err = all[file].Validate(inst)
	if err == nil {
		return nil
	}
	flat, ok := schemaerr.Flatten(err)
	if !ok {
		return fmt.Errorf("schemas: validate against %s: %w", file, err)
	}
	probs := make([]Problem, len(flat))
	for i, p := range flat {
		probs[i] = Problem{Pointer: p.Pointer, Message: p.Message}
	}
	return &ValidationError{Schema: file, Problems: probs}
}
