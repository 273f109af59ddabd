// Package problem is the validation-problem type shared by runcontext,
// pack, decision and schemas: one Problem (path, code, message) and one
// ValidationError listing every problem of a document. Each of those
// packages re-exports the types with aliases, so errors.As with any of
// them finds the error, and each package's ErrInvalid still matches it
// with errors.Is: the error carries the sentinel it was made with.
package problem

import (
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/contextos/contextos/internal/sensitive"
)

// Code names a failure mode. Codes are stable strings (they reach JSON
// output and decision records); each package declares its own constants.
type Code string

// Problem is one validation problem: the path of the offending member
// (a dotted JSON path such as "user.delegation" or "context_pack_refs[0]",
// or for schemas a JSON pointer; "" is the whole document), a code for the
// failure mode and a message safe to show (it never echoes a secret).
//
// Gate is set only by validators that run in gates (pack): the gate that
// found the problem. It is not part of a decision record's problems.
type Problem struct {
	Gate    string `json:"gate,omitempty" jsonschema:"-"`
	Code    Code   `json:"code"`
	Path    string `json:"path"`
	Message string `json:"message"`
}

// String renders the problem as "[gate: ]path: message", with
// "(document)" for an empty path.
func (p Problem) String() string {
	path := p.Path
	if path == "" {
		path = "(document)"
	}
	if p.Gate != "" {
		return p.Gate + ": " + path + ": " + p.Message
	}
	return path + ": " + p.Message
}

// ValidationError lists every problem found in a document. It matches,
// with errors.Is, the sentinel it was made with (the ErrInvalid of the
// package that returned it), and unwraps to its causes. Packages make it
// with New; a composite literal matches no sentinel.
type ValidationError struct {
	Problems []Problem

	sentinel error
	prefix   string
	causes   []error
}

// New returns a ValidationError matching sentinel, whose message starts
// with prefix, listing probs and unwrapping to causes (nil causes are
// dropped).
func New(sentinel error, prefix string, probs []Problem, causes ...error) *ValidationError {
	e := &ValidationError{Problems: probs, sentinel: sentinel, prefix: prefix}
	for _, c := range causes {
		if c != nil {
			e.causes = append(e.causes, c)
		}
	}
	return e
}

func (e *ValidationError) Error() string {
	var b strings.Builder
	b.WriteString(e.prefix)
	b.WriteString(":")
	for i, p := range e.Problems {
		if i > 0 {
			b.WriteString(";")
		}
		b.WriteString(" ")
		b.WriteString(p.String())
	}
	return b.String()
}

// Is matches the sentinel the error was made with.
func (e *ValidationError) Is(target error) bool {
	return e.sentinel != nil && target == e.sentinel
}

// Unwrap returns the causes of the error: what a decoder or resolver
// returned, or a more specific sentinel or error the problems imply.
func (e *ValidationError) Unwrap() []error { return e.causes }

// Has reports whether a problem with the code exists.
func (e *ValidationError) Has(code Code) bool {
	return slices.ContainsFunc(e.Problems, func(p Problem) bool { return p.Code == code })
}

// HasAt reports whether a problem with the code exists at path.
func (e *ValidationError) HasAt(code Code, path string) bool {
	return slices.ContainsFunc(e.Problems, func(p Problem) bool { return p.Code == code && p.Path == path })
}

// maxQuoted bounds a value quoted in a problem message, in bytes.
const maxQuoted = 64

// Quiet is a refusal's text with any credential or card number in it
// shown as [REDACTED]: a message that quotes a caller's value never
// echoes a key pasted into it.
func Quiet(s string) string {
	if out, changed := sensitive.Redact(s, quietKinds); changed {
		return out
	}
	return s
}

// quietKinds are what Quiet redacts.
var quietKinds = sensitive.Secrets | sensitive.Of(sensitive.Card)

// Quote is a caller's value fit to quote in a message: Quiet, then Clip.
// The redaction comes first: a key cut short is a prefix no detector
// knows.
func Quote(s string) string { return Clip(Quiet(s)) }

// Clip bounds a caller's value quoted in a problem message: at most 64
// bytes, cut at a rune boundary and marked with "…", so hostile input
// cannot bloat an error and a cut never leaves invalid UTF-8.
func Clip(s string) string { return ClipN(s, maxQuoted) }

// ClipN bounds s for a message: a longer s is cut to at most n bytes on a
// rune boundary (Cut) and marked with "…", so the result is at most n+3
// bytes. It is the one clip of the module's messages.
func ClipN(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return Cut(s, n) + "…"
}

// Cut returns the longest prefix of s of at most n bytes that does not
// split a UTF-8 sequence.
func Cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
