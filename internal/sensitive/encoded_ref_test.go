package sensitive

// This file is a frozen, verbatim copy of encoded.go as it was before its
// fast paths (issue 37), with every identifier it declares renamed with a
// "ref" prefix. It is the reference the differential tests and
// FuzzEncodedMatchesReference hold the production detector to: the spans
// found, the redactions and the findings must stay identical for every
// input. Do not edit it to follow encoded.go: it is the specification.
// (The detectors of the other kinds, measure and IsCardNumber are the
// production ones: the reference freezes the encoded detector alone.)

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Base64-wrapped data: a run of 16 or more base64 or base64url characters
// (optionally padded) whose decoding holds any kind of the catalogue is
// redacted whole. The decoding is read as a person would read it (see
// refTextViews): a card number inside UTF-8 text, behind a byte order mark,
// in a PNG text chunk or in UTF-16 text is found as in plain ASCII.

// refMinEncoded is the shortest run considered (16 characters, 12 bytes).
const refMinEncoded = 16

// refMaxEncodedDepth bounds base64 inside base64.
const refMaxEncodedDepth = 3

func refIsSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\n' }

func refIsB64(c byte) bool { return isAlnum(c) || c == '+' || c == '/' || c == '-' || c == '_' }

func refB64val(c byte) (uint32, bool) {
	switch {
	case isUpper(c):
		return uint32(c - 'A'), true
	case isLower(c):
		return uint32(c-'a') + 26, true
	case isDigit(c):
		return uint32(c-'0') + 52, true
	case c == '+' || c == '-':
		return 62, true
	case c == '/' || c == '_':
		return 63, true
	}
	return 0, false
}

func refTextByte(b byte) bool { return b >= 0x20 && b < 0x7f || b == '\t' || b == '\n' || b == '\r' }

// refDecodeBase64 appends the decoding of run (standard or URL alphabet,
// padding optional) to dst and reports whether it is non-empty text
// (printable ASCII); it stops at the first byte that is not.
func refDecodeBase64(run string, dst []byte) ([]byte, bool) {
	return refDecode(run, dst, true)
}

// refDecodeBytes appends the decoding of run to dst, whatever the bytes, and
// reports whether it is a non-empty base64 text.
func refDecodeBytes(run string, dst []byte) ([]byte, bool) {
	return refDecode(run, dst, false)
}

func refDecode(run string, dst []byte, textOnly bool) ([]byte, bool) {
	for len(run) > 0 && run[len(run)-1] == '=' {
		run = run[:len(run)-1]
	}
	if len(run)%4 == 1 { // a stray character glued after: dropped
		run = run[:len(run)-1]
	}
	var acc uint32
	bits, n := 0, len(dst)
	for i := 0; i < len(run); i++ {
		v, ok := refB64val(run[i])
		if !ok {
			return dst, false
		}
		acc = acc<<6 | v
		bits += 6
		if bits >= 8 {
			bits -= 8
			b := byte(acc >> bits)
			if textOnly && !refTextByte(b) {
				return dst, false
			}
			dst = append(dst, b)
		}
	}
	return dst, len(dst) > n
}

