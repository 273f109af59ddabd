package sensitive

import (
	"slices"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"
)

// Base64-wrapped data: a run of 16 or more base64 or base64url characters
// (optionally padded) whose decoding holds any kind of the catalogue is
// redacted whole. The decoding is read as a person would read it (see
// textViews): a card number inside UTF-8 text, behind a byte order mark,
// in a PNG text chunk or in UTF-16 text is found as in plain ASCII.

// minEncoded is the shortest run considered (16 characters, 12 bytes).
const minEncoded = 16

// maxEncodedDepth bounds base64 inside base64.
const maxEncodedDepth = 3

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\n' }

// noB64 marks a byte of b64Vals that is not a base64 character.
const noB64 = 0xFF

// b64Vals is each byte's base64 value, in both alphabets ('+' and '-' are
// 62, '/' and '_' 63), or noB64: one lookup instead of five tests, for
// the scans and decodings that read every character of a run.
var b64Vals = func() (t [256]byte) {
	for c := range t {
		t[c] = noB64
	}
	for c := 'A'; c <= 'Z'; c++ {
		t[c] = byte(c - 'A')
	}
	for c := 'a'; c <= 'z'; c++ {
		t[c] = byte(c-'a') + 26
	}
	for c := '0'; c <= '9'; c++ {
		t[c] = byte(c-'0') + 52
	}
	t['+'], t['-'], t['/'], t['_'] = 62, 62, 63, 63
	return t
}()

func isB64(c byte) bool { return b64Vals[c] != noB64 }

func b64val(c byte) (uint32, bool) {
	v := b64Vals[c]
	return uint32(v), v != noB64
}

func textByte(b byte) bool { return b >= 0x20 && b < 0x7f || b == '\t' || b == '\n' || b == '\r' }

// decodeBase64 appends the decoding of run (standard or URL alphabet,
// padding optional) to dst and reports whether it is non-empty text
// (printable ASCII); it stops at the first byte that is not.
func decodeBase64(run string, dst []byte) ([]byte, bool) {
	return decode(run, dst, true)
}

// decodeBytes appends the decoding of run to dst, whatever the bytes, and
// reports whether it is a non-empty base64 text.
func decodeBytes(run string, dst []byte) ([]byte, bool) {
	return decode(run, dst, false)
}

func decode(run string, dst []byte, textOnly bool) ([]byte, bool) {
	for len(run) > 0 && run[len(run)-1] == '=' {
		run = run[:len(run)-1]
	}
	if len(run)%4 == 1 { // a stray character glued after: dropped
		run = run[:len(run)-1]
	}
	n, i := len(dst), 0
	if !textOnly {
		// Whole groups of four characters, three bytes each, while every
		// character is base64: the bytes the loop below appends for
		// them. The loop takes over at a group with any other character
		// (which it ends at, having appended the bytes before it) and
		// at the last, short group.
		groups := len(run) / 4
		dst = slices.Grow(dst, 3*groups)
		r, out := run[:4*groups], dst[n:n+3*groups]
		for len(r) >= 4 && len(out) >= 3 {
			a, b, c, d := b64Vals[r[0]], b64Vals[r[1]], b64Vals[r[2]], b64Vals[r[3]]
			if (a|b|c|d)&0x80 != 0 {
				break
			}
			out[0], out[1], out[2] = a<<2|b>>4, b<<4|c>>2, c<<6|d
			r, out = r[4:], out[3:]
		}
		g := groups - len(r)/4
		dst, i = dst[:n+3*g], 4*g
	}
	var acc uint32
	bits := 0
	for ; i < len(run); i++ {
		v, ok := b64val(run[i])
		if !ok {
			return dst, false
		}
		acc = acc<<6 | v
		bits += 6
		if bits >= 8 {
			bits -= 8
			b := byte(acc >> bits)
			if textOnly && !textByte(b) {
				return dst, false
			}
			dst = append(dst, b)
		}
	}
	return dst, len(dst) > n
}

func findEncodedDepth(s string, st *stats, spans []span, first bool, depth int) []span {
	if st.maxRun < minEncoded && st.maxBlock < minEncoded || depth >= maxEncodedDepth {
		return spans
	}
	blockEnd := 0 // a whitespace-split block is tried once, from its first chunk
	for i := 0; i < len(s); {
		if !isB64(s[i]) {
			i++
			continue
		}
		j := i
		for j < len(s) && isB64(s[j]) {
			j++
		}
		end := j
		for end < len(s) && end-j < 2 && s[end] == '=' {
			end++
		}
		if j-i >= minEncoded && runSecret(s[i:end], depth) {
			spans = append(spans, span{i, end, Encoded, kindInfo[Encoded].what})
			if first {
				return spans
			}
			i = end
			continue
		}
		if i >= blockEnd && end == j && (j-i)%4 == 0 {
			if bend, ok := blockSecret(s, i, depth); bend > 0 {
				blockEnd = bend
				if ok {
					spans = append(spans, span{i, bend, Encoded, kindInfo[Encoded].what})
					if first {
						return spans
					}
					i = bend
					continue
				}
			}
		}
		i = end
	}
	return spans
}

