package sensitive

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"unicode/utf16"
)

// blobs are data a tool returns as bytes, each holding the test card
// number: UTF-8 text, text behind a byte order mark, a PNG text chunk, a
// PDF, UTF-16 text, a NUL-padded record.
func blobs() map[string][]byte {
	u16 := func(s string, le bool) []byte {
		var b []byte
		if le {
			b = []byte{0xff, 0xfe}
		} else {
			b = []byte{0xfe, 0xff}
		}
		for _, r := range utf16.Encode([]rune(s)) {
			if le {
				b = binary.LittleEndian.AppendUint16(b, r)
			} else {
				b = binary.BigEndian.AppendUint16(b, r)
			}
		}
		return b
	}
	return map[string][]byte{
		"utf-8 text":        []byte("Zahlung für Müller, Karte " + visa + ", gültig"),
		"byte order mark":   []byte("\xef\xbb\xbfcard " + visa),
		"png text chunk":    append([]byte{0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', 0, 0, 0, 0x19}, []byte("tEXtComment\x00card "+visa+"\x8a\x13\xfe")...),
		"pdf":               []byte("%PDF-1.7\n%\xe2\xe3\xcf\xd3\n1 0 obj\n(Card " + visa + ") Tj\nendobj\n"),
		"utf-16le":          u16("Karte "+visa+" für Müller", true),
		"utf-16be":          u16("card "+visa, false),
		"nul-padded record": append(append([]byte{0x00, 0x01, 0x02, 0xff}, []byte(visa)...), 0, 0, 0, 0),
		"control bytes":     []byte("\x02card\x1f" + visa + "\x03"),
	}
}

// A card number inside base64 data is found and the run redacted whole,
// whatever else the data holds (non-ASCII text, a byte order mark, binary
// around it, UTF-16), in every base64 alphabet, padded or not; and
// DetectBytes finds it in the bytes themselves.
func TestEncodedCardInBinary(t *testing.T) {
	encs := map[string]*base64.Encoding{"std": base64.StdEncoding, "url": base64.URLEncoding, "raw std": base64.RawStdEncoding, "raw url": base64.RawURLEncoding}
	for name, b := range blobs() {
		if f, ok := DetectBytes(b, All); !ok || f.Kind != Card {
			t.Errorf("%s: DetectBytes = %v, %v; want a card", name, f, ok)
		}
		for en, enc := range encs {
			s := enc.EncodeToString(b)
			for _, set := range []Set{All, Of(Card, Encoded)} {
				if out, changed := Redact("data: "+s+" end", set); out != "data: "+Redacted+" end" || !changed {
					t.Errorf("%s, %s: Redact = %q", name, en, out)
				}
			}
			if f, ok := Detect(s, All); !ok || f.Kind != Encoded {
				t.Errorf("%s, %s: Detect = %v, %v", name, en, f, ok)
			}
		}
	}
}

// Binary data with nothing sensitive in it stays: digests, random bytes
// (a run of text too short to hold anything is not read), and text with
// nothing in it, as bytes and as base64.
func TestEncodedBinaryLeftAlone(t *testing.T) {
	var data [][]byte
	for i := range 300 {
		sum := sha256.Sum256([]byte(strconv.Itoa(i)))
		data = append(data, sum[:])
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 100 {
		b := make([]byte, 12+r.IntN(200))
		for i := range b {
			b[i] = byte(r.UintN(256))
		}
		data = append(data, b)
	}
	data = append(data, []byte("\xef\xbb\xbfGrüße aus Köln, Bestellung ord_881"), []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\x0dIHDR\x00\x00\x01\x00"))
	for _, b := range data {
		if f, ok := DetectBytes(b, All); ok {
			t.Errorf("DetectBytes(%q) = %v", b, f)
		}
		s := base64.StdEncoding.EncodeToString(b)
		if out, changed := Redact(s, All); changed {
			t.Errorf("Redact(%s) (%q) = %q", s, b, out)
		}
	}
}

// luhnCard is a Luhn-valid 16-digit number from r.
func luhnCard(r *rand.Rand) string {
	d := make([]byte, 16)
	d[0] = '4'
	for i := 1; i < 15; i++ {
		d[i] = byte('0' + r.IntN(10))
	}
	sum := 0
	for i := 14; i >= 0; i-- {
		n := int(d[i] - '0')
		if (14-i)%2 == 0 {
			n *= 2
			if n > 9 {
				n -= 9
			}
		}
		sum += n
	}
	d[15] = byte('0' + (10-sum%10)%10)
	return string(d)
}

// separators are bytes that end text in binary data: control bytes,
// binary, a NUL.
var separators = []byte{0x00, 0x01, 0x1b, 0x7f, 0x89, 0xc3, 0xfe, 0xff}

// cardBlob is prefix, a separator, a card number, a separator, suffix.
func cardBlob(prefix, suffix []byte, card string, s1, s2 byte) []byte {
	b := append(append([]byte{}, prefix...), s1)
	b = append(append(b, card...), s2)
	return append(b, suffix...)
}

// Any blob holding a Luhn-valid card number set off from its neighbours
// by binary, whatever the binary around it, never gets through Redact in
// base64 (every alphabet), nor through DetectBytes.
func TestCardInBlobProperty(t *testing.T) {
	r := rand.New(rand.NewPCG(15, 2))
	for i := range 2000 {
		pre, suf := make([]byte, r.IntN(64)), make([]byte, r.IntN(64))
		for j := range pre {
			pre[j] = byte(r.UintN(256))
		}
		for j := range suf {
			suf[j] = byte(r.UintN(256))
		}
		card := luhnCard(r)
		b := cardBlob(pre, suf, card, separators[r.IntN(len(separators))], separators[r.IntN(len(separators))])
		checkCardBlob(t, strconv.Itoa(i), b)
	}
}

func checkCardBlob(t *testing.T, name string, b []byte) {
	t.Helper()
	if _, ok := DetectBytes(b, All); !ok {
		t.Fatalf("%s: DetectBytes(%q) found nothing", name, b)
	}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding, base64.RawStdEncoding} {
		s := enc.EncodeToString(b)
		if out, _ := Redact(s, Of(Card, Encoded)); out != Redacted {
			t.Fatalf("%s: Redact(%s) (%q) = %q, want it whole redacted", name, s, b, out)
		}
	}
}

// FuzzCardInBlob: a card number set off by binary in any bytes is found.
func FuzzCardInBlob(f *testing.F) {
	for _, b := range blobs() {
		f.Add(b[:len(b)/2], b[len(b)/2:], uint8(0), uint8(1))
	}
	f.Add([]byte("\x89PNG"), []byte{}, uint8(3), uint8(7))
	f.Fuzz(func(t *testing.T, pre, suf []byte, s1, s2 uint8) {
		if len(pre)+len(suf) > 4096 {
			return
		}
		checkCardBlob(t, "fuzz", cardBlob(pre, suf, visa, separators[int(s1)%len(separators)], separators[int(s2)%len(separators)]))
	})
}

// DetectBytes of printable ASCII is Detect of its text.
func TestDetectBytesText(t *testing.T) {
	for _, s := range []string{"ok", "card " + visa, "key " + awsKey, strings.Repeat("x", 40)} {
		f1, ok1 := DetectBytes([]byte(s), All)
		f2, ok2 := Detect(s, All)
		if f1 != f2 || ok1 != ok2 {
			t.Errorf("DetectBytes(%q) = %v %v, Detect = %v %v", s, f1, ok1, f2, ok2)
		}
	}
}