func refFindEncodedDepth(s string, st *stats, spans []span, first bool, depth int) []span {
	if st.maxRun < refMinEncoded && st.maxBlock < refMinEncoded || depth >= refMaxEncodedDepth {
		return spans
	}
	blockEnd := 0 // a whitespace-split block is tried once, from its first chunk
	for i := 0; i < len(s); {
		if !refIsB64(s[i]) {
			i++
			continue
		}
		j := i
		for j < len(s) && refIsB64(s[j]) {
			j++
		}
		end := j
		for end < len(s) && end-j < 2 && s[end] == '=' {
			end++
		}
		if j-i >= refMinEncoded && refRunSecret(s[i:end], depth) {
			spans = append(spans, span{i, end, Encoded, kindInfo[Encoded].what})
			if first {
				return spans
			}
			i = end
			continue
		}
		if i >= blockEnd && end == j && (j-i)%4 == 0 {
			if bend, ok := refBlockSecret(s, i, depth); bend > 0 {
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

// refRunSecret tries a run as base64 from each of its first four characters
// (letters glued before it: "x"+b64), and its parts split at '/', '-' and
// '_' (a base64url value in a path, "card_"+b64url, "v1-"+b64url). Only
// the outermost level tries the other alignments, which bounds the work.
func refRunSecret(run string, depth int) bool {
	if refEncodedSecret(run, depth) {
		return true
	}
	if depth == 0 {
		for k := 1; k < 4 && len(run)-k >= refMinEncoded; k++ {
			if refEncodedSecret(run[k:], depth) {
				return true
			}
		}
	}
	if strings.ContainsAny(run, "/-_") {
		if k := strings.IndexAny(run, "/-_"); len(run)-k-1 >= refMinEncoded && refEncodedSecret(run[k+1:], depth) {
			return true
		}
		if k := strings.LastIndexAny(run, "/-_"); k >= refMinEncoded && refEncodedSecret(run[:k], depth) {
			return true
		}
		return refSegmentSecret(run, depth)
	}
	return false
}

// refBlockSecret joins the base64 chunks of a block that whitespace splits
// (MIME or PEM lines, groups split by spaces) from s[i:]: chunks of one
// length, a multiple of four, and a last one no longer; it reports where the block
// ends (0 when it is a single chunk or too short) and whether its decoding
// holds any kind.
func refBlockSecret(s string, i, depth int) (int, bool) {
	var buf [1024]byte
	joined := buf[:0]
	chunks, end, width := 0, i, 0
	for k := i; k < len(s); {
		j := k
		for j < len(s) && refIsB64(s[j]) {
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
		for w < len(s) && w-e < 2 && refIsSpace(s[w]) {
			w++
		}
		if w == e || w == len(s) || !refIsB64(s[w]) {
			break
		}
		k = w
	}
	if chunks < 2 || len(joined) < refMinEncoded {
		return 0, false
	}
	return end, refEncodedSecret(string(joined), depth)
}

// refSegmentSecret tries the '/', '-' and '_' separated parts of a run.
func refSegmentSecret(run string, depth int) bool {
	for run != "" {
		k := strings.IndexAny(run, "/-_")
		part, rest := run, ""
		if k >= 0 {
			part, rest = run[:k], run[k+1:]
		}
		if len(part) >= refMinEncoded && refEncodedSecret(part, depth) {
			return true
		}
		run = rest
	}
	return false
}

// refEncodedSecret reports whether run decodes to bytes holding any kind.
func refEncodedSecret(run string, depth int) bool {
	var buf [512]byte
	b, ok := refDecodeBytes(run, buf[:0])
	if !ok {
		return false
	}
	found := false
	refTextViews(b, func(inner string) bool {
		found = refAnyKind(inner, depth)
		return found
	})
	return found
}

// refAnyKind reports whether s holds any kind (base64 inside base64 down to
// refMaxEncodedDepth).
func refAnyKind(s string, depth int) bool {
	st := measure(s)
	for k := Kind(0); k < numKinds; k++ {
		var found []span
		if k == Encoded {
			found = refFindEncodedDepth(s, &st, nil, true, depth+1)
		} else {
			found = detect(k, s, &st, nil, true)
		}
		if len(found) > 0 {
			return true
		}
	}
	return false
}

// refMinReadable is the fewest characters in a row (text bytes, UTF-8
// characters; NULs between them skipped) that binary data must hold to be
// read as text: no kind of the catalogue is shorter.
const refMinReadable = 6

// refTextViews calls f with the text a reader sees in b, until f returns
// true: b itself when it is printable ASCII; else, when b holds
// refMinReadable characters in a row, its islands of text (see refReadable):
// the printable ASCII and UTF-8 text between binary, a control byte or a
// byte order mark, each island read apart; and, when b holds NUL bytes
// (UTF-16 text, a NUL-padded field), its islands with the NULs dropped.
// Binary with no such stretch (a digest, an id) is passed over without
// allocating. Text that binary cuts into pieces shorter than refMinReadable
// is not read.
func refTextViews(b []byte, f func(string) bool) {
	plain, nul := true, false
	run, longest := 0, 0
	for i := 0; i < len(b); {
		c := b[i]
		switch {
		case refTextByte(c):
			run++
		case c == 0:
			plain, nul = false, true
		case c >= utf8.RuneSelf:
			plain = false
			if r, n := utf8.DecodeRune(b[i:]); r != utf8.RuneError && unicode.IsPrint(r) {
				run++
				i += n
				longest = max(longest, run)
				continue
			}
			run = 0
		default:
			plain = false
			run = 0
		}
		longest = max(longest, run)
		i++
	}
	if plain {
		f(string(b))
		return
	}
	if d, ok := refBinaryCard(b); ok && f(d) {
		return
	}
	if longest < refMinReadable {
		return
	}
	if f(refReadable(b, false)) {
		return
	}
	if nul {
		f(refReadable(b, true))
	}
}

// refMaxDigitGap is the most non-digit bytes refBinaryCard lets stand between
// the digits of a card number: a separator in UTF-16 (digit's NUL, NBSP,
// NUL) is three.
const refMaxDigitGap = 3

// refDigitIn reads a digit at b[i]: an ASCII one, or a fullwidth one in
// UTF-8, UTF-16LE or UTF-16BE. It returns the digit and its width (0 for
// none).
func refDigitIn(b []byte, i int) (byte, int) {
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

// refBinaryCard is the conservative reading of binary data for card numbers:
// any 13 to 19 digits (ASCII or fullwidth, in UTF-8 or UTF-16) with at
// most refMaxDigitGap other bytes between each two, whose issuer prefix and
// Luhn sum make a card number, whatever separates the groups (a Latin-1
// no-break space, a unit separator, NULs). It returns the digits as text,
// allocating only then.
func refBinaryCard(b []byte) (string, bool) {
	var ds [maxCardDigits]byte
	n, gap := 0, 0
	for i := 0; i < len(b); {
		d, w := refDigitIn(b, i)
		if w == 0 {
			if gap++; gap > refMaxDigitGap {
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
			if refIsCardDigits(ds[n-l : n]) {
				return string(ds[n-l : n]), true
			}
		}
		i += w
	}
	return "", false
}

// refIsCardDigits is IsCardNumber on bytes, without allocating.
func refIsCardDigits(d []byte) bool {
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

// refReadable is the text of b: its islands of at least refMinReadable
// characters (printable ASCII and UTF-8 characters; with dropNUL, NUL
// bytes inside an island are dropped, not an end of it), each followed by
// a space. Every other byte (binary, a control byte, a byte order mark)
// ends an island; shorter islands, which cannot hold a finding, are left
// out, so binary data is read quickly.
func refReadable(b []byte, dropNUL bool) string {
	var sb strings.Builder
	var island []byte // the current island (NULs dropped)
	chars := 0
	flush := func() {
		if chars >= refMinReadable {
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
		case refTextByte(c):
			island = append(island, c)
			chars++
			i++
			continue
		case c == 0 && dropNUL:
			i++
			continue
		case c >= utf8.RuneSelf:
			if r, n := utf8.DecodeRune(b[i:]); r != utf8.RuneError && unicode.IsPrint(r) {
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

// refDetectBytes reports the first kind of set found in b read as text: b
// as it is when it is printable ASCII, else the text a reader sees in it
// (the printable ASCII and UTF-8 characters, with binary bytes between
// them read as spaces, and with NUL bytes dropped, for UTF-16 text). It
// is for data a tool returns as bytes (an image, an embedded blob) that
// is to be inlined in an output.
func refDetectBytes(b []byte, set Set) (Finding, bool) {
	var f Finding
	var ok bool
	refTextViews(b, func(s string) bool {
		f, ok = Detect(s, set)
		return ok
	})
	return f, ok
}
