package gateway

import (
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/contextos/contextos/internal/jsonv"
	"github.com/contextos/contextos/internal/sensitive"
	"github.com/google/go-cmp/cmp"
)

// Every built-in rule is known by identity, with the kinds its name
// stands for; a host's rule, a closure around a built-in one and a
// list holding either are not, so they take the general redaction.
func TestBuiltinSetKnowsTheBuiltins(t *testing.T) {
	t.Parallel()
	b := BuiltinRedactors()
	if len(b) != len(sensitive.RuleNames()) {
		t.Fatalf("BuiltinRedactors has %d rules, the catalogue %d", len(b), len(sensitive.RuleNames()))
	}
	for name, r := range b {
		want, _ := sensitive.Rule(name)
		got, ok := builtinSet(r)
		if !ok || got != want {
			t.Errorf("builtinSet(%s) = %v, %v; want %v, true", name, got, ok, want)
		}
	}
	host, err := RegexpRedactor(`\d{3}`)
	if err != nil {
		t.Fatal(err)
	}
	email := b["email"]
	wrapped := Redactor(func(s string) (string, bool) { return email(s) })
	for _, r := range []Redactor{host, wrapped, nil} {
		if _, ok := builtinSet(r); ok {
			t.Error("builtinSet knows a rule that is not a built-in one")
		}
	}
	if _, ok := cleanSet([]Redactor{redactSecrets, email, host}); ok {
		t.Error("cleanSet of a list with a host rule is known")
	}
	if _, ok := cleanSet(nil); ok {
		t.Error("cleanSet of no rules is known")
	}
	if set, ok := cleanSet([]Redactor{redactSecrets, email}); !ok || set != sensitive.Secrets|sensitive.Of(sensitive.Email, sensitive.Encoded) {
		t.Errorf("cleanSet(secret, email) = %v, %v", set, ok)
	}
}

// cleanPieces are mostly ordinary text, with some of what the detectors
// find, secret-named keys and numbers on both sides of 1e9.
var cleanPieces = []string{"ok", "ord_881", "m:1", "refund issued", "12.50", "x", "status", "REDACTED", "order 42", "tool:adp.lookup:tool_1f",
	"sha256:96bee2696c42a756ce877831d9163298675321875a3aeac4c06dad73fc68301f", "é ü", "a=b", "id-9", "",
	"4111111111111111", "bob@example.com", "password", "password=hunter2", "Bearer abcdef123456", "+1 415 555 0100", "123-45-6789",
	"ABCPE1234F", "DE89 3704 0044 0532 0130 00", "token", Redacted, "QWxhZGRpbjpvcGVuIHNlc2FtZQ=="}

func cleanishValue(r *rand.Rand, depth int) any {
	str := func() string {
		// Ordinary pieces four times out of five.
		if r.IntN(5) > 0 {
			return cleanPieces[r.IntN(15)]
		}
		var b strings.Builder
		for n := r.IntN(2); n >= 0; n-- {
			b.WriteString(cleanPieces[r.IntN(len(cleanPieces))])
			b.WriteByte(' ')
		}
		return b.String()
	}
	switch k := r.IntN(8); {
	case depth > 2 || k <= 1:
		return str()
	case k == 2:
		return []any{nil, true, 12.5, 999999999.0, 1e9, -4111111111111111.0, float64(r.IntN(1000)), json.Number("7"), 3}[r.IntN(9)]
	case k == 3:
		out := []any{}
		if r.IntN(6) == 0 {
			out = nil
		}
		for n := r.IntN(4); n > 0; n-- {
			out = append(out, cleanishValue(r, depth+1))
		}
		return out
	default:
		out := map[string]any{}
		if r.IntN(8) == 0 {
			return map[string]any(nil)
		}
		for n := r.IntN(5); n > 0; n-- {
			out[str()] = cleanishValue(r, depth+1)
		}
		return out
	}
}

