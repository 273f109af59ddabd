package sensitive

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// The encoded detector is held to its reference (encoded_ref_test.go, a
// frozen copy of it before its fast paths): every entry point that reaches
// it, and every piece of it, answers the same for every input.

// refDetect is detect with the reference encoded detector.
func refDetect(k Kind, s string, st *stats, spans []span, first bool) []span {
	if k == Encoded {
		return refFindEncodedDepth(s, st, spans, first, 0)
	}
	return detect(k, s, st, spans, first)
}

// refDetectAll, refRedact and refRedactOnce are Detect, Redact and
// redactOnce over refDetect.
func refDetectAll(s string, set Set) (Finding, bool) {
	if s == "" {
		return Finding{}, false
	}
	st := measure(s)
	for k := Kind(0); k < numKinds; k++ {
		if !set.Has(k) {
			continue
		}
		if sp := refDetect(k, s, &st, nil, true); len(sp) > 0 {
			return Finding{Kind: sp[0].kind, What: sp[0].what}, true
		}
	}
	return Finding{}, false
}

func refRedact(s string, set Set) (string, bool) {
	out, changed := refRedactOnce(s, set)
	if !changed {
		return s, false
	}
	for range maxPasses {
		next, again := refRedactOnce(out, set)
		if !again {
			return out, true
		}
		out = next
	}
	return Redacted, true
}

func refRedactOnce(s string, set Set) (string, bool) {
	if s == "" {
		return s, false
	}
	st := measure(s)
	var spans []span
	for k := Kind(0); k < numKinds; k++ {
		if set.Has(k) {
			spans = refDetect(k, s, &st, spans, false)
		}
	}
	if len(spans) == 0 {
		return s, false
	}
	return replace(s, spans), true
}

func refDetectBytesAll(b []byte, set Set) (Finding, bool) {
	var f Finding
	var ok bool
	refTextViews(b, func(s string) bool {
		f, ok = refDetectAll(s, set)
		return ok
	})
	return f, ok
}

func viewsOf(tv func([]byte, func(string) bool), b []byte) []string {
	var vs []string
	tv(b, func(s string) bool { vs = append(vs, s); return false })
	return vs
}

var equivSets = []Set{All, Secrets, PII, Of(Encoded), Of(Card, Encoded), Of(IBAN, Encoded)}

// checkEncodedEquiv fails t when the detector and its reference differ on
// s, at any level: the spans of the encoded detector (all of them, and the
// first), what Redact and Detect answer, the pieces (decoding, text views,
// binary cards, readable text, the run, block and segment checks), and the
// same on s's own base64 decoding and on s as bytes.
func checkEncodedEquiv(t *testing.T, s string) {
	t.Helper()
	st := measure(s)
	for depth := range maxEncodedDepth + 1 {
		for _, first := range []bool{false, true} {
			got := findEncodedDepth(s, &st, nil, first, depth)
			want := refFindEncodedDepth(s, &st, nil, first, depth)
			if !slices.Equal(got, want) {
				t.Fatalf("findEncodedDepth(%q, first=%v, depth=%d) = %v, reference %v", s, first, depth, got, want)
			}
		}
	}
	for _, set := range equivSets {
		got, gc := Redact(s, set)
		want, wc := refRedact(s, set)
		if got != want || gc != wc {
			t.Fatalf("Redact(%q, %b) = %q %v, reference %q %v", s, set, got, gc, want, wc)
		}
		gf, gok := Detect(s, set)
		wf, wok := refDetectAll(s, set)
		if gf != wf || gok != wok {
			t.Fatalf("Detect(%q, %b) = %v %v, reference %v %v", s, set, gf, gok, wf, wok)
		}
	}
	for depth := range maxEncodedDepth {
		if got, want := encodedSecret(s, depth), refEncodedSecret(s, depth); got != want {
			t.Fatalf("encodedSecret(%q, %d) = %v, reference %v", s, depth, got, want)
		}
		if got, want := runSecret(s, depth), refRunSecret(s, depth); got != want {
			t.Fatalf("runSecret(%q, %d) = %v, reference %v", s, depth, got, want)
		}
		if got, want := segmentSecret(s, depth), refSegmentSecret(s, depth); got != want {
			t.Fatalf("segmentSecret(%q, %d) = %v, reference %v", s, depth, got, want)
		}
		for i := range min(len(s), 3) {
			ge, gok := blockSecret(s, i, depth)
			we, wok := refBlockSecret(s, i, depth)
			if ge != we || gok != wok {
				t.Fatalf("blockSecret(%q, %d, %d) = %d %v, reference %d %v", s, i, depth, ge, gok, we, wok)
			}
		}
	}
	if got, want := anyKind(s, 0), refAnyKind(s, 0); got != want {
		t.Fatalf("anyKind(%q) = %v, reference %v", s, got, want)
	}
	checkBytesEquiv(t, []byte(s))
	for _, textOnly := range []bool{false, true} {
		got, gok := decode(s, nil, textOnly)
		want, wok := refDecode(s, nil, textOnly)
		if !bytes.Equal(got, want) || gok != wok {
			t.Fatalf("decode(%q, %v) = %q %v, reference %q %v", s, textOnly, got, gok, want, wok)
		}
		if !textOnly {
			checkBytesEquiv(t, got)
		}
	}
	got, gok := decodeBase64(s, nil)
	want, wok := refDecodeBase64(s, nil)
	if !bytes.Equal(got, want) || gok != wok {
		t.Fatalf("decodeBase64(%q) = %q %v, reference %q %v", s, got, gok, want, wok)
	}
}

