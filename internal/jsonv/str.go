package jsonv

import "unicode/utf8"

const hexDigits = "0123456789abcdef"

// plainByte reports the bytes AppendString copies as they are: ASCII from
// space on, but for ", \, <, > and &.
var plainByte = func() (t [utf8.RuneSelf]bool) {
	for c := ' '; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\' && c != '<' && c != '>' && c != '&'
	}
	return t
}()

// ones and highs are the word-at-a-time constants of AppendString: eight
// bytes read as one word have a byte that needs escaping exactly when
// (x | x-ones*0x20 &^ x | zeroIn(x^ones*c) for each of ", \, <, > and
// &) & highs is not zero (a byte from 0x80, a byte below space, a byte
// equal to c).
const ones, highs = 0x0101010101010101, 0x8080808080808080

// zeroIn has the high bit of some byte set, under highs, when a byte of
// y is zero.
func zeroIn(y uint64) uint64 { return (y - ones) &^ y }

// word is the first eight bytes of s (at least eight) as one word, the
// first byte lowest.
func word(s string) uint64 {
	_ = s[7] // one bounds check, not eight
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}

// plainWord reports whether no byte of the word x needs escaping (see
// ones).
func plainWord(x uint64) bool {
	return (x|(x-ones*0x20)&^x|zeroIn(x^(ones*'"'))|zeroIn(x^(ones*'\\'))|zeroIn(x^(ones*'<'))|zeroIn(x^(ones*'>'))|zeroIn(x^(ones*'&')))&highs == 0
}

// AppendString writes s as a JSON string as json.Marshal does (HTML
// escaping on): ", \ and control characters escaped (\b \f \n \r \t
// short), <, > and & as \u003c \u003e \u0026, U+2028 and U+2029 as
// \u2028 \u2029, and each byte of invalid UTF-8 as \ufffd.
func AppendString(b []byte, s string) []byte {
	// Eight bytes at a time while none needs escaping; when fewer than
	// eight are left, the last eight (overlapping bytes already read) as
	// one word, or, in a string shorter than eight bytes, each byte. A
	// string with nothing to escape is copied as it is.
	i := 0
	for i+8 <= len(s) && plainWord(word(s[i:])) {
		i += 8
	}
	switch {
	case i == len(s):
	case len(s) < 8:
		for i < len(s) && s[i] < utf8.RuneSelf && plainByte[s[i]] {
			i++
		}
	case i+8 > len(s) && plainWord(word(s[len(s)-8:])):
		i = len(s)
	}
	b = append(b, '"')
	if i == len(s) {
		b = append(b, s...)
		return append(b, '"')
	}
	return appendEscaped(b, s, i)
}

// appendEscaped is AppendString of s, whose first i bytes need no
// escaping, after the opening quote, which b ends with.
func appendEscaped(b []byte, s string, i int) []byte {
	start := 0
	for i < len(s) {
		if i+8 <= len(s) && plainWord(word(s[i:])) {
			i += 8
			continue
		}
		if c := s[i]; c < utf8.RuneSelf {
			if plainByte[c] {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '\\', '"':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
