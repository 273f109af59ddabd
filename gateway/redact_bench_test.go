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

// benchRedactOutcome redacts a lookup outcome with nothing to redact as a
// run does: the secret rule and the named ones, through the clean check
// (clean) or rule by rule.
func benchRedactOutcome(b *testing.B, clean bool, names ...string) {
	rules := append([]Redactor{redactSecrets}, benchRules(names...)...)
	set, known := cleanSet(rules)
	if !known {
		b.Fatal("the built-in rules have no clean set")
	}
	out := &Outcome{Output: benchOutput(), Mutations: []string{"m:1"}}
	var dst takenOutcome
	b.ReportAllocs()
	for b.Loop() {
		redactOutcome(&dst, out, rules, set, clean)
	}
}

// BenchmarkRedactOutcomeRuleByRule and BenchmarkRedactOutcomeClean: the
// canonical pack's rules (pan, credit_card) and the secret rule, applied
// one by one and through the clean check.
func BenchmarkRedactOutcomeRuleByRule(b *testing.B) {
	benchRedactOutcome(b, false, "pan", "credit_card")
}
func BenchmarkRedactOutcomeClean(b *testing.B) { benchRedactOutcome(b, true, "pan", "credit_card") }

// The same with every built-in rule active.
func BenchmarkRedactOutcomeAllRulesRuleByRule(b *testing.B) {
	benchRedactOutcome(b, false, "credit_card", "pan", "iban", "email", "phone", "ssn")
}
func BenchmarkRedactOutcomeAllRulesClean(b *testing.B) {
	benchRedactOutcome(b, true, "credit_card", "pan", "iban", "email", "phone", "ssn")
}
