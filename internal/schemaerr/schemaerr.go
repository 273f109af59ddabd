// Package schemaerr turns JSON Schema validation errors from
// github.com/santhosh-tekuri/jsonschema/v6 into flat problems, each with
// an RFC 6901 JSON pointer and an English message.
package schemaerr

import (
	"errors"
	"sort"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// Problem is one validation failure.
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
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return nil, false
	}
	leaves(ve, &probs)
	sort.SliceStable(probs, func(i, j int) bool { return probs[i].Pointer < probs[j].Pointer })
	out := probs[:0]
	for i, p := range probs {
		if i > 0 && p == probs[i-1] {
			continue
		}
		out = append(out, p)
	}
	return out, true
}

func leaves(ve *jsonschema.ValidationError, out *[]Problem) {
	if len(ve.Causes) == 0 {
		*out = append(*out, Problem{Pointer: Pointer(ve.InstanceLocation), Message: ve.ErrorKind.LocalizedString(printer)})
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
