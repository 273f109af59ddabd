package sensitive

import "strings"

// Payment card numbers: 13 to 19 digits (ASCII or fullwidth, U+FF10 to
// U+FF19) in groups joined by single spaces, dashes or dots, or by
// nothing (or by look-alikes of those: see sepAt), passing the Luhn check, with an issuer prefix of a card scheme
// (major industry identifiers 2 to 6). A number glued to letters
// ("card4111111111111111x") is found too, except inside a long hex token
// (a hash), a UUID, or the SDK's own "<prefix>_<16 hex>" ids. Digits and
// separators may be percent-encoded, once or more, as a URL, a query or
// a form writes them ("4111%201111%201111%201111", "4111%2D1111…",
// "4111%25201111…", "%34%31%31%31…"): a reader who decodes sees a card.

// digitAt returns the value and byte width of the digit at s[i], or -1:
// an ASCII digit, a fullwidth one, or a percent-encoded ASCII digit.
func digitAt(s string, i int) (int, int) {
	c := s[i]
	if isDigit(c) {
		return int(c - '0'), 1
	}
	if c == 0xEF && i+2 < len(s) && s[i+1] == 0xBC && s[i+2] >= 0x90 && s[i+2] <= 0x99 {
		return int(s[i+2] - 0x90), 3
	}
	if c == '%' {
		if b, w := pctByte(s, i); w > 0 && isDigit(b) {
			return int(b - '0'), w
		}
	}
	return -1, 0
}

// maxPctLayers bounds how many times an escape may be percent-encoded
// again ("%25" before it) and still be read.
const maxPctLayers = 4

// pctByte decodes the percent-escape at s[i], encoded once ("%20") or
// more ("%2520" is "%20" encoded again), and returns the byte and the
// escape's width, or width 0 when s[i] starts no escape.
func pctByte(s string, i int) (byte, int) {
	if i >= len(s) || s[i] != '%' {
		return 0, 0
	}
	k := i + 1
	for range maxPctLayers {
		// "%25" followed by another hex pair is one more layer.
		if k+3 < len(s) && s[k] == '2' && s[k+1] == '5' && isHex(s[k+2]) && isHex(s[k+3]) {
			k += 2
			continue
		}
		break
	}
	if k+1 >= len(s) || !isHex(s[k]) || !isHex(s[k+1]) {
		return 0, 0
	}
	return hexVal(s[k])<<4 | hexVal(s[k+1]), k + 2 - i
}

func hexVal(c byte) byte {
	switch {
	case isDigit(c):
		return c - '0'
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10
	}
	return c - 'A' + 10
}

// pctSep returns the byte width of a percent-encoded separator at s[i]
// (one escape per byte of the separator's UTF-8: "%20", "%2D", "%2520",
// "%C2%A0"), or 0.
func pctSep(s string, i int) int {
	var dec [3]byte
	k := i
	for n := range len(dec) {
		b, w := pctByte(s, k)
		if w == 0 {
			return 0
		}
		dec[n], k = b, k+w
		if b == '%' {
			return 0 // a literal '%': no separator
		}
		if sepOne(string(dec[:n+1]), 0) == n+1 {
			return k - i
		}
	}
	return 0
}

// group is a run of digits: its byte range, its digit count and whether
// every digit is ASCII.
type group struct {
	start, end, n int
	ascii         bool
}

func groupAt(s string, i int) group {
	g := group{start: i, ascii: true}
	for i < len(s) {
		_, w := digitAt(s, i)
		if w == 0 {
			break
		}
		if w > 1 {
			g.ascii = false
		}
		i += w
		g.n++
	}
	g.end = i
	return g
}

// nextGroup returns the group after g when one separator joins them.
func nextGroup(s string, g group) (group, bool) {
	i := g.end
	w := sepAt(s, i)
	if w == 0 || i+w >= len(s) {
		return group{}, false
	}
	if _, dw := digitAt(s, i+w); dw == 0 {
		return group{}, false
	}
	return groupAt(s, i+w), true
}

// sepAt returns the byte width of the digit-group separator at s[i], or
// 0: a run of up to three separator characters (so "4111 - 1111",
// "4111  1111" and "4111+1111" are one number, as a reader sees them).
func sepAt(s string, i int) int {
	w := 0
	for range 3 {
		n := sepOne(s, i+w)
		if n == 0 {
			break
		}
		w += n
	}
	return w
}

// sepOne returns the byte width of one separator character at s[i], or 0:
// a space, tab or line break, dash, dot, underscore, slash or plus (a
// form-encoded space), the look-alikes that
// would hide a number from a plainer scanner (no-break and ideographic
// spaces, zero-width characters, the fullwidth hyphen, dot and space),
// and any of these percent-encoded (pctSep).
func sepOne(s string, i int) int {
	if i >= len(s) {
		return 0
	}
	switch s[i] {
	case ' ', '-', '.', '\t', '\n', '\r', '_', '/', '+':
		return 1
	case '%':
		return pctSep(s, i)
	case 0xC2: // U+00A0
		if strings.HasPrefix(s[i:], "\u00a0") {
			return 2
		}
	case 0xE2, 0xE3, 0xEF:
		for _, sep := range wideSeparators {
			if strings.HasPrefix(s[i:], sep) {
				return len(sep)
			}
		}
	}
	return 0
}

var wideSeparators = []string{"\u200b", "\u200c", "\u200d", "\u2060", "\u2011", "\u2013", "\u3000", "\ufeff", "\uff0d", "\uff0e"}

const maxCardDigits, minCardDigits = 19, 13

