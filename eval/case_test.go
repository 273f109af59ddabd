package eval

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestDecodeCase(t *testing.T) {
	t.Parallel()
	flow3 := string(readTestFile(t, filepath.Join(goldenDir, "flow3-low-value-decided.json")))
	tests := []struct {
		name, doc, field string
	}{
		{"malformed", `{`, ""},
		{"unknown field", `{"packet":"p.json","expect":{"status":"DECIDED"},"expected":{}}`, "expected"},
		{"misspelt expect field", `{"packet":"p.json","expect":{"status":"DECIDED","outcom":"x"}}`, "expect.outcom"},
		{"field in another case", `{"packet":"p.json","expect":{"Status":"DECIDED"}}`, "expect.Status"},
		{"no status", `{"packet":"p.json","expect":{}}`, "expect.status"},
		{"closed status", `{"packet":"p.json","expect":{"status":"CLOSED"}}`, "expect.status"},
		{"unknown status", `{"packet":"p.json","expect":{"status":"DONE"}}`, "expect.status"},
		{"duplicate member", `{"packet":"p.json","packet":"q.json","expect":{"status":"DECIDED"}}`, "packet"},
		{"packet with turns", `{"packet":"p.json","turns":[{}],"expect":{"status":"DECIDED"}}`, "packet"},
		{"packet outside", `{"packet":"../p.json","expect":{"status":"DECIDED"}}`, "packet"},
		{"absolute packet", `{"packet":"/p.json","expect":{"status":"DECIDED"}}`, "packet"},
		{"no request", `{"expect":{"status":"DECIDED"}}`, "request"},
		{"bad clock", `{"packet":"p.json","now":"yesterday","expect":{"status":"DECIDED"}}`, "now"},
		{"short secret", `{"packet":"p.json","secrets":["ab"],"expect":{"status":"DECIDED"}}`, "secrets[0]"},
		{"bad policy outcome", `{"packet":"p.json","expect":{"status":"DECIDED","policy_results":[{"rule_id":"R","outcome":"maybe"}]}}`, "expect.policy_results[0].outcome"},
		{"approval without role", `{"packet":"p.json","approve":[{"gate_id":"G","approver":"u"}],"expect":{"status":"DECIDED"}}`, "approve[0].role"},
		{"unknown plan field", strings.Replace(flow3, `"usage"`, `"usages"`, 1), "turns[0].usages"},
		{"unknown tool result field", strings.Replace(flow3, `"latency_ms"`, `"latency"`, 1), "tools.adp_orders.lookup[0].latency"},
		{"bad tool status", strings.Replace(flow3, `"status": "completed"`, `"status": "done"`, 1), "tools.adp_payments.issue_refund[0].status"},
		{"bad capability id", strings.Replace(flow3, `"adp_orders.lookup": [`, `"lookup": [`, 1), "tools.lookup"},
		{"bad request", strings.Replace(flow3, `"tenant_id": "tenant_acme_prod"`, `"tenant": "tenant_acme_prod"`, 1), "request"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := DecodeCase("golden/x.json", []byte(tc.doc))
			var ce *CaseError
			if !errors.Is(err, ErrCase) || !errors.As(err, &ce) {
				t.Fatalf("DecodeCase = %v, want a *CaseError", err)
			}
			if ce.File != "golden/x.json" || ce.Field != tc.field {
				t.Errorf("CaseError file %q field %q, want %q (%v)", ce.File, ce.Field, tc.field, err)
			}
			if !strings.Contains(err.Error(), "golden/x.json") {
				t.Errorf("error %q does not name the file", err)
			}
		})
	}
	c, err := DecodeCase("dir/flow3-low-value-decided.json", []byte(flow3))
	if err != nil {
		t.Fatal(err)
	}
	if c.Name != "flow3-low-value-decided" || c.Intent != "support.refund" || len(c.Turns) != 2 || len(c.Tools) != 3 {
		t.Errorf("decoded %q intent %q, %d turns, %d tools", c.Name, c.Intent, len(c.Turns), len(c.Tools))
	}
}

func TestLoad(t *testing.T) {
	cases, err := Load(goldenDir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range cases {
		names = append(names, c.Name)
	}
	if !slices.Equal(names, allCases) {
		t.Errorf("Load = %v, want %v (sorted, packets/ not read)", names, allCases)
	}
	// One bad file fails the whole load, naming it.
	dir := t.TempDir()
	for _, n := range []string{"a.json", "c.json"} {
		if err := os.WriteFile(filepath.Join(dir, n), readTestFile(t, filepath.Join(goldenDir, "flow4-replay.json")), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("not a case"), 0o644); err != nil {
		t.Fatal(err)
	}
	if cs, err := Load(dir); err != nil || len(cs) != 2 {
		t.Fatalf("Load = %d cases, %v; want 2 (non-JSON files ignored)", len(cs), err)
	}
	if err := os.WriteFile(filepath.Join(dir, "b.json"), []byte(`{"expect":{"status":"DECIDED"},"packet":"p.json","x":1}`), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = Load(dir)
	var ce *CaseError
	if !errors.As(err, &ce) || ce.File != filepath.Join(dir, "b.json") || ce.Field != "x" {
		t.Errorf("Load with a bad file = %v, want a *CaseError naming b.json and x", err)
	}
	if _, err := Load(filepath.Join(dir, "missing")); err == nil {
		t.Error("Load of a missing directory: no error")
	}
}

func FuzzDecodeCase(f *testing.F) {
	for _, n := range allCases {
		f.Add(readTestFile(f, filepath.Join(goldenDir, n+".json")))
	}
	f.Add([]byte(`{"packet":"p.json","expect":{"status":"DECIDED","outcom":"x"}}`))
	f.Add([]byte(`{"expect":{"status":"DECIDED"},"tools":{"a.b":[{"status":"ok","latency_ms":-1}]}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := DecodeCase("fuzz.json", data)
		if err != nil {
			var ce *CaseError
			if !errors.As(err, &ce) || !errors.Is(err, ErrCase) || ce.File != "fuzz.json" {
				t.Fatalf("error %v is not a *CaseError for the file", err)
			}
			return
		}
		if c.Packet == "" && (c.req == nil || c.rc == nil) {
			t.Fatal("a scripted case decoded without its request or run context")
		}
		if c.Expect.Status == "" {
			t.Fatal("a case decoded without an expected status")
		}
	})
}