// redactOutcome with the clean set known returns exactly what applying
// the rules one by one returns (output, lists, whether anything changed)
// for every list of built-in rules, and a copy that shares nothing with
// the adapter's outcome.
func TestRedactOutcomeCleanMatchesRules(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(37, 5))
	b := BuiltinRedactors()
	lists := [][]Redactor{
		{redactSecrets},
		{redactSecrets, b["credit_card"], b["email"]},
		{redactSecrets, b["pan"], b["iban"], b["phone"], b["ssn"], b["email"], b["credit_card"]},
	}
	strs := func() []string {
		if r.IntN(4) == 0 {
			return nil
		}
		var out []string
		for n := r.IntN(4); n > 0; n-- {
			out = append(out, cleanPieces[r.IntN(len(cleanPieces))])
		}
		if out == nil {
			out = []string{}
		}
		return out
	}
	fast := 0
	for i := range 6000 {
		rules := lists[i%len(lists)]
		set, known := cleanSet(rules)
		if !known {
			t.Fatal("a list of built-in rules has no clean set")
		}
		out := &Outcome{Mutations: strs(), Artifacts: strs(), RiskTags: strs(), Signals: strs(), CostCents: 3, Tokens: 7}
		out.Output, _ = cleanishValue(r, 1).(map[string]any)
		if r.IntN(2) == 0 {
			out.Output = map[string]any{"ok": true, "n": 12.5, "items": []any{"a", "b"}}
		}
		for _, ref := range strs() {
			out.Citations = append(out.Citations, Citation{EvidenceRef: ref})
		}
		before, _ := json.Marshal(out)
		var slow, quick takenOutcome
		wantChanged := redactOutcome(&slow, out, rules, 0, false)
		gotChanged, flat := redactOutcomeFlat(&quick, out, rules, set, true)
		checkFlatReport(t, out, set, flat, quick.out.Output)
		if cleanOutcome(out, set) {
			fast++
		}
		if gotChanged != wantChanged {
			t.Fatalf("outcome %s: changed = %v with the clean set, %v rule by rule", before, gotChanged, wantChanged)
		}
		if diff := cmp.Diff(slow.out, quick.out); diff != "" {
			t.Fatalf("outcome %s: redacted copies differ (-rule by rule +clean set):\n%s", before, diff)
		}
		// The copy is the gateway's own: changing it leaves the adapter's
		// outcome as it was.
		if quick.out.Output != nil {
			quick.out.Output["added"] = "x"
			for _, e := range quick.out.Output {
				if m, ok := e.(map[string]any); ok {
					m["added"] = "x"
				}
			}
		}
		for _, l := range [][]string{quick.out.Mutations, quick.out.Artifacts, quick.out.RiskTags, quick.out.Signals} {
			for j := range l {
				l[j] = "changed"
			}
		}
		for j := range quick.out.Citations {
			quick.out.Citations[j].EvidenceRef = "changed"
		}
		if after, _ := json.Marshal(out); string(after) != string(before) {
			t.Fatalf("changing the redacted copy changed the adapter's outcome:\n%s\n%s", before, after)
		}
	}
	if fast < 1000 {
		t.Fatalf("only %d of 6000 outcomes took the clean path: the test does not exercise it", fast)
	}
}

// FuzzRedactOutcomeClean: for any JSON output and list of strings, the
// clean path and the rules applied one by one give the same copy.
func FuzzRedactOutcomeClean(f *testing.F) {
	f.Add([]byte(`{"ok":true,"items":["a","b"],"n":12.5}`), "m:1")
	f.Add([]byte(`{"note":"card 4111 1111 1111 1111","password":"x"}`), "bob@example.com")
	f.Add([]byte(`{"n":4111111111111111,"k":{"v":[1,"QWxhZGRpbjpvcGVuIHNlc2FtZQ=="]}}`), "Bearer abcdef123456")
	b := BuiltinRedactors()
	rules := []Redactor{redactSecrets, b["pan"], b["iban"], b["phone"], b["ssn"], b["email"], b["credit_card"]}
	set, _ := cleanSet(rules)
	f.Fuzz(func(t *testing.T, data []byte, s string) {
		var v map[string]any
		if json.Unmarshal(data, &v) != nil {
			return
		}
		out := &Outcome{Output: v, Mutations: []string{s}, Citations: []Citation{{EvidenceRef: s}}}
		var slow, quick takenOutcome
		wantChanged := redactOutcome(&slow, out, rules, 0, false)
		gotChanged, flat := redactOutcomeFlat(&quick, out, rules, set, true)
		checkFlatReport(t, out, set, flat, quick.out.Output)
		if gotChanged != wantChanged {
			t.Fatalf("changed = %v with the clean set, %v rule by rule", gotChanged, wantChanged)
		}
		if diff := cmp.Diff(slow.out, quick.out); diff != "" {
			t.Fatalf("redacted copies differ (-rule by rule +clean set):\n%s", diff)
		}
	})
}

