package sensitive

import (
	"encoding/base64"
	"encoding/binary"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf16"
)

func utf16LE(s string) []byte {
	b := []byte{0xff, 0xfe}
	for _, r := range utf16.Encode([]rune(s)) {
		b = binary.LittleEndian.AppendUint16(b, r)
	}
	return b
}

func groupsOf(s string, n int) []string {
	var r []string
	for i := 0; i < len(s); i += n {
		r = append(r, s[i:min(i+n, len(s))])
	}
	return r
}

// encodedForms are the ways a card number hides in base64 that a reader
// (or a decoder) still recovers: glued to letters before or after, behind
// an id prefix, wrapped in lines or groups, under binary separators,
// nested three deep.
func encodedForms() map[string]string {
	const card = "4111111111111111"
	plain := "the customer card is " + card + " thanks"
	std := base64.StdEncoding.EncodeToString([]byte(plain))
	url := base64.RawURLEncoding.EncodeToString([]byte(plain))
	long := strings.Repeat("x", 50) + " card " + card + " " + strings.Repeat("y", 60)
	mime := strings.Join(groupsOf(base64.StdEncoding.EncodeToString([]byte(long)), 76), "\r\n") + "\r\n"
	pem := strings.Join(groupsOf(base64.StdEncoding.EncodeToString([]byte(long)), 64), "\n")
	unpadded := strings.TrimRight(std, "=")
	b64 := func(b []byte) string { return base64.StdEncoding.EncodeToString(b) }
	return map[string]string{
		"underscore prefix":     "card_" + url,
		"dash prefix":           "v1-" + url,
		"dot prefix":            "v1." + url,
		"one letter glued":      "x" + std,
		"two letters glued":     "ab" + std,
		"three letters glued":   "abc" + std,
		"length 4k+1 suffix":    unpadded + strings.Repeat("A", (4-len(unpadded)%4+1)%4),
		"mime wrapped":          mime,
		"pem wrapped":           pem,
		"spaced groups of 8":    strings.Join(groupsOf(std, 8), " "),
		"spaced groups of 4":    strings.Join(groupsOf(std, 4), " "),
		"utf16 nbsp separators": b64(utf16LE("card 4111\u00a01111\u00a01111\u00a01111")),
		"utf16 fullwidth":       b64(utf16LE("card ４１１１１１１１１１１１１１１１")),
		"control byte split":    b64([]byte("\xffcard 41111111\x1b11111111\xff")),
		"latin-1 nbsp":          b64([]byte("Kartennummer 4111\xa01111\xa01111\xa01111 g\xfcltig")),
		"triple base64":         b64([]byte(b64([]byte(b64([]byte(plain)))))),
	}
}

func TestEncodedHiddenFormsRedacted(t *testing.T) {
	t.Parallel()
	for name, s := range encodedForms() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			out, changed := Redact("data: "+s+" end", All)
			if !changed || strings.Contains(out, s) || !strings.Contains(out, Redacted) {
				t.Errorf("not redacted: %q", out)
			}
			if !strings.HasPrefix(out, "data: ") {
				t.Errorf("redaction ate the text before: %q", out)
			}
		})
	}
}

// Bytes holding a card number whose groups are split by binary a reader
// sees as a space are found, in every encoding.
func TestDetectBytesCardSplitByBinary(t *testing.T) {
	cases := map[string][]byte{
		"latin-1 nbsp":       []byte("Kartennummer 4111\xa01111\xa01111\xa01111 g\xfcltig"),
		"unit separator":     []byte("\x01\x004111\x1f1111\x1f1111\x1f1111\x00"),
		"control split":      []byte("\xffcard 41111111\x1b11111111\xff"),
		"utf-16le nbsp":      utf16LE("card 4111\u00a01111\u00a01111\u00a01111"),
		"utf-16le fullwidth": utf16LE("card ４１１１１１１１１１１１１１１１"),
		"utf-8 fullwidth":    []byte("\x00card ４１１１\xa0１１１１\xa0１１１１\xa0１１１１"),
	}
	for name, b := range cases {
		if f, ok := DetectBytes(b, All); !ok || f.Kind != Card {
			t.Errorf("%s: DetectBytes = %v, %v; want a card", name, f, ok)
		}
	}
	// Digits too far apart, or not Luhn-valid, are not a card.
	for _, b := range [][]byte{
		[]byte("\xff4111\xa0\xa0\xa0\xa01111\xa01111\xa01111\xff"),
		[]byte("\xff4111\xa01111\xa01111\xa01112\xff"),
	} {
		if f, ok := DetectBytes(b, All); ok {
			t.Errorf("DetectBytes(%q) = %v", b, f)
		}
	}
}

// Prose of equal-length words and text glued before base64 are not eaten.
func TestEncodedBlockBounds(t *testing.T) {
	for _, s := range []string{
		"this that with from have been",
		"ABCD EFGH IJKL MNOP QRST UVWX",
		"QUJD REVG R0hJ SktM TU5P UFFS",
	} {
		if out, changed := Redact(s, All); changed {
			t.Errorf("Redact(%q) = %q", s, out)
		}
	}
}

// b64Input is n bytes of base64 chunks, dash ids, spaced groups and
// wrapped lines, none holding anything.
func b64Input(n int) string {
	r := rand.New(rand.NewPCG(3, 4))
	var sb strings.Builder
	for sb.Len() < n {
		raw := make([]byte, 24+r.IntN(200))
		for i := range raw {
			raw[i] = byte(r.UintN(256))
		}
		e := base64.StdEncoding.EncodeToString(raw)
		switch r.IntN(4) {
		case 0:
			sb.WriteString(e)
		case 1:
			sb.WriteString("v1-" + strings.ReplaceAll(e, "+", "-"))
		case 2:
			sb.WriteString(strings.Join(groupsOf(e, 8), " "))
		default:
			sb.WriteString(strings.Join(groupsOf(e, 76), "\r\n"))
		}
		sb.WriteByte(' ')
	}
	return sb.String()[:n]
}

// BenchmarkRedactBase64 measures the scan's linearity: MB/s at 256 KiB
// and 1 MiB should be about equal (speed is measured here, never in a
// timed test).
func BenchmarkRedactBase64(b *testing.B) {
	for _, n := range []int{256 << 10, 1 << 20} {
		s := b64Input(n)
		b.Run(map[int]string{256 << 10: "256KiB", 1 << 20: "1MiB"}[n], func(b *testing.B) {
			b.SetBytes(int64(n))
			b.ReportAllocs()
			for b.Loop() {
				Redact(s, All)
			}
		})
	}
}
