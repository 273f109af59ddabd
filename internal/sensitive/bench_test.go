package sensitive

import "testing"

// A typical tool output string with nothing to redact: every rule's
// prefilters run, no pattern matches, nothing is allocated.
func BenchmarkRedactClean(b *testing.B) {
	const s = "order ord_881 delivered on 2024-01-15T10:30:00Z, total 4200 INR, tool_0b867d980caa5473, sha256:96bee2696c42a756ce877831d9163298675321875a3aeac4c06dad73fc68301f"
	b.ReportAllocs()
	for b.Loop() {
		if _, changed := Redact(s, All); changed {
			b.Fatal("changed")
		}
	}
}

// The same string with a card number, an IBAN and a key in it.
func BenchmarkRedactDirty(b *testing.B) {
	const s = "order ord_881 paid with 4111 1111 1111 1111 from DE89 3704 0044 0532 0130 00, api_key=sk-abcdefghijklmnop1234, on 2024-01-15"
	b.ReportAllocs()
	for b.Loop() {
		if _, changed := Redact(s, All); !changed {
			b.Fatal("unchanged")
		}
	}
}

// One built-in rule on a short value, as the gateway runs it per string.
func BenchmarkRedactShortValue(b *testing.B) {
	set, _ := Rule("credit_card")
	b.ReportAllocs()
	for b.Loop() {
		Redact("delivered", set)
	}
}
