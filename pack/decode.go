package pack

import (
	"strings"

	"github.com/contextos/contextos/internal/canon"
	"github.com/contextos/contextos/internal/wire"
)

// MaxDocumentBytes bounds a pack document; larger input is refused.
const MaxDocumentBytes = 4 << 20

// Decode strictly decodes a pack document: field names are
// case-sensitive, unknown or misspelled fields and missing required ones
// are errors naming their JSON path (gate "schema"); open maps (metadata,
// arg_constraints values, applies_to) stay open. It does not run the
// other validation gates; see Validate.
func Decode(data []byte) (*Pack, error) {
	if len(data) > MaxDocumentBytes {
		return nil, invalid([]Problem{{Gate: GateSchema, Code: CodeDecode, Message: "document is larger than the 4 MiB limit"}})
	}
	var p Pack
	probs, _ := wire.Decode(data, &p)
	if len(probs) > 0 {
		out := make([]Problem, len(probs))
		for i, q := range probs {
			code := CodeDecode
			if q.Message == "is required" {
				code = CodeRequired
			}
			out[i] = Problem{Gate: GateSchema, Code: Code(code), Path: q.Path, Message: quiet(q.Message)}
		}
		return nil, invalid(out)
	}
	return &p, nil
}

// ContentHash returns the pack's content hash: "sha256:" over the RFC 8785
// canonical JSON of the pack document.
func ContentHash(p *Pack) (string, error) { return canon.Digest(p) }

// DecodeAndValidate decodes data and runs every gate on the result, with
// opts (nil: the defaults of ValidateOptions).
func DecodeAndValidate(data []byte, opts *ValidateOptions) (*Pack, error) {
	p, err := Decode(data)
	if err != nil {
		return nil, err
	}
	if err := Validate(p, opts); err != nil {
		return nil, err
	}
	return p, nil
}

func hasPrefixFold(s, prefix string) bool {
	return len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix)
}
