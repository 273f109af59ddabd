package canon

import (
	"encoding/json"
	"fmt"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/gowebpki/jcs"
)

// transform is the general path's RFC 8785 writer: github.com/gowebpki/jcs,
// the reference implementation, behind encoding/json's validity check
// (which also bounds nesting, so hostile input cannot exhaust the stack).
// Only what the reflective encoder hands back (embedded structs, the
// ",string" option, some map keys) and raw JSON documents take it; the
// benchmarks of a governed call and of a run never do.
func transform(in []byte) ([]byte, error) {
	if !json.Valid(in) {
		return nil, fmt.Errorf("invalid JSON")
	}
	return jcs.Transform(in)
}

// compareUTF16 orders strings by their UTF-16 code units (RFC 8785 §3.2.3).
// Byte order of UTF-8 equals code point order, which differs from UTF-16
// order only between supplementary characters (surrogate pairs, D800–DFFF)
// and BMP characters E000–FFFF.
//
// Only the sign of the result is meaningful. Up to the first byte in which
// a and b differ they decode alike (the same bytes, and a decoder never
// takes an ASCII byte into a rune it started before it), so two ASCII
// bytes there order the strings as their code points do, and their
// UTF-16 code units; any other difference (or a string that is a prefix
// of the other) is decided rune by rune, invalid UTF-8 included.
func compareUTF16(a, b string) int {
	n := min(len(a), len(b))
	i := 0
	for i < n && a[i] == b[i] {
		i++
	}
	if i < n && a[i] < utf8.RuneSelf && b[i] < utf8.RuneSelf {
		return int(a[i]) - int(b[i])
	}
	return compareRunes(a, b)
}

// compareRunes is compareUTF16 decoding every rune.
func compareRunes(a, b string) int {
	for a != "" && b != "" {
		ra, na := utf8.DecodeRuneInString(a)
		rb, nb := utf8.DecodeRuneInString(b)
		if ra != rb {
			return int(utf16Key(ra)) - int(utf16Key(rb))
		}
		a, b = a[na:], b[nb:]
	}
	return len(a) - len(b)
}

// utf16Key maps a rune to its first UTF-16 code unit, which decides the
// order of two different runes (equal first units imply both are
// supplementary; then their code points order them the same way).
func utf16Key(r rune) uint32 {
	if r >= 0x10000 {
		hi, lo := utf16.EncodeRune(r)
		return uint32(hi)<<16 | uint32(lo)
	}
	return uint32(r) << 16
}

const hexDigits = "0123456789abcdef"

// appendString writes s as ECMAScript JSON.stringify does.
func appendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		dst = append(dst, s[start:i]...)
		switch c {
		case '"', '\\':
			dst = append(dst, '\\', c)
		case '\b':
			dst = append(dst, '\\', 'b')
		case '\f':
			dst = append(dst, '\\', 'f')
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		default:
			dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		}
		start = i + 1
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
