package decision_test

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/contextos/contextos/decision"
	"github.com/contextos/contextos/internal/decisionhook"
	"github.com/contextos/contextos/internal/sensitive"
)

// TestOutputsRedactedBuildsTheSameRecord: outputs the built-in secret
// detectors already redacted (as the runtime redacts a plan's), marked
// through decisionhook.OutputsRedacted, give Build the record it builds
// from them unmarked and from the outputs as they were before redaction,
// byte for byte; and the mark makes Build take them as they are.
func TestOutputsRedactedBuildsTheSameRecord(t *testing.T) {
	t.Parallel()
	rr := runRefund(t, true)
	build := func(outputs map[string]any, marked bool) (string, *decision.Record) {
		t.Helper()
		in := rr.input(rr.facts(), nil)
		in.Outputs = outputs
		if marked {
			decisionhook.OutputsRedacted(&in)
		}
		rec, _ := decision.Build(in)
		b, err := json.Marshal(rec)
		if err != nil {
			t.Fatal(err)
		}
		return string(b), rec
	}
	for i, raw := range []map[string]any{
		{"refund_amount_inr": 4200, "currency": "INR", "transaction_id": "txn_q9"},
		{"refund_amount_inr": 4200.0, "api_key": "k-123", "note": "the key is AKIAIOSFODNN7EXAMPLE", "card": 4111111111111111.0,
			"nested": map[string]any{"password": 5, "list": []any{"Authorization: Bearer abcdefghijklmnopqrstuvwxyz012345", 1e10}}},
		{"AKIAIOSFODNN7EXAMPLE": "as a key", "[REDACTED]": "taken", "token": []any{"x"}, "big": json.Number("41111111111111110000")},
	} {
		out, changed := sensitive.RedactSecrets(raw)
		if changed != (i > 0) {
			t.Fatalf("outputs %d: redaction changed them: %t", i, changed)
		}
		redacted := out.(map[string]any)
		want, _ := build(raw, false)
		if got, _ := build(redacted, false); got != want {
			t.Errorf("outputs %d redacted, unmarked:\n%s\nwant\n%s", i, got, want)
		}
		if got, _ := build(redacted, true); got != want {
			t.Errorf("outputs %d redacted, marked:\n%s\nwant\n%s", i, got, want)
		}
	}
	raw := map[string]any{"api_key": "k-123"}
	if _, rec := build(raw, true); !reflect.DeepEqual(rec.Outputs, raw) {
		t.Errorf("marked outputs = %v, want them as they are", rec.Outputs)
	}
}
