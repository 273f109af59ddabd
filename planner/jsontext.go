package planner

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"unicode/utf8"
)

// appendString appends s as a JSON string, as encoding/json writes it
// without HTML escaping: invalid UTF-8 becomes U+FFFD, U+2028 and U+2029
// are escaped, so the text is valid JSON and JavaScript on one line.
func appendString(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		// Eight plain bytes at a time: the text of a context block is
		// mostly plain ASCII.
		for i+8 <= len(s) && plain8(s[i:i+8]) {
			i += 8
		}
		if i == len(s) {
			break
		}
		if b := s[i]; b < utf8.RuneSelf {
			if b >= 0x20 && b != '"' && b != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '"', '\\':
				dst = append(dst, '\\', b)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hex[b>>4], hex[b&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hex[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// plain8 reports whether the 8 bytes of s are all ASCII a JSON string
// writes as they are: none ≥ 0x80, below 0x20, '"' or '\\'.
func plain8(s string) bool {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	x := uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
	if x&highs != 0 {
		return false
	}
	// With every byte below 0x80, (x - n·ones) &^ x & highs marks the
	// bytes below n, and a byte equal to c is a zero byte of x ^ c·ones.
	quote, backslash := x^(ones*'"'), x^(ones*'\\')
	return (x-ones*0x20)&^x&highs == 0 &&
		(quote-ones)&^quote&highs == 0 &&
		(backslash-ones)&^backslash&highs == 0
}

// appendStrings appends ss as a JSON array of strings.
func appendStrings(dst []byte, ss []string) []byte {
	dst = append(dst, '[')
	for i, s := range ss {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendString(dst, s)
	}
	return append(dst, ']')
}

// objectWithout is the JSON object raw without the top-level members
// drop, with "type":"object" when it has no type, its members sorted by
// key and compact; ok is false when raw is not a JSON object.
func objectWithout(raw []byte, drop ...string) (out []byte, ok bool) {
	var compact bytes.Buffer
	if err := json.Compact(&compact, raw); err != nil {
		return nil, false
	}
	members, ok := topLevel(compact.Bytes())
	if !ok {
		return nil, false
	}
	kept := members[:0]
	hasType := false
	for _, m := range members {
		if slices.Contains(drop, m.key) {
			continue
		}
		hasType = hasType || m.key == "type"
		kept = append(kept, m)
	}
	if !hasType {
		kept = append(kept, member{key: "type", value: []byte(`"object"`)})
	}
	// A duplicate key keeps its last value, as encoding/json decodes it.
	slices.SortStableFunc(kept, func(a, b member) int { return strings.Compare(a.key, b.key) })
	buf := bytes.NewBuffer(make([]byte, 0, len(raw)+16))
	buf.WriteByte('{')
	for i, m := range kept {
		if i+1 < len(kept) && kept[i+1].key == m.key {
			continue
		}
		if buf.Len() > 1 {
			buf.WriteByte(',')
		}
		buf.Write(appendString(nil, m.key))
		buf.WriteByte(':')
		buf.Write(m.value)
	}
	buf.WriteByte('}')
	return buf.Bytes(), true
}

// member is one top-level member of a JSON object.
type member struct {
	key   string
	value []byte
}

// topLevel splits a valid, compact JSON text into its top-level object
// members; ok is false when it is not an object.
func topLevel(raw []byte) (members []member, ok bool) {
	i := skipSpace(raw, 0)
	if i >= len(raw) || raw[i] != '{' {
		return nil, false
	}
	i = skipSpace(raw, i+1)
	if raw[i] == '}' {
		return nil, true
	}
	for {
		end := skipValue(raw, i) // the key, a string
		key := string(raw[i+1 : end-1])
		if !plainKey(raw[i+1 : end-1]) {
			if err := json.Unmarshal(raw[i:end], &key); err != nil {
				return nil, false
			}
		}
		i = skipSpace(raw, end)
		i = skipSpace(raw, i+1) // ':'
		end = skipValue(raw, i)
		members = append(members, member{key: key, value: raw[i:end]})
		i = skipSpace(raw, end)
		if raw[i] == '}' {
			return members, true
		}
		i = skipSpace(raw, i+1) // ','
	}
}

// plainKey reports whether a key's JSON text is its value: ASCII without
// escapes (else it is decoded, as encoding/json decodes it).
func plainKey(b []byte) bool {
	for _, c := range b {
		if c == '\\' || c >= 0x80 {
			return false
		}
	}
	return true
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipValue returns the end of the valid JSON value at b[i:].
func skipValue(b []byte, i int) int {
	depth := 0
	for ; i < len(b); i++ {
		switch b[i] {
		case '"':
			for i++; b[i] != '"'; i++ {
				if b[i] == '\\' {
					i++
				}
			}
			if depth == 0 {
				return i + 1
			}
		case '{', '[':
			depth++
		case '}', ']':
			depth--
			if depth == 0 {
				return i + 1
			}
			if depth < 0 {
				return i
			}
		case ',', ':', ' ', '\t', '\n', '\r':
			if depth == 0 {
				return i
			}
		}
	}
	return i
}