func findCards(s string, st *stats, spans []span, first bool) []span {
	if st.digits < minCardDigits {
		return spans
	}
	var gs [maxCardDigits]group
	for i := 0; i < len(s); {
		if _, w := digitAt(s, i); w == 0 {
			i++
			continue
		}
		// The groups from here, while they hold at most 19 digits.
		n, total := 0, 0
		g := groupAt(s, i)
		for {
			if total+g.n > maxCardDigits {
				break
			}
			gs[n], total = g, total+g.n
			n++
			next, ok := nextGroup(s, g)
			if !ok || n == len(gs) {
				break
			}
			g = next
		}
		// The longest window of whole groups from the first that is a card.
		matched := false
		for j, sum := n-1, total; j >= 0; j-- {
			if sum >= minCardDigits && isCard(s, gs[0].start, gs[j].end, sum) && !notCard(s, gs[:j+1], sum) {
				spans = append(spans, span{gs[0].start, gs[j].end, Card, kindInfo[Card].what})
				if first {
					return spans
				}
				i, matched = gs[j].end, true
				break
			}
			sum -= gs[j].n
		}
		if !matched {
			i = groupAt(s, i).end
		}
	}
	return spans
}

// isCard checks the issuer prefix and the Luhn sum of the digits in
// s[start:end] (n of them).
func isCard(s string, start, end, n int) bool {
	d1, w := digitAt(s, start)
	d2 := -1
	for k := start + w; k < end; {
		if d, dw := digitAt(s, k); dw > 0 {
			d2 = d
			break
		}
		k += max(sepAt(s, k), 1)
	}
	switch d1 {
	case 2: // Mir 2200-2204, Mastercard 2221-2720: 16 digits and up
		if n < 16 {
			return false
		}
	case 3: // Amex 34/37 (15), Diners 30/36/38/39 (14+), JCB 35 (16+)
		switch {
		case d2 == 4 || d2 == 7:
			if n != 15 {
				return false
			}
		case d2 == 5:
			if n < 16 {
				return false
			}
		case d2 == 0 || d2 == 6 || d2 == 8 || d2 == 9:
			if n < 14 {
				return false
			}
		default:
			return false
		}
	case 4, 5, 6:
	default:
		return false
	}
	return luhnRange(s, start, end, n)
}

// luhnRange checks the Luhn sum of the n digits in s[start:end], which
// holds digits and separators only. It walks forward as the groups were
// read (an escape such as "%20" holds digits that are no digit of the
// number), doubling every second digit from the right.
func luhnRange(s string, start, end, n int) bool {
	sum, idx := 0, 0
	for k := start; k < end; {
		d, w := digitAt(s, k)
		if w == 0 {
			k += max(sepAt(s, k), 1)
			continue
		}
		if (n-1-idx)%2 == 1 {
			if d *= 2; d > 9 {
				d -= 9
			}
		}
		sum += d
		idx++
		k += w
	}
	return sum%10 == 0
}

// idPrefixes are the prefixes of the SDK's ids ("tool_" + 16 hex digits).
var idPrefixes = []string{"tool_", "tc_", "run_", "req_", "pol_", "dr_", "rp_", "ik_", "apr_"}

// notCard reports a Luhn-valid window that is part of something else: a
// long hex token (a hash), a UUID or an SDK id.
func notCard(s string, gs []group, n int) bool {
	start, end := gs[0].start, gs[len(gs)-1].end
	if len(gs) == 1 && gs[0].ascii && n == 16 && start > 0 && s[start-1] == '_' && (end == len(s) || !isAlnum(s[end])) {
		for _, p := range idPrefixes {
			if k := start - len(p); k >= 0 && s[k:start] == p && (k == 0 || !isAlnum(s[k-1])) {
				return true
			}
		}
	}
	if hexToken(s, gs[0].start) || hexToken(s, gs[len(gs)-1].start) {
		return true
	}
	return inUUID(s, start, end)
}

// hexToken reports whether the alphanumeric token around s[i] is all hex
// digits, with a letter, and at least 24 long: a hash, not a number. It
// looks at most maxHexScan bytes either way (a longer hex run is a hash
// too), so a long token costs no more per candidate.
func hexToken(s string, i int) bool {
	l, r, letter := i, i, false
	for l > 0 && i-l < maxHexScan && isAlnum(s[l-1]) {
		if !isHex(s[l-1]) {
			return false
		}
		letter = letter || isLetter(s[l-1])
		l--
	}
	for r < len(s) && r-i < maxHexScan && isAlnum(s[r]) {
		if !isHex(s[r]) {
			return false
		}
		letter = letter || isLetter(s[r])
		r++
	}
	return letter && r-l >= 24
}

const maxHexScan = 128

// inUUID reports whether s[start:end] lies in an 8-4-4-4-12 UUID.
func inUUID(s string, start, end int) bool {
	if end-start > 32 {
		return false
	}
	for k := max(0, end-36); k <= start && k+36 <= len(s); k++ {
		if isUUID(s[k : k+36]) {
			return true
		}
	}
	return false
}

func isUUID(s string) bool {
	for i := 0; i < 36; i++ {
		switch i {
		case 8, 13, 18, 23:
			if s[i] != '-' {
				return false
			}
		default:
			if !isHex(s[i]) {
				return false
			}
		}
	}
	return true
}

// IsCardNumber reports whether s is, as a whole, a payment card number
// (digits only, as a JSON number's text is).
func IsCardNumber(s string) bool {
	n := len(s)
	if n < minCardDigits || n > maxCardDigits {
		return false
	}
	for i := 0; i < n; i++ {
		if !isDigit(s[i]) {
			return false
		}
	}
	return isCard(s, 0, n, n)
}