// runSecret tries a run as base64 from each of its first four characters
// (letters glued before it: "x"+b64), and its parts split at '/', '-' and
// '_' (a base64url value in a path, "card_"+b64url, "v1-"+b64url). Only
// the outermost level tries the other alignments, which bounds the work.
func runSecret(run string, depth int) bool {
	if encodedSecret(run, depth) {
		return true
	}
	if depth == 0 {
		for k := 1; k < 4 && len(run)-k >= minEncoded; k++ {
			if encodedSecret(run[k:], depth) {
				return true
			}
		}
	}
	if strings.ContainsAny(run, "/-_") {
		if k := strings.IndexAny(run, "/-_"); len(run)-k-1 >= minEncoded && encodedSecret(run[k+1:], depth) {
			return true
		}
		if k := strings.LastIndexAny(run, "/-_"); k >= minEncoded && encodedSecret(run[:k], depth) {
			return true
		}
		return segmentSecret(run, depth)
	}
	return false
}

// blockSecret joins the base64 chunks of a block that whitespace splits
// (MIME or PEM lines, groups split by spaces) from s[i:]: chunks of one
// length, a multiple of four, and a last one no longer; it reports where the block
// ends (0 when it is a single chunk or too short) and whether its decoding
// holds any kind.
func blockSecret(s string, i, depth int) (int, bool) {
	// A block is two chunks or more: the first, unpadded, must be
	// followed by whitespace (the loop below answers 0 otherwise). Most
	// runs are not, and are answered before the buffer is set up.
	j := i
	for j < len(s) && isB64(s[j]) {
		j++
	}
	if j == len(s) || !isSpace(s[j]) {
		return 0, false
	}
	var buf [1024]byte
	joined := buf[:0]
	chunks, end, width := 0, i, 0
	for k := i; k < len(s); {
		j := k
		for j < len(s) && isB64(s[j]) {
			j++
		}
		e := j
		for e < len(s) && e-j < 2 && s[e] == '=' {
			e++
		}
		if j == k || chunks > 0 && e-k > width {
			break
		}
		if chunks == 0 {
			width = e - k
		}
		joined = append(joined, s[k:e]...)
		chunks++
		end = e
		if e > j || e-k != width {
			break // padding or a short chunk ends the block
		}
		w := e
		for w < len(s) && w-e < 2 && isSpace(s[w]) {
			w++
		}
		if w == e || w == len(s) || !isB64(s[w]) {
			break
		}
		k = w
	}
	if chunks < 2 || len(joined) < minEncoded {
		return 0, false
	}
	return end, encodedSecret(string(joined), depth)
}

// segmentSecret tries the '/', '-' and '_' separated parts of a run.
func segmentSecret(run string, depth int) bool {
	for run != "" {
		k := strings.IndexAny(run, "/-_")
		part, rest := run, ""
		if k >= 0 {
			part, rest = run[:k], run[k+1:]
		}
		if len(part) >= minEncoded && encodedSecret(part, depth) {
			return true
		}
		run = rest
	}
	return false
}

// encodedSecret reports whether run decodes to bytes holding any kind.
func encodedSecret(run string, depth int) bool {
	if len(run) <= 4*smallDecoded/3 { // a digest, an id: a small buffer to clear
		var buf [smallDecoded]byte
		return decodedSecret(run, buf[:0], depth)
	}
	var buf [512]byte
	return decodedSecret(run, buf[:0], depth)
}

// smallDecoded is the size of the buffer a short run is decoded into.
const smallDecoded = 96

// decodedSecret is encodedSecret, decoding run into buf.
func decodedSecret(run string, buf []byte, depth int) bool {
	b, ok := decodeBytes(run, buf)
	if !ok {
		return false
	}
	found := false
	textViews(b, func(inner string) bool {
		found = anyKind(inner, depth)
		return found
	})
	return found
}

