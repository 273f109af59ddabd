package sensitive

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// RedactSecrets changes exactly what it must, returns a value with no
// secret as it is, and checks one without allocating.
func TestRedactSecrets(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		in   any
		want any // nil: unchanged
	}{
		{"clean", map[string]any{"order_id": "ord_881", "amount": 4200.0, "ok": true, "tags": []any{"a", nil}}, nil},
		{"secret-named member", map[string]any{"api_key": "v1", "n": 1.0}, map[string]any{"api_key": Redacted, "n": 1.0}},
		{"secret-named number", map[string]any{"pin_token": 1234.0}, map[string]any{"pin_token": Redacted}},
		{"empty secret-named member", map[string]any{"password": ""}, nil},
		{"key in a string", map[string]any{"note": "use " + awsKey}, map[string]any{"note": "use " + Redacted}},
		{"key as a map key", map[string]any{awsKey: 1.0}, map[string]any{Redacted: 1.0}},
		{"nested in a list", []any{map[string]any{"token": "x1"}}, []any{map[string]any{"token": Redacted}}},
		{"json.Number under a secret", map[string]any{"secret": json.Number("7")}, map[string]any{"secret": Redacted}},
		{"a cursor is no secret", map[string]any{"next_page_token": "abc123"}, nil},
		{"card numbers are not secrets", map[string]any{"card": visa}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, changed := RedactSecrets(c.in)
			if c.want == nil {
				if changed || cmp.Diff(c.in, got) != "" {
					t.Errorf("RedactSecrets(%v) = %v, %v; want it as it is", c.in, got, changed)
				}
				return
			}
			if diff := cmp.Diff(c.want, got); diff != "" || !changed {
				t.Errorf("RedactSecrets (-want +got):\n%s changed=%v", diff, changed)
			}
			if again, ch := RedactSecrets(got); ch || cmp.Diff(got, again) != "" {
				t.Errorf("not idempotent: %v", again)
			}
		})
	}
}

func TestRedactSecretsCleanAllocatesNothing(t *testing.T) {
	v := map[string]any{"order_id": "ord_881", "amount": 4200.0, "currency": "INR", "items": []any{map[string]any{"sku": "A-1", "qty": 2.0}}}
	if n := testing.AllocsPerRun(50, func() { RedactSecrets(v) }); n != 0 {
		t.Errorf("RedactSecrets of a clean value allocates %v times", n)
	}
}

// FuzzRedactSecrets: whatever JSON a value is, the check agrees with the
// redaction — a value the check passes is one redaction leaves as it is.
func FuzzRedactSecrets(f *testing.F) {
	for _, s := range []string{`{"a":"b"}`, `{"api_key":"x"}`, `{"n":41111111111111110000}`, `[{"token":1},"` + awsKey + `"]`, `{"x":{"password":""}}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, doc string) {
		var v any
		if json.Unmarshal([]byte(doc), &v) != nil {
			return
		}
		dec := json.NewDecoder(strings.NewReader(doc))
		dec.UseNumber()
		var n any
		_ = dec.Decode(&n)
		for _, x := range []any{v, n} {
			if !hasSecrets(x, false, 0) {
				if _, changed := RedactValue(x, secretRules, true); changed {
					t.Fatalf("the check passed %s, which redaction changes", doc)
				}
			}
		}
	})
}
