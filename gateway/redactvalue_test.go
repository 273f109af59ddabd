package gateway_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/contextos/contextos/gateway"
)

func TestRedactValue(t *testing.T) {
	t.Parallel()
	b := gateway.BuiltinRedactors()
	for _, tc := range []struct {
		name    string
		in      map[string]any
		rules   []gateway.Redactor
		changed bool
		absent  string
	}{
		{"card string", map[string]any{"card": "4111 1111 1111 1111"}, []gateway.Redactor{b["credit_card"]}, true, "4111"},
		{"card number", map[string]any{"card": float64(4111111111111111)}, []gateway.Redactor{b["credit_card"]}, true, "4111"},
		{"secret member", map[string]any{"api_key": "plain"}, []gateway.Redactor{b["secret"]}, true, "plain"},
		{"nothing sensitive", map[string]any{"order_id": "ord_881", "amount": 4200}, []gateway.Redactor{b["credit_card"]}, false, ""},
		{"no rules", map[string]any{"card": "4111 1111 1111 1111"}, nil, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			before, _ := json.Marshal(tc.in)
			out, changed := gateway.RedactValue(tc.in, tc.rules)
			got, _ := json.Marshal(out)
			if changed != tc.changed {
				t.Errorf("changed = %v, want %v (%s)", changed, tc.changed, got)
			}
			if tc.absent != "" && strings.Contains(string(got), tc.absent) {
				t.Errorf("%s still holds %q", got, tc.absent)
			}
			if after, _ := json.Marshal(tc.in); string(after) != string(before) {
				t.Errorf("the input was modified: %s", after)
			}
		})
	}
}

// A secret-named member is redacted whatever its JSON type: a password
// or client secret given as a number too.
func TestRedactValueSecretNumbers(t *testing.T) {
	got, changed := gateway.RedactValue(map[string]any{"password": 987654321.0, "client_secret": json.Number("424242"), "amount": 42.0},
		[]gateway.Redactor{gateway.BuiltinRedactors()["secret"]})
	m, _ := got.(map[string]any)
	if !changed || m["password"] != gateway.Redacted || m["client_secret"] != gateway.Redacted || m["amount"] != 42.0 {
		t.Errorf("RedactValue = %v (changed %v)", got, changed)
	}
}
