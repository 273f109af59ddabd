package agent

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/contextos/contextos/internal/sensitive"
)

// FuzzRedactData: for any data a backend gives, the shortcut of
// redactData (no decoding when no string can hold a secret) answers as
// the full decode-and-walk does, and what comes out holds no string in
// which a secret is found.
func FuzzRedactData(f *testing.F) {
	for _, seed := range []string{
		`{"schema":"agent_api.tools.structured.v1","tool":{"kind":"command_execution","phase":"start","bytes":{"stdout":3}}}`,
		`{"usage":{"input_tokens":2400,"cached_input_tokens":2000},"cost_usd":0.25}`,
		`{"error":"401 sk-proj-Zx81mQ2vL0pR7sT4uW9yA3bC6dE1fG5h"}`,
		`{"api_key":"short","x":["Bearer abcdefghijklmnopqrstuvwxyz012345"]}`,
		`{"k":"sk-\u0070roj-Zx81mQ2vL0pR7sT4uW9yA3bC6dE1fG5h"}`,
		`["password=hunter2",{"token":1}]`,
		`"AKIAABCDEFGHIJKLMNOP"`,
		`{"sk-proj-Zx81mQ2vL0pR7sT4uW9yA3bC6dE1fG5h":1,"[REDACTED]":2}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		b := boundData(raw)
		if len(b) == 0 {
			return // no data
		}
		got := redactData(b)
		if want := redactDecoded(b); !bytes.Equal(got, want) {
			t.Fatalf("redactData(%s) = %s, the full walk gives %s", b, got, want)
		}
		if !json.Valid(got) {
			t.Fatalf("redactData(%s) = %s, not JSON", b, got)
		}
		var v any
		if json.Unmarshal(got, &v) == nil {
			walkStrings(v, func(s string) {
				if _, found := sensitive.Detect(s, sensitive.Secrets); found {
					t.Fatalf("redactData(%s) = %s still holds a secret in %q", b, got, s)
				}
			})
		}
	})
}

func walkStrings(v any, f func(string)) {
	switch x := v.(type) {
	case string:
		f(x)
	case []any:
		for _, e := range x {
			walkStrings(e, f)
		}
	case map[string]any:
		for k, e := range x {
			f(k)
			walkStrings(e, f)
		}
	}
}
