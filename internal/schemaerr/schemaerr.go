// Package schemaerr turns JSON Schema validation errors from
// github.com/santhosh-tekuri/jsonschema/v6 into flat problems, each with
// an RFC 6901 JSON pointer and an English message: Problem for the
// gateway's argument checks, and the shared problem.Problem (with the
// failing keyword as its code) for schemas.
package schemaerr

import (
	"errors"
	"sort"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/contextos/contextos/internal/problem"
)

// Problem is one validation failure: the JSON pointer of the value and a
// message.
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

var printer = message.NewPrinter(language.English)

var escaper = strings.NewReplacer("~", "~0", "/", "~1")

// Flatten returns the leaf problems of a validation error, sorted by
// pointer, without duplicates; ok is false when err is not a validation
// error.
func Flatten(err error) (probs []Problem, ok bool) {
	ls, ok := flatten(err)
	for _, l := range ls {
		if p := (Problem{Pointer: l.pointer, Message: l.message}); len(probs) == 0 || probs[len(probs)-1] != p {
			probs = append(probs, p)
		}
	}
	return probs, ok
}

// Problems returns the leaf problems of a validation error as the shared
// problem type, sorted by pointer (the Path), without duplicates: the
// Code of each is the schema keyword it fails ("required", "type", …;
// "false" for the false schema). ok is false when err is not a
// validation error.
func Problems(err error) (probs []problem.Problem, ok bool) {
	ls, ok := flatten(err)
	for _, l := range ls {
		if p := (problem.Problem{Code: problem.Code(l.keyword), Path: l.pointer, Message: l.message}); len(probs) == 0 || probs[len(probs)-1] != p {
			probs = append(probs, p)
		}
	}
	return probs, ok
}

// leaf is one failure at the bottom of a validation error's tree.
type leaf struct{ pointer, keyword, message string }

func flatten(err error) ([]leaf, bool) {
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return nil, false
	}
	var out []leaf
	leaves(ve, &out)
	sort.SliceStable(out, func(i, j int) bool { return out[i].pointer < out[j].pointer })
	return out, true
}

func leaves(ve *jsonschema.ValidationError, out *[]leaf) {
	if len(ve.Causes) == 0 {
		kw := "false"
		if path := ve.ErrorKind.KeywordPath(); len(path) > 0 {
			kw = path[len(path)-1]
		}
		*out = append(*out, leaf{pointer: Pointer(ve.InstanceLocation), keyword: kw, message: ve.ErrorKind.LocalizedString(printer)})
		return
	}
	for _, c := range ve.Causes {
		leaves(c, out)
	}
}

// Pointer writes a location as an RFC 6901 JSON pointer.
func Pointer(loc []string) string {
	var b strings.Builder
	for _, tok := range loc {
		b.WriteByte('/')
		b.WriteString(escaper.Replace(tok))
	}
	return b.String()
}
