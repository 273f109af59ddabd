package gateway

import "testing"

// benchOutput is a lookup result with nothing to redact: ids, a status,
// amounts, a date, a hash and a nested list.
func benchOutput() map[string]any {
	return map[string]any{
		"order_id": "ord_881", "status": "delivered", "total_inr": 4200.0, "placed_at": "2026-05-04T09:31:00Z",
		"customer": map[string]any{"id": "cus_77", "tier": "gold", "since": "2019-03-02"},
		"items":    []any{map[string]any{"sku": "SKU-1138", "qty": 1.0, "price": 4200.0}},
		"note":     "delivered to the front desk, signed by the customer", "digest": "sha256:96bee2696c42a756ce877831d9163298675321875a3aeac4c06dad73fc68301f",
	}
}

func benchRules(names ...string) []Redactor {
	b := BuiltinRedactors()
	var rules []Redactor
	for _, n := range names {
		rules = append(rules, b[n])
	}
	return rules
}

// BenchmarkRedactValue: the canonical pack's rules (pan, credit_card) on
// a lookup result.
func BenchmarkRedactValue(b *testing.B) {
	out, rules := benchOutput(), benchRules("pan", "credit_card")
	b.ReportAllocs()
	for b.Loop() {
		redactValue(out, rules)
	}
}

// BenchmarkRedactValueAllRules: every built-in rule on the same result.
func BenchmarkRedactValueAllRules(b *testing.B) {
	out, rules := benchOutput(), benchRules("credit_card", "pan", "email") // all the rules there were before the catalogue
	if _, ok := BuiltinRedactors()["iban"]; ok {
		rules = benchRules("credit_card", "pan", "iban", "email", "phone", "ssn", "secret")
	}
	b.ReportAllocs()
	for b.Loop() {
		redactValue(out, rules)
	}
}
