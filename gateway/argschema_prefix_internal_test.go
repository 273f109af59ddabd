package gateway

import (
	"encoding/json"
	"testing"
	"unicode/utf8"
)

// TestAnchoredLiteralPatterns: only a pattern that is a literal anchored
// at the start of the text is matched as a prefix, and the prefix check
// agrees with the pattern itself (and the general validator) on every
// string, the ones whose bytes are not valid UTF-8 included.
func TestAnchoredLiteralPatterns(t *testing.T) {
	cases := []struct {
		pattern, prefix string
		literal         bool
	}{
		{`^ord_`, "ord_", true},
		{`^ord\.x`, "ord.x", true},
		{`^日本`, "日本", true},
		{`^\x{FFFD}`, "\uFFFD", true},
		{`^a`, "a", true},
		{`ord_`, "", false},
		{`^ord_$`, "", false},
		{`^(?i)ord_`, "", false},
		{`^ord.`, "", false},
		{`^ord_+`, "", false},
		{`^(ord|ref)_`, "", false},
		{`^`, "", false},
		{`\Aord_`, "ord_", true},
		{`(?m)^ord_`, "", false},
		{`^ord_|^x`, "", false},
	}
	strs := []string{"", "ord_", "ord_881", "xord_1", "ORD_1", "ord.x", "ordax", "日本語", "\xffabc", "\uFFFDabc", "a", "\nord_", "ord", "ref_1"}
	for _, c := range cases {
		src := `{"type":"object","properties":{"s":{"type":"string","pattern":` + string(mustJSON(t, c.pattern)) + `}}}`
		s, err := compileSchema("t.x", json.RawMessage(src))
		if err != nil {
			t.Fatalf("%s: %v", c.pattern, err)
		}
		sh := compileShape(s)
		if sh == nil {
			t.Fatalf("%s: no shape", c.pattern)
		}
		p := sh.props["s"]
		if p.literalPrefix != c.literal || p.prefix != c.prefix {
			t.Errorf("%s: literal prefix %q (%v), want %q (%v)", c.pattern, p.prefix, p.literalPrefix, c.prefix, c.literal)
		}
		for _, x := range strs {
			args := map[string]any{"s": x}
			if got, re := p.valid(x), p.pattern.MatchString(x); got && !re || c.literal && got != re && utf8.ValidString(x) {
				t.Errorf("%s on %q: shape %v, pattern %v", c.pattern, x, got, re)
			}
			if sh.valid(args) && s.Validate(args) != nil {
				t.Errorf("%s on %q: the shape accepts what the validator refuses", c.pattern, x)
			}
		}
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