// FuzzRedactOutcomeCleanRules is FuzzRedactOutcomeClean over any list of
// built-in rules (mask picks them, the secret rule included or not, a
// rule repeated), outputs decoded with json.Number or not, and typed
// values (int, []string, map[string]string) the clean check leaves to
// the general redaction.
func FuzzRedactOutcomeCleanRules(f *testing.F) {
	f.Add([]byte(`{"ok":true,"items":["a","b"],"n":12.5}`), "m:1", uint16(1), false)
	f.Add([]byte(`{"password":null,"api_key":"","n":999999999}`), "１２３-４５-６７８９", uint16(0x40), true)
	f.Add([]byte(`{"n":123456789,"k":{"v":[1,"QWxhZGRpbjpvcGVuIHNlc2FtZQ=="]}}`), "bob%40example.com", uint16(0x1fe), false)
	f.Add([]byte(`{"x":"4111%201111%201111%201111"}`), "+1\u00a0415\u00a0555\u00a00100", uint16(0x20), true)
	b := BuiltinRedactors()
	names := sensitive.RuleNames()
	f.Fuzz(func(t *testing.T, data []byte, s string, mask uint16, useNumber bool) {
		var v map[string]any
		dec := json.NewDecoder(strings.NewReader(string(data)))
		if useNumber {
			dec.UseNumber()
		}
		if dec.Decode(&v) != nil {
			return
		}
		var rules []Redactor
		for i := range 2 * len(names) {
			if mask&(1<<i) != 0 {
				rules = append(rules, b[names[i%len(names)]])
			}
		}
		set, known := cleanSet(rules)
		if !known {
			return
		}
		if v != nil && mask&0x8000 != 0 {
			v["typed"] = map[string]any{"i": len(s), "l": []string{s}, "m": map[string]string{s: s}}
		}
		out := &Outcome{Output: v, Mutations: []string{s}, Signals: []string{s, s}, Citations: []Citation{{EvidenceRef: s}}}
		var slow, quick takenOutcome
		wantChanged := redactOutcome(&slow, out, rules, 0, false)
		gotChanged, flat := redactOutcomeFlat(&quick, out, rules, set, true)
		checkFlatReport(t, out, set, flat, quick.out.Output)
		if gotChanged != wantChanged {
			t.Fatalf("changed = %v with the clean set, %v rule by rule", gotChanged, wantChanged)
		}
		if diff := cmp.Diff(slow.out, quick.out); diff != "" {
			t.Fatalf("redacted copies differ (-rule by rule +clean set):\n%s", diff)
		}
		sb, _ := json.Marshal(slow.out)
		qb, _ := json.Marshal(quick.out)
		if string(sb) != string(qb) {
			t.Fatalf("bytes differ:\n%s\n%s", sb, qb)
		}
	})
}

// checkFlatReport holds redactOutcomeFlat's report to what it says: the
// outcome is clean and its output a non-nil object of JSON scalars only
// (jsonv.Flat), which its copy then is too (a copy of the map is a deep
// copy, so the gateway copies it again without looking).
func checkFlatReport(t *testing.T, out *Outcome, set sensitive.Set, flat bool, copied map[string]any) {
	t.Helper()
	want := cleanOutcome(out, set) && out.Output != nil && jsonv.Flat(out.Output)
	if flat != want {
		t.Fatalf("output %v: redactOutcomeFlat reports flat = %v, want %v", out.Output, flat, want)
	}
	if flat && !jsonv.Flat(copied) {
		t.Fatalf("output %v: reported flat, but its copy %v is not", out.Output, copied)
	}
}