// checkBytesEquiv compares the readings of bytes.
func checkBytesEquiv(t *testing.T, b []byte) {
	t.Helper()
	if got, want := viewsOf(textViews, b), viewsOf(refTextViews, b); !slices.Equal(got, want) {
		t.Fatalf("textViews(%q) = %q, reference %q", b, got, want)
	}
	gd, gok := binaryCard(b)
	wd, wok := refBinaryCard(b)
	if gd != wd || gok != wok {
		t.Fatalf("binaryCard(%q) = %q %v, reference %q %v", b, gd, gok, wd, wok)
	}
	for _, drop := range []bool{false, true} {
		if got, want := readable(b, drop), refReadable(b, drop); got != want {
			t.Fatalf("readable(%q, %v) = %q, reference %q", b, drop, got, want)
		}
	}
	for _, set := range []Set{All, Of(Card)} {
		gf, gok := DetectBytes(b, set)
		wf, wok := refDetectBytesAll(b, set)
		if gf != wf || gok != wok {
			t.Fatalf("DetectBytes(%q, %b) = %v %v, reference %v %v", b, set, gf, gok, wf, wok)
		}
		// The reference's own DetectBytes: its text views, Detect now.
		if wf, wok := refDetectBytes(b, set); gf != wf || gok != wok {
			t.Fatalf("DetectBytes(%q, %b) = %v %v, reference text views %v %v", b, set, gf, gok, wf, wok)
		}
	}
}

