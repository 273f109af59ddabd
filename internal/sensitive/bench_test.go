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

// A record-like document with the SHA-256 digests records and transcript
// entries carry (64 lowercase hex characters each, which the encoded
// detector reads as base64 from four alignments): nothing to redact.
func BenchmarkRedactDigests(b *testing.B) {
	const s = `{"record_id":"rec_01J8X3","run_id":"run_7f3a","decision":"ALLOW",` +
		`"compiled_context_hash":"sha256:96bee2696c42a756ce877831d9163298675321875a3aeac4c06dad73fc68301f",` +
		`"ledger_hash":"sha256:0b867d980caa5473e1d0c3f7a2b5e8d41c9f6a3b7e2d5c8f1a4b7e0d3c6f9a2b",` +
		`"prev_hash":"3f79bb7b435b05321651daefd374cdc681dc06faa65e374e38337b88ca046dea",` +
		`"request_hash":"sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",` +
		`"transcript":["a591a6d40bf420404a011733cfb7b190d62c65bf0bcda32b57b277d9ad9f146e",` +
		`"2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae"],"amount":1200,"currency":"INR"}`
	b.ReportAllocs()
	for b.Loop() {
		if _, changed := Redact(s, All); changed {
			b.Fatal("changed")
		}
	}
}

// Prose whose words hold the vendor keys' literals (gh, sk-, k_, xox,
// npm_, eyJ) without being keys: every API-key prefilter passes, no
// pattern matches.
func BenchmarkRedactKeyLiterals(b *testing.B) {
	const s = "the high-risk task-runner went through the disk-usage check; ask_test_suite and task_live_view " +
		"ran, npm_config_cache and gh_pages_branch were set, the eyJ header was skipped (risk-assessment-report-2024 " +
		"for desk-top-sharing-enabled), mask_live_preview off, xox-game, thoughts_high_light"
	b.ReportAllocs()
	for b.Loop() {
		if _, changed := Redact(s, All); changed {
			b.Fatal("changed")
		}
	}
}
