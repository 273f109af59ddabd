package server

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/internal/sortedkeys"
)

// The service's merged, remembered rules redact as the built-in rules
// one by one do (gateway.RedactValue with every rule), twice in a row
// (the second time from the memo); a host rule of a built-in name
// replaces it, and without the secret rule secret-named members are left.
func TestRedactionMatchesEveryRule(t *testing.T) {
	values := []string{
		`{"note": "refund to card 4111111111111111", "email": "a.b@example.com", "n": 4111111111111111}`,
		`{"iban": "GB82 WEST 1234 5698 7654 32", "phone": "+14155552671", "ssn": "123-45-6789", "pan": "ABCDE1234F"}`,
		`{"db_password": "hunter2", "api_key": 12345, "auth": "Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJlc2lnbmF0dXJl"}`,
		`{"wrapped": "NDExMTExMTExMTExMTExMQ==", "hash": "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"}`,
		`{"4111111111111111": "key is a card", "list": ["x", {"token": "t"}, "user@example.org"], "clean": "nothing here"}`,
	}
	builtin := gateway.BuiltinRedactors()
	var all []gateway.Redactor
	for _, name := range sortedkeys.Of(builtin) {
		all = append(all, builtin[name])
	}
	rd := newRedaction(nil)
	for _, s := range values {
		var v any
		if err := json.Unmarshal([]byte(s), &v); err != nil {
			t.Fatal(err)
		}
		want, wantChanged := gateway.RedactValue(v, all)
		for round := range 2 {
			got, changed := rd.value(v)
			if changed != wantChanged {
				t.Errorf("round %d of %s: changed %v, want %v", round, s, changed, wantChanged)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("round %d of %s (-every rule +service):\n%s", round, s, diff)
			}
		}
	}

	keep := func(s string) (string, bool) { return s, false }
	host := newRedaction(map[string]gateway.Redactor{"email": keep, "secret": keep,
		"custom": func(s string) (string, bool) {
			return strings.ReplaceAll(s, "ACME", "[REDACTED]"), strings.Contains(s, "ACME")
		}})
	got, _ := host.value(map[string]any{"email": "a.b@example.com", "db_password": "hunter2", "card": "4111111111111111", "org": "ACME corp"})
	want := map[string]any{"email": "a.b@example.com", "db_password": "hunter2", "card": "[REDACTED]", "org": "[REDACTED] corp"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("host rules (-want +got):\n%s", diff)
	}
}

// FuzzRedactionClean: a document clean says redaction leaves alone is
// one value does not change.
func FuzzRedactionClean(f *testing.F) {
	for _, s := range []string{`{"a":"4111111111111111"}`, `{"n":12345678901.5}`, `{"n":1e19}`, `{"n":-4111111111111111}`, `{"ok":"x","m":[1,2.5,true,null]}`,
		`{"api_key":""}`, `{"note":"\u0034111111111111111"}`, `{"k\u0065y":"v"}`, `{"db_password":0}`, `["a.b@example.com"]`, `{"x":"sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"}`} {
		f.Add([]byte(s))
	}
	rd := newRedaction(nil)
	f.Fuzz(func(t *testing.T, b []byte) {
		var v any
		if json.Unmarshal(b, &v) != nil {
			return
		}
		if !rd.clean(b) {
			return
		}
		if _, changed := rd.value(v); changed {
			t.Fatalf("clean says %s needs no redaction; value redacts it", b)
		}
	})
}

// writeView writes what json.Marshal writes of a view.
func TestWriteViewIsMarshal(t *testing.T) {
	for _, v := range []*runView{
		{RunID: "run_<1>", TenantID: "t&", State: StateEnded, Status: "DECIDED", Record: json.RawMessage(`{"a":"\u003cb\u003e"}`),
			ToolResults: []json.RawMessage{json.RawMessage(`{"x":1}`), json.RawMessage(`[]`)}, Events: []json.RawMessage{},
			PendingApprovals: []*gateway.ApprovalRequest{{GateID: "G", TTLSeconds: 5}}},
		{RunID: "r", State: StatePaused},
	} {
		want, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		got, err := v.appendJSON(nil)
		if err != nil || string(got) != string(want) {
			t.Errorf("appendJSON = %s, %v\njson.Marshal %s", got, err, want)
		}
	}
}
