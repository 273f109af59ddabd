package canon

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/contextos/contextos/internal/fixture"
)

var update = flag.Bool("update", false, "rewrite golden files in testdata/")

// RFC 8785 §3.2.2: the example of a canonicalized document.
func TestJSONRFC8785Example(t *testing.T) {
	in := `{
  "numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],
  "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
  "literals": [null, true, false]
}`
	want := `{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":"€$\u000f\nA'B\"\\\\\"/"}`
	got, err := JSON(json.RawMessage(in))
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Errorf("JSON(rfc example) =\n%s\nwant\n%s", got, want)
	}
}

// RFC 8785 §3.2.3: members sort by their UTF-16 code units, so U+1F600
// (D83D DE00) sorts before U+FB33.
func TestJSONKeyOrderUTF16(t *testing.T) {
	in := `{"\u20ac":"Euro Sign","\r":"Carriage Return","\ufb33":"Hebrew Letter Dalet With Dagesh","1":"One","\ud83d\ude00":"Emoji: Grinning Face","\u0080":"Control","\u00f6":"Latin Small Letter O With Diaeresis"}`
	got, err := JSON([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	var order []string
	dec := json.NewDecoder(strings.NewReader(string(got)))
	dec.Token()
	for dec.More() {
		k, _ := dec.Token()
		order = append(order, k.(string))
		dec.Token()
	}
	want := []string{"\r", "1", "\u0080", "\u00f6", "\u20ac", "\U0001F600", "\ufb33"}
	if strings.Join(order, "|") != strings.Join(want, "|") {
		t.Errorf("key order = %q, want %q", order, want)
	}
}

// RFC 8785 Appendix B: IEEE-754 doubles and their canonical text.
func TestJSONNumberFormatting(t *testing.T) {
	tests := []struct {
		bits uint64
		want string
	}{
		{0x0000000000000000, "0"},
		{0x8000000000000000, "0"},
		{0x0000000000000001, "5e-324"},
		{0x8000000000000001, "-5e-324"},
		{0x7fefffffffffffff, "1.7976931348623157e+308"},
		{0xffefffffffffffff, "-1.7976931348623157e+308"},
		{0x4340000000000000, "9007199254740992"},
		{0xc340000000000000, "-9007199254740992"},
		{0x4430000000000000, "295147905179352830000"},
		{0x44b52d02c7e14af5, "9.999999999999997e+22"},
		{0x44b52d02c7e14af6, "1e+23"},
		{0x44b52d02c7e14af7, "1.0000000000000001e+23"},
		{0x444b1ae4d6e2ef4e, "999999999999999700000"},
		{0x444b1ae4d6e2ef4f, "999999999999999900000"},
		{0x444b1ae4d6e2ef50, "1e+21"},
		{0x3eb0c6f7a0b5ed8c, "9.999999999999997e-7"},
		{0x3eb0c6f7a0b5ed8d, "0.000001"},
		{0x41b3de4355555553, "333333333.3333332"},
		{0x41b3de4355555554, "333333333.33333325"},
		{0x41b3de4355555555, "333333333.3333333"},
		{0x41b3de4355555556, "333333333.3333334"},
		{0x41b3de4355555557, "333333333.33333343"},
		{0xbecbf647612f3696, "-0.0000033333333333333333"},
		{0x43143ff3c1cb0959, "1424953923781206.2"},
	}
	for _, tc := range tests {
		f := math.Float64frombits(tc.bits)
		got, err := JSON([]float64{f})
		if err != nil {
			t.Errorf("JSON(%#x) error: %v", tc.bits, err)
			continue
		}
		if want := "[" + tc.want + "]"; string(got) != want {
			t.Errorf("JSON(%#x) = %s, want %s", tc.bits, got, want)
		}
	}
}

func TestJSONRefusesNonFinite(t *testing.T) {
	for _, f := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		if _, err := JSON(f); !errors.Is(err, ErrNotCanonicalizable) {
			t.Errorf("JSON(%v) error = %v, want ErrNotCanonicalizable", f, err)
		}
	}
	for _, raw := range []string{``, `{`, `{"a":1,}`, `[1 2]`, `"\ud800"x`, `1e400`} {
		if _, err := JSON(json.RawMessage(raw)); !errors.Is(err, ErrNotCanonicalizable) {
			t.Errorf("JSON(%q) error = %v, want ErrNotCanonicalizable", raw, err)
		}
	}
}

func TestJSONStringEscaping(t *testing.T) {
	tests := []struct{ in, want string }{
		{`"<a>&"`, `"<a>&"`},             // no HTML escaping in canonical form
		{`"\u00e9"`, `"é"`},              // non-ASCII written as UTF-8
		{`"\u001f"`, `"\u001f"`},         // control characters as \u00xx
		{`"\b\f\n\r\t"`, `"\b\f\n\r\t"`}, // short escapes
		{`"\u2028"`, "\"\u2028\""},       // not escaped by JCS
		{`"\/"`, `"/"`},                  // solidus unescaped
	}
	for _, tc := range tests {
		got, err := JSON(json.RawMessage(tc.in))
		if err != nil {
			t.Fatalf("JSON(%s): %v", tc.in, err)
		}
		if string(got) != tc.want {
			t.Errorf("JSON(%s) = %s, want %s", tc.in, got, tc.want)
		}
	}
	// A Go string with HTML characters marshals with \u003c escapes; the
	// canonical form must not depend on that.
	got, err := JSON(map[string]string{"k": "<a>&"})
	if err != nil || string(got) != `{"k":"<a>&"}` {
		t.Errorf("JSON(go map with html) = %s, %v", got, err)
	}
}

// Maps built in different orders canonicalize and hash identically.
func TestDigestIndependentOfMapOrder(t *testing.T) {
	keys := []string{"zeta", "alpha", "é", "Beta", "10", "2", "\U0001F600", "\ufb33"}
	var digests []string
	for rot := range keys {
		m := map[string]any{}
		nested := map[string]any{}
		for i := range keys {
			k := keys[(i+rot)%len(keys)] // a different insertion order per rotation
			m[k] = len(k)                // value depends on the key only
			nested[k] = []any{k, len(k)}
		}
		m["nested"] = nested
		d, err := Digest(m)
		if err != nil {
			t.Fatal(err)
		}
		digests = append(digests, d)
	}
	for i := 1; i < len(digests); i++ {
		if digests[i] != digests[0] {
			t.Fatalf("digest differs with insertion order: %s vs %s", digests[i], digests[0])
		}
	}
	// Go value and the equivalent raw JSON in another key order agree.
	type doc struct {
		B int    `json:"b"`
		A string `json:"a"`
	}
	d1, _ := Digest(doc{B: 1, A: "x"})
	d2, _ := Digest(json.RawMessage(`{ "a" : "x", "b" : 1.0 }`))
	if d1 != d2 {
		t.Errorf("Digest(struct) = %s, Digest(raw) = %s", d1, d2)
	}
}

func TestDigestFormat(t *testing.T) {
	d, err := Digest(map[string]int{"a": 1})
	if err != nil {
		t.Fatal(err)
	}
	// sha256 of `{"a":1}`
	const want = "sha256:015abd7f5cc57a2dd94b7590f04ad8084273905ee33ec5cebeae62276a97f862"
	if d != want {
		t.Errorf("Digest = %s, want %s", d, want)
	}
	if !IsDigest(d) {
		t.Errorf("IsDigest(%s) = false", d)
	}
	for _, bad := range []string{"", "sha256:", "sha256:ABC", "md5:" + strings.Repeat("a", 64), "sha256:" + strings.Repeat("A", 64), "sha256:" + strings.Repeat("a", 63)} {
		if IsDigest(bad) {
			t.Errorf("IsDigest(%q) = true", bad)
		}
	}
}

func TestDigestExcluding(t *testing.T) {
	doc := json.RawMessage(`{"context_ledger":{"compiled_context_hash":"sha256:x","pack_ref":"p@1.0.0"},"b":2.50,"a":[1]}`)
	got, err := JSONExcluding(doc, []string{"context_ledger", "compiled_context_hash"}, []string{"missing", "deeper"}, []string{"a", "not_object"})
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"a":[1],"b":2.5,"context_ledger":{"pack_ref":"p@1.0.0"}}`
	if string(got) != want {
		t.Errorf("JSONExcluding = %s, want %s", got, want)
	}
	d1, _ := DigestExcluding(doc, []string{"context_ledger", "compiled_context_hash"})
	d2, _ := Digest(json.RawMessage(want))
	if d1 != d2 {
		t.Errorf("DigestExcluding = %s, want %s", d1, d2)
	}
	// Changing the excluded field leaves the digest alone; changing any other field changes it.
	d3, _ := DigestExcluding(json.RawMessage(`{"context_ledger":{"compiled_context_hash":"sha256:y","pack_ref":"p@1.0.0"},"b":2.5,"a":[1]}`), []string{"context_ledger", "compiled_context_hash"})
	d4, _ := DigestExcluding(json.RawMessage(`{"context_ledger":{"compiled_context_hash":"sha256:x","pack_ref":"p@1.0.1"},"b":2.5,"a":[1]}`), []string{"context_ledger", "compiled_context_hash"})
	if d3 != d1 || d4 == d1 {
		t.Errorf("excluded field changed digest (%v) or included field did not (%v)", d3 != d1, d4 == d1)
	}
	if _, err := JSONExcluding(json.RawMessage(`{} {}`), []string{"a"}); !errors.Is(err, ErrNotCanonicalizable) {
		t.Errorf("trailing data: err = %v", err)
	}
}

func TestID(t *testing.T) {
	a, err := ID(PrefixPolicy, "run_1", "BUNDLE", "R_1", "sha256:00")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := ID(PrefixPolicy, "run_1", "BUNDLE", "R_1", "sha256:00")
	c, _ := ID(PrefixPolicy, "run_2", "BUNDLE", "R_1", "sha256:00")
	d, _ := ID(PrefixToolCall, "run_1", "BUNDLE", "R_1", "sha256:00")
	// ["a","b"] and ["ab"] must not collide (parts are a JSON array).
	e, _ := ID(PrefixPolicy, "ab")
	f, _ := ID(PrefixPolicy, "a", "b")
	if a != b {
		t.Errorf("ID not deterministic: %s vs %s", a, b)
	}
	if a == c || a[4:] == d[5:] || e == f {
		t.Errorf("ID collisions: %s %s %s %s %s", a, c, d, e, f)
	}
	if !HasPrefix(a, "pol") || len(a) != len("pol_")+16 || !IsLowerHex(a[4:], 16) {
		t.Errorf("ID = %q, want pol_<16 hex>", a)
	}
	for _, p := range []string{"", "a_b", "a b"} {
		if _, err := ID(p, 1); err == nil {
			t.Errorf("ID(%q) accepted a bad prefix", p)
		}
	}
	if _, err := ID(PrefixRun, math.NaN()); !errors.Is(err, ErrNotCanonicalizable) {
		t.Errorf("ID(NaN) err = %v", err)
	}
	if HasPrefix("pol_", "pol") || HasPrefix("polx_1", "pol") || !HasPrefix("dr_x", "dr") {
		t.Error("HasPrefix wrong")
	}
}

// TestIDOf holds the typed parts to ID's: the same parts give the same id,
// so a hot path may use either.
func TestIDOf(t *testing.T) {
	raw, err := JSON(map[string]any{"order_id": "ord_881", "amount": 4200, "note": "caf\u00e9 \"q\""})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		any   []any
		typed []Part
	}{
		{[]any{"run_1", 3, "adp_orders.lookup", Raw(raw)}, []Part{StringPart("run_1"), IntPart(3), StringPart("adp_orders.lookup"), RawPart(raw)}},
		{[]any{"é\x00\"", -7, MaxSafeInteger}, []Part{StringPart("é\x00\""), IntPart(-7), IntPart(MaxSafeInteger)}},
		{[]any{"bad \xff utf8"}, []Part{StringPart("bad \xff utf8")}},
		{nil, nil},
	} {
		want, err := ID(PrefixToolCall, c.any...)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := IDOf(PrefixToolCall, c.typed...); err != nil || got != want {
			t.Errorf("IDOf(%v) = %q, %v; ID gives %q", c.any, got, err, want)
		}
		if got, err := AppendIDOf([]byte("tool:x:"), PrefixToolCall, c.typed...); err != nil || string(got) != "tool:x:"+want {
			t.Errorf("AppendIDOf(%v) = %q, %v; want the id after what was there", c.any, got, err)
		}
		// A string part given as bytes is the same part.
		asBytes := slices.Clone(c.typed)
		for i, p := range asBytes {
			if p.kind == partString {
				asBytes[i] = BytesPart([]byte(p.s))
			}
		}
		if got, err := IDOf(PrefixToolCall, asBytes...); err != nil || got != want {
			t.Errorf("IDOf(%v as bytes) = %q, %v; ID gives %q", c.any, got, err, want)
		}
	}
	// The bytes may be the buffer the id is appended to.
	buf := append(make([]byte, 0, 128), "sha256:"+strings.Repeat("ab", 32)...)
	n := len(buf)
	got, err := AppendIDOf(buf, PrefixPolicy, StringPart("run_1"), BytesPart(buf[:n]))
	if want, _ := ID(PrefixPolicy, "run_1", string(buf[:n])); err != nil || string(got[n:]) != want || string(got[:n]) != string(buf[:n]) {
		t.Errorf("AppendIDOf over its own buffer = %q, %v; want the digest then %q", got, err, want)
	}
	if b, err := AppendIDOf([]byte("kept"), "a_b"); err == nil || b != nil {
		t.Errorf("AppendIDOf with a bad prefix = %q, %v", b, err)
	}
	if _, err := IDOf(PrefixToolCall, RawPart(nil)); !errors.Is(err, ErrNotCanonicalizable) {
		t.Errorf("IDOf(empty Raw) err = %v", err)
	}
	if _, err := IDOf("a_b", IntPart(1)); err == nil {
		t.Error("IDOf accepted a bad prefix")
	}
	// Two integers beyond 2^53 that round to one double would be one id.
	for _, n := range []int{1 << 53, 1<<53 + 1} {
		if _, err := ID(PrefixToolCall, "run_1", n); !errors.Is(err, ErrUnsafeInteger) {
			t.Errorf("ID(%d) err = %v, want ErrUnsafeInteger", n, err)
		}
		if _, err := IDOf(PrefixToolCall, StringPart("run_1"), IntPart(n)); !errors.Is(err, ErrUnsafeInteger) {
			t.Errorf("IDOf(%d) err = %v, want ErrUnsafeInteger", n, err)
		}
	}
}

// The golden vectors pin the canonical form and digest of a representative
// document, the shared support RunContext (internal/fixture): a change to
// canonicalization is a wire change and shows here. (So does an edit of
// that fixture; rewrite the golden with -update then.)
func TestGoldenVectors(t *testing.T) {
	c, err := JSON(json.RawMessage(fixture.RunContext()))
	if err != nil {
		t.Fatal(err)
	}
	d := DigestBytes(c)
	got := string(c) + "\n" + d + "\n"
	golden := filepath.Join("testdata", "vector.golden")
	if *update {
		if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Errorf("canonical form drifted:\n got %s\nwant %s", got, want)
	}
}

// appendHex writes what encoding/hex writes, for every byte value.
func TestAppendHex(t *testing.T) {
	b := make([]byte, 256)
	for i := range b {
		b[i] = byte(i)
	}
	if got, want := string(appendHex([]byte("x"), b)), "x"+hex.EncodeToString(b); got != want {
		t.Errorf("appendHex = %s, want %s", got, want)
	}
}

// An id written in pieces (AppendIDHead, the parts as canonical strings,
// AppendIDSum) is the id IDOf derives from the same strings, whatever the
// strings hold (quotes, control characters, non-ASCII, invalid UTF-8).
func TestAppendIDHeadAndSum(t *testing.T) {
	cases := [][]string{
		{},
		{"run_1"},
		{"run_a1b2c3d4e5f60718", "POLICY_RETURNS_V4", "R_REFUND_REQUIRES_IDV", "sha256:" + strings.Repeat("0f", 32)},
		{"a\"b\\c", "\x01\n", "é😀", "bad\xffutf8", ""},
	}
	for _, parts := range cases {
		typed := make([]Part, len(parts))
		for i, s := range parts {
			typed[i] = StringPart(s)
		}
		want, err := IDOf(PrefixPolicy, typed...)
		if err != nil {
			t.Fatal(err)
		}
		in, err := AppendIDHead(nil, PrefixPolicy)
		if err != nil {
			t.Fatal(err)
		}
		for i, s := range parts {
			if i > 0 {
				in = append(in, ',')
			}
			in = AppendString(in, s)
		}
		in = append(in, ']')
		if got := string(AppendIDSum([]byte("kept:"), PrefixPolicy, in)); got != "kept:"+want {
			t.Errorf("%q: pieces give %q, IDOf %q", parts, got, want)
		}
	}
	if b, err := AppendIDHead([]byte("kept"), "a_b"); err == nil || b != nil {
		t.Errorf("AppendIDHead with a bad prefix = %q, %v", b, err)
	}
}