func b64Std(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

func hexDigest(r *rand.Rand) string {
	var b [32]byte
	for i := range b {
		b[i] = byte(r.UintN(256))
	}
	d := sha256.Sum256(b[:])
	return hex.EncodeToString(d[:])
}

// luhnDigits returns n digits from alphabet, starting with prefix, whose
// Luhn sum is a multiple of ten (the last digit chosen from alphabet), or
// "" when the last digit would have to be outside it.
func luhnDigits(r *rand.Rand, prefix string, n int, alphabet string) string {
	d := []byte(prefix)
	for len(d) < n-1 {
		d = append(d, alphabet[r.IntN(len(alphabet))])
	}
	for _, c := range []byte(alphabet) {
		if IsCardNumber(string(append(d, c))) {
			return string(append(d, c))
		}
	}
	return ""
}

// hexHidingCard is a lowercase hex string whose base64 decoding (from its
// first character) holds the digits of a card number at every third
// byte, the only place the decoding of hex can hold an ASCII digit: a
// group "xy" + one of "c048" + one of "012345" decodes to two bytes and
// the digit '4'..'9'. The card reader (binaryCard) finds it; so must every
// fast path.
func hexHidingCard(r *rand.Rand) string {
	var card string
	for card == "" {
		card = luhnDigits(r, "4", []int{13, 16, 19}[r.IntN(3)], "456789")
	}
	const hexDigits = "0123456789abcdef"
	var sb strings.Builder
	for _, c := range []byte(card) {
		sb.WriteByte(hexDigits[r.IntN(16)])
		sb.WriteByte(hexDigits[r.IntN(16)])
		sb.WriteByte("c048"[r.IntN(4)])
		sb.WriteByte('0' + c - '4')
	}
	for sb.Len()%4 != 0 || sb.Len() < 64 {
		sb.WriteByte(hexDigits[r.IntN(16)])
	}
	return sb.String()
}

var equivSecrets = []string{
	"4111111111111111", "4111 1111 1111 1111", "5555555555554444", "378282246310005", "card " + visa + " thanks",
	"DE89370400440532013000", ibanDESp, "bob@example.com", "+1 (415) 555-0100", "123-45-6789", "ABCPE1234F", "2345 6789 0124",
	awsKey, ghToken, jwt, "sk-abcdefghijklmnop1234", "password=hunter2", "Bearer abcdef123456", "https://user:pw@example.com/x",
	pemKey, "４１１１１１１１１１１１１１１１", "api_key: k-123456",
}

// equivSeeds are the corpora of the package's tests and the forms a
// secret takes in base64, with hex digests and their near misses.
func equivSeeds() []string {
	r := rand.New(rand.NewPCG(37, 1))
	seeds := slices.Clone(fragments)
	for _, s := range encodedForms() {
		seeds = append(seeds, s, "data: "+s+" end")
	}
	for _, b := range blobs() {
		seeds = append(seeds, string(b), b64Std(b), base64.RawURLEncoding.EncodeToString(b))
	}
	for _, s := range equivSecrets {
		u := utf16LE(s)
		seeds = append(seeds, s, b64Std([]byte(s)), b64Std([]byte("x "+s+" y")), b64Std(u), b64Std(u[2:]),
			base64.RawURLEncoding.EncodeToString([]byte("the value "+s)), b64Std([]byte(b64Std([]byte(s)))),
			b64Std([]byte(b64Std([]byte(b64Std([]byte(s)))))), b64Std([]byte("\x00\xff"+s+"\x1b\x00")))
	}
	seeds = append(seeds,
		"sha256:96bee2696c42a756ce877831d9163298675321875a3aeac4c06dad73fc68301f",
		"order ord_881 delivered on 2024-01-15T10:30:00Z, total 4200 INR, tool_0b867d980caa5473, sha256:96bee2696c42a756ce877831d9163298675321875a3aeac4c06dad73fc68301f",
		"this that with from have been", "ABCD EFGH IJKL MNOP QRST UVWX", "QUJD REVG R0hJ SktM TU5P UFFS",
		strings.Repeat("a4111111111111111", 64), strings.Repeat("1-", 256), b64(b64("password=hunter2")),
		"https://acct.blob.core.windows.net/c/x.pdf?sv=2022-11-02&se=2026-12-08&sp=r&sig=Zm9vYmFyYmF6cXV4MTIzNDU2Nzg5MA%3D",
		"https://b.s3.amazonaws.com/x.pdf?X-Amz-Expires=300&X-Amz-Signature=4f0c2c1d9e8b7a6f5e4d3c2b1a0f9e8d",
		b64Input(600),
	)
	for range 8 {
		d := hexDigest(r)
		seeds = append(seeds, d, strings.ToUpper(d), "sha256:"+d, `{"hash":"`+d+`","prev":"`+hexDigest(r)+`"}`,
			d+hexDigest(r), d[:63], d+"=", d+"==", d+" "+hexDigest(r), hexHidingCard(r), "x"+hexHidingCard(r),
			"digest "+hexHidingCard(r)+" end")
	}
	// The package's saved fuzz inputs.
	files, _ := filepath.Glob("testdata/fuzz/*/*")
	slices.Sort(files)
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for line := range strings.Lines(string(data)) {
			line = strings.TrimSpace(line)
			if v, ok := strings.CutPrefix(line, "string("); ok {
				if u, err := strconv.Unquote(strings.TrimSuffix(v, ")")); err == nil {
					seeds = append(seeds, u)
				}
			}
		}
	}
	return seeds
}

func TestEncodedMatchesReferenceSeeds(t *testing.T) {
	t.Parallel()
	for _, s := range equivSeeds() {
		checkEncodedEquiv(t, s)
	}
}

// The hex strings that hide a card are what the reference finds: the
// generator is right, so the fast paths are tested against it.
func TestHexHidingCardIsFound(t *testing.T) {
	r := rand.New(rand.NewPCG(37, 2))
	for range 50 {
		s := hexHidingCard(r)
		if out, _ := refRedact("digest "+s+" end", All); out != "digest "+Redacted+" end" {
			t.Fatalf("reference Redact of %q = %q", s, out)
		}
		checkEncodedEquiv(t, s)
	}
}

