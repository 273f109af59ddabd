package canon

import (
	"errors"
	"unicode/utf8"
)

// errNotObject is what AppendWithMember returns for bytes that do not
// hold as many members as the map it was given.
var errNotObject = errors.New("canon: not the canonical form of the map")

// AppendWithMember appends to dst the canonical form of m with the member
// key: value (a string) added, given obj, the canonical form of m (as
// AppendValue wrote it), and that m has no member key: the new member is
// written into obj where its key sorts (RFC 8785 order), so nothing of m
// is encoded again. The bytes are those AppendValue writes for the map
// with the member added. dst must not overlap obj.
func AppendWithMember(dst, obj []byte, m map[string]any, key, value string) ([]byte, error) {
	before := 0
	for k := range m {
		if !utf8.ValidString(k) {
			// Encoded through encoding/json and RFC 8785, which order the
			// key by its replaced form: the caller encodes the map again.
			return nil, errNotObject
		}
		if compareUTF16(k, key) < 0 {
			before++
		}
	}
	if len(obj) < 2 || obj[0] != '{' || !utf8.ValidString(key) {
		return nil, errNotObject
	}
	if before == 0 {
		dst = appendMember(append(dst, '{'), key, value)
		if len(m) > 0 {
			dst = append(dst, ',')
		}
		return append(dst, obj[1:]...), nil
	}
	// The new member goes at the ',' or '}' that ends the member before it.
	at := 1
	for i := range before {
		if i > 0 {
			at++ // past the ','
		}
		end, ok := skipMember(obj, at)
		if !ok || i < before-1 && obj[end] != ',' {
			return nil, errNotObject
		}
		at = end
	}
	dst = appendMember(append(append(dst, obj[:at]...), ','), key, value)
	return append(dst, obj[at:]...), nil
}

// appendMember writes "key":"value".
func appendMember(dst []byte, key, value string) []byte {
	dst = appendString(dst, key)
	return appendGoString(append(dst, ':'), value)
}

// skipMember returns the index of the ',' or '}' that ends the member of
// canonical JSON object text b starting at i.
func skipMember(b []byte, i int) (int, bool) {
	depth := 0
	for ; i < len(b); i++ {
		switch b[i] {
		case '"':
			// A string: to its closing quote, over escapes.
			for i++; i < len(b) && b[i] != '"'; i++ {
				if b[i] == '\\' {
					i++
				}
			}
		case '{', '[':
			depth++
		case '}', ']':
			if depth == 0 {
				return i, b[i] == '}'
			}
			depth--
		case ',':
			if depth == 0 {
				return i, true
			}
		}
	}
	return 0, false
}