// anyKind reports whether s holds any kind (base64 inside base64 down to
// maxEncodedDepth).
func anyKind(s string, depth int) bool {
	st := measure(s)
	for k := Kind(0); k < numKinds; k++ {
		var found []span
		if k == Encoded {
			found = findEncodedDepth(s, &st, nil, true, depth+1)
		} else {
			found = detect(k, s, &st, nil, true)
		}
		if len(found) > 0 {
			return true
		}
	}
	return false
}

// minReadable is the fewest characters in a row (text bytes, UTF-8
// characters; NULs between them skipped) that binary data must hold to be
// read as text: no kind of the catalogue is shorter.
const minReadable = 6

// textViews calls f with the text a reader sees in b, until f returns
// true: b itself when it is printable ASCII; else, when b holds
// minReadable characters in a row, its islands of text (see readable):
// the printable ASCII and UTF-8 text between binary, a control byte or a
// byte order mark, each island read apart; and, when b holds NUL bytes
// (UTF-16 text, a NUL-padded field), its islands with the NULs dropped.
// Binary with no such stretch (a digest, an id) is passed over without
// allocating. Text that binary cuts into pieces shorter than minReadable
// is not read.
func textViews(b []byte, f func(string) bool) {
	plain, nul := true, false
	run, longest := 0, 0
	// digitish counts the bytes a digit binaryCard reads can hold (see
	// bDigitish). Every digit it reads spans bytes of its own holding
	// one, and a card is minCardDigits digits or more: with fewer such
	// bytes it finds none, and is not called. (The bytes this loop skips,
	// inside a UTF-8 character, are 0x80–0xBF: none of them.)
	digitish := 0
	for i := 0; i < len(b); i++ {
		k := byteClass[b[i]]
		if k&bDigitish != 0 {
			digitish++
		}
		if k&bText != 0 {
			run++
			longest = max(longest, run)
			continue
		}
		plain = false
		if k&bNUL != 0 {
			nul = true
			continue
		}
		// A character of two bytes or more begins with a lead byte
		// (0xC2–0xF4) and a continuation byte (0x80–0xBF): any other
		// byte is utf8.RuneError, no character.
		if k&bLead != 0 && i+1 < len(b) && b[i+1]&0xC0 == 0x80 {
			if n := printableAt(b, i); n > 0 {
				run++
				i += n - 1
				longest = max(longest, run)
				continue
			}
		}
		run = 0
	}
	if plain {
		f(string(b))
		return
	}
	if digitish >= minCardDigits {
		if d, ok := binaryCard(b); ok && f(d) {
			return
		}
	}
	if longest < minReadable {
		return
	}
	if f(readable(b, false)) {
		return
	}
	if nul {
		f(readable(b, true))
	}
}

// The classes of a byte, for textViews.
const (
	bText     = 1 << iota // textByte
	bNUL                  // NUL
	bLead                 // a byte that can begin a UTF-8 character of two bytes or more: 0xC2–0xF4
	bDigitish             // an ASCII digit; 0xFF, in a fullwidth digit in UTF-16; 0xEF, the lead of one in UTF-8
)

var byteClass = func() (t [256]uint8) {
	for i := range t {
		c := byte(i)
		switch {
		case textByte(c):
			t[i] |= bText
		case c == 0:
			t[i] |= bNUL
		case c >= 0xC2 && c <= 0xF4:
			t[i] |= bLead
		}
		if isDigit(c) || c == 0xEF || c == 0xFF {
			t[i] |= bDigitish
		}
	}
	return t
}()

// printableAt is the width of the printable UTF-8 character at b[i]
// (b[i] >= utf8.RuneSelf), or 0 when there is none: what
// utf8.DecodeRune(b[i:]) and unicode.IsPrint answer, without calling them
// for the bytes that cannot begin a valid character (0x80–0xC1,
// 0xF5–0xFF, or a lead byte not followed by a continuation byte: all
// utf8.RuneError), and with IsPrint of a two-byte character (U+0080 to
// U+07FF) read from a table of its answers.
func printableAt(b []byte, i int) int {
	c := b[i]
	if c < 0xC2 || c > 0xF4 || i+1 >= len(b) || b[i+1]&0xC0 != 0x80 {
		return 0
	}
	if c < 0xE0 {
		r := rune(c&0x1F)<<6 | rune(b[i+1]&0x3F)
		if printable2()[r>>6]>>(r&63)&1 != 0 {
			return 2
		}
		return 0
	}
	if r, n := utf8.DecodeRune(b[i:]); r != utf8.RuneError && unicode.IsPrint(r) {
		return n
	}
	return 0
}