// randomEncoded is a string made of hex digests, base64 of random bytes
// and of secret-bearing text (UTF-8, UTF-16, under binary, nested), in
// both alphabets, padded or not, whitespace-split, glued and mutated.
func randomEncoded(r *rand.Rand) string {
	var sb strings.Builder
	for n := 1 + r.IntN(4); n > 0; n-- {
		var raw []byte
		switch r.IntN(6) {
		case 0:
			raw = make([]byte, r.IntN(80))
			for i := range raw {
				raw[i] = byte(r.UintN(256))
			}
		case 1:
			raw = []byte(equivSecrets[r.IntN(len(equivSecrets))])
		case 2:
			raw = utf16LE("x " + equivSecrets[r.IntN(len(equivSecrets))])
		case 3:
			raw = []byte("\x00\x01" + strings.ReplaceAll(equivSecrets[r.IntN(len(equivSecrets))], " ", "\xa0") + "\xff")
		case 4:
			raw = []byte(randomText(r))
		default:
			raw = []byte(b64Std([]byte(equivSecrets[r.IntN(len(equivSecrets))])))
		}
		var e string
		switch r.IntN(10) {
		case 0, 1, 2:
			e = hexDigest(r)
		case 3:
			e = hexHidingCard(r)
		case 4:
			e = base64.RawURLEncoding.EncodeToString(raw)
		case 5:
			e = strings.Join(groupsOf(b64Std(raw), []int{4, 8, 64, 76}[r.IntN(4)]), []string{" ", "\n", "\r\n", "  "}[r.IntN(4)])
		case 6:
			e = strings.TrimRight(b64Std(raw), "=")
		default:
			e = b64Std(raw)
		}
		if r.IntN(4) == 0 && len(e) > 0 { // mutate a character
			b := []byte(e)
			b[r.IntN(len(b))] = "aZ09+/-_= \n.:\x00\xff"[r.IntN(15)]
			e = string(b)
		}
		sb.WriteString([]string{"", " ", "sha256:", "/", "-", "_", "x", "=", `","h":"`, "\n", "abc"}[r.IntN(11)])
		sb.WriteString(e)
	}
	return sb.String()
}

func TestEncodedMatchesReferenceRandom(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(37, 3))
	n := 4000
	if testing.Short() {
		n = 500
	}
	for range n {
		checkEncodedEquiv(t, randomEncoded(r))
	}
	// Random bytes read as bytes: the card reader and the text views.
	for range n {
		b := make([]byte, r.IntN(120))
		for i := range b {
			switch r.IntN(4) {
			case 0:
				b[i] = '0' + byte(r.IntN(10))
			case 1:
				b[i] = []byte{0, 0xff, 0xef, 0xbc, 0x90, 0x10, 0xa0, 0x1b}[r.IntN(8)]
			default:
				b[i] = byte(r.UintN(256))
			}
		}
		checkBytesEquiv(t, b)
	}
}

// FuzzEncodedMatchesReference: the encoded detector, and every entry point
// through it, answers as its reference for any input.
func FuzzEncodedMatchesReference(f *testing.F) {
	for _, s := range equivSeeds() {
		f.Add(s)
	}
	for _, s := range encodedEdges() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if len(s) > 4096 {
			return
		}
		checkEncodedEquiv(t, s)
	})
}

// The per-byte tables answer as the tests they replace, for every byte.
func TestEncodedByteTablesMatchReference(t *testing.T) {
	for c := range 256 {
		b := byte(c)
		gv, gok := b64val(b)
		wv, wok := refB64val(b)
		if gok != wok || gok && gv != wv || isB64(b) != refIsB64(b) || textByte(b) != refTextByte(b) || isSpace(b) != refIsSpace(b) {
			t.Errorf("byte %#x: b64val %d %v, isB64 %v, textByte %v; reference %d %v, %v, %v", b, gv, gok, isB64(b), textByte(b), wv, wok, refIsB64(b), refTextByte(b))
		}
	}
}

// printableAt answers as utf8.DecodeRune and unicode.IsPrint, for every
// lead and second byte, alone, followed by every continuation byte, and
// for random tails.
func TestPrintableAtMatchesDecodeRune(t *testing.T) {
	want := func(b []byte) int {
		if r, n := utf8.DecodeRune(b); r != utf8.RuneError && unicode.IsPrint(r) {
			return n
		}
		return 0
	}
	check := func(b []byte) {
		if got, w := printableAt(b, 0), want(b); got != w {
			t.Fatalf("printableAt(%q) = %d, DecodeRune and IsPrint %d", b, got, w)
		}
	}
	r := rand.New(rand.NewPCG(37, 4))
	for c0 := 0x80; c0 < 0x100; c0++ {
		check([]byte{byte(c0)})
		for c1 := range 0x100 {
			check([]byte{byte(c0), byte(c1)})
			for c2 := 0x80; c2 < 0xC0; c2++ {
				check([]byte{byte(c0), byte(c1), byte(c2)})
				check([]byte{byte(c0), byte(c1), byte(c2), 0x80 + byte(r.IntN(0x40))})
				check([]byte{byte(c0), byte(c1), byte(c2), byte(r.UintN(256)), byte(r.UintN(256))})
			}
			check([]byte{byte(c0), byte(c1), byte(r.UintN(256)), byte(r.UintN(256))})
		}
	}
}
