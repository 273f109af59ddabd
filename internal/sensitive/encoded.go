package sensitive

import "strings"

// Base64-wrapped data: a run of 16 or more base64 or base64url characters
// (optionally padded) that decodes to text (printable ASCII) holding any
// kind of the catalogue is redacted whole. Runs that decode to binary (a
// hash, an id, a word) are dropped at the first non-text byte, without
// allocating.

// minEncoded is the shortest run considered (16 characters, 12 bytes).
const minEncoded = 16

// maxEncodedDepth bounds base64 inside base64.
const maxEncodedDepth = 2

func isB64(c byte) bool { return isAlnum(c) || c == '+' || c == '/' || c == '-' || c == '_' }

func b64val(c byte) (uint32, bool) {
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

func textByte(b byte) bool { return b >= 0x20 && b < 0x7f || b == '\t' || b == '\n' || b == '\r' }

// decodeBase64 appends the decoding of run (standard or URL alphabet,
// padding optional) to dst and reports whether it is non-empty text; it
// stops at the first byte that is not.
func decodeBase64(run string, dst []byte) ([]byte, bool) {
	for len(run) > 0 && run[len(run)-1] == '=' {
		run = run[:len(run)-1]
	}
	if len(run)%4 == 1 {
		return dst, false
	}
	var acc uint32
	bits, n := 0, len(dst)
	for i := 0; i < len(run); i++ {
		v, ok := b64val(run[i])
		if !ok {
			return dst, false
		}
		acc = acc<<6 | v
		bits += 6
		if bits >= 8 {
			bits -= 8
			b := byte(acc >> bits)
			if !textByte(b) {
				return dst, false
			}
			dst = append(dst, b)
		}
	}
	return dst, len(dst) > n
}

func findEncodedDepth(s string, st *stats, spans []span, first bool, depth int) []span {
	if st.maxRun < minEncoded || depth >= maxEncodedDepth {
		return spans
	}
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
		if j-i >= minEncoded && (encodedSecret(s[i:end], depth) || strings.IndexByte(s[i:j], '/') >= 0 && segmentSecret(s[i:j], depth)) {
			spans = append(spans, span{i, end, Encoded, kindInfo[Encoded].what})
			if first {
				return spans
			}
		}
		i = end
	}
	return spans
}

// segmentSecret tries the '/'-separated parts of a run (a base64url value
// in a path).
func segmentSecret(run string, depth int) bool {
	for run != "" {
		part, rest, _ := strings.Cut(run, "/")
		if len(part) >= minEncoded && encodedSecret(part, depth) {
			return true
		}
		run = rest
	}
	return false
}

// encodedSecret reports whether run decodes to text holding any kind.
func encodedSecret(run string, depth int) bool {
	var buf [512]byte
	text, ok := decodeBase64(run, buf[:0])
	if !ok {
		return false
	}
	inner := string(text)
	st := measure(inner)
	for k := Kind(0); k < numKinds; k++ {
		var found []span
		if k == Encoded {
			found = findEncodedDepth(inner, &st, nil, true, depth+1)
		} else {
			found = detect(k, inner, &st, nil, true)
		}
		if len(found) > 0 {
			return true
		}
	}
	return false
}