// printable2 is unicode.IsPrint of every rune below U+0800, a bit each,
// computed when first needed.
var printable2 = sync.OnceValue(func() *[0x800 / 64]uint64 {
	var t [0x800 / 64]uint64
	for r := rune(0); r < 0x800; r++ {
		if unicode.IsPrint(r) {
			t[r>>6] |= 1 << (r & 63)
		}
	}
	return &t
})

// maxDigitGap is the most non-digit bytes binaryCard lets stand between
// the digits of a card number: a separator in UTF-16 (digit's NUL, NBSP,
// NUL) is three.
const maxDigitGap = 3

// digitIn reads a digit at b[i]: an ASCII one, or a fullwidth one in
// UTF-8, UTF-16LE or UTF-16BE. It returns the digit and its width (0 for
// none).
func digitIn(b []byte, i int) (byte, int) {
	c := b[i]
	switch {
	case isDigit(c):
		return c - '0', 1
	case i+1 < len(b) && c >= 0x10 && c <= 0x19 && b[i+1] == 0xFF:
		return c - 0x10, 2
	case i+1 < len(b) && c == 0xFF && b[i+1] >= 0x10 && b[i+1] <= 0x19:
		return b[i+1] - 0x10, 2
	case i+2 < len(b) && c == 0xEF && b[i+1] == 0xBC && b[i+2] >= 0x90 && b[i+2] <= 0x99:
		return b[i+2] - 0x90, 3
	}
	return 0, 0
}

// binaryCard is the conservative reading of binary data for card numbers:
// any 13 to 19 digits (ASCII or fullwidth, in UTF-8 or UTF-16) with at
// most maxDigitGap other bytes between each two, whose issuer prefix and
// Luhn sum make a card number, whatever separates the groups (a Latin-1
// no-break space, a unit separator, NULs). It returns the digits as text,
// allocating only then.
func binaryCard(b []byte) (string, bool) {
	var ds [maxCardDigits]byte
	n, gap := 0, 0
	for i := 0; i < len(b); {
		d, w := digitIn(b, i)
		if w == 0 {
			if gap++; gap > maxDigitGap {
				n = 0
			}
			i++
			continue
		}
		gap = 0
		if n == len(ds) {
			copy(ds[:], ds[1:])
			n--
		}
		ds[n] = '0' + d
		n++
		for l := minCardDigits; l <= n; l++ {
			if isCardDigits(ds[n-l : n]) {
				return string(ds[n-l : n]), true
			}
		}
		i += w
	}
	return "", false
}

// isCardDigits is IsCardNumber on bytes, without allocating.
func isCardDigits(d []byte) bool {
	sum, double := 0, false
	for k := len(d) - 1; k >= 0; k-- {
		v := int(d[k] - '0')
		if double {
			if v *= 2; v > 9 {
				v -= 9
			}
		}
		sum += v
		double = !double
	}
	return sum%10 == 0 && IsCardNumber(string(d))
}

// readable is the text of b: its islands of at least minReadable
// characters (printable ASCII and UTF-8 characters; with dropNUL, NUL
// bytes inside an island are dropped, not an end of it), each followed by
// a space. Every other byte (binary, a control byte, a byte order mark)
// ends an island; shorter islands, which cannot hold a finding, are left
// out, so binary data is read quickly.
func readable(b []byte, dropNUL bool) string {
	var sb strings.Builder
	var island []byte // the current island (NULs dropped)
	chars := 0
	flush := func() {
		if chars >= minReadable {
			if sb.Len() == 0 {
				sb.Grow(len(b) / 2)
			}
			sb.Write(island)
			sb.WriteByte(' ')
		}
		island, chars = island[:0], 0
	}
	for i := 0; i < len(b); {
		c := b[i]
		switch {
		case textByte(c):
			island = append(island, c)
			chars++
			i++
			continue
		case c == 0 && dropNUL:
			i++
			continue
		case c >= utf8.RuneSelf:
			if n := printableAt(b, i); n > 0 {
				island = append(island, b[i:i+n]...)
				chars++
				i += n
				continue
			}
		}
		flush()
		i++
	}
	flush()
	return sb.String()
}

// DetectBytes reports the first kind of set found in b read as text: b
// as it is when it is printable ASCII, else the text a reader sees in it
// (the printable ASCII and UTF-8 characters, with binary bytes between
// them read as spaces, and with NUL bytes dropped, for UTF-16 text). It
// is for data a tool returns as bytes (an image, an embedded blob) that
// is to be inlined in an output.
func DetectBytes(b []byte, set Set) (Finding, bool) {
	var f Finding
	var ok bool
	textViews(b, func(s string) bool {
		f, ok = Detect(s, set)
		return ok
	})
	return f, ok
}
