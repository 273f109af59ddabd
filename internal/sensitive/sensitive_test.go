package sensitive

import (
	"encoding/base64"
	"slices"
	"strings"
	"testing"
)

const (
	visa     = "4111111111111111"
	awsKey   = "AKIAIOSFODNN7EXAMPLE"
	ghToken  = "ghp_abcdefghijklmnopqrstuvwxyz0123456789"
	ibanDE   = "DE89370400440532013000"
	ibanDESp = "DE89 3704 0044 0532 0130 00"
	jwt      = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ1c2VyXzEifQ.c2lnbmF0dXJlc2lnbmF0dXJl"
	pemKey   = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA7v\nq9x+f\n-----END RSA PRIVATE KEY-----"
)

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

// Every kind is found where it is written, and only its value goes.
func TestRedactKinds(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, in, want string
		kind           Kind
	}{
		{"card", "paid with " + visa + " today", "paid with [REDACTED] today", Card},
		{"card with spaces", "4111 1111 1111 1111", "[REDACTED]", Card},
		{"card with dashes", "5555-5555-5555-4444", "[REDACTED]", Card},
		{"card with dots", "4111.1111.1111.1111", "[REDACTED]", Card},
		{"fullwidth card", "ｃａｒｄ ４１１１１１１１１１１１１１１１", "ｃａｒｄ [REDACTED]", Card},
		{"card glued to letters", "card" + visa + "x", "card[REDACTED]x", Card},
		{"amex", "amex 378282246310005.", "amex [REDACTED].", Card},
		{"two cards", visa + " " + visa, "[REDACTED] [REDACTED]", Card},
		{"card then a year", visa + " 2031", "[REDACTED] 2031", Card},
		{"iban", "IBAN " + ibanDESp + ", thanks", "IBAN [REDACTED], thanks", IBAN},
		{"iban together", "to " + ibanDE, "to [REDACTED]", IBAN},
		{"iban with letters", "GB82WEST12345698765432", "[REDACTED]", IBAN},
		{"email", "mail bob.smith+x@example.co.uk now", "mail [REDACTED] now", Email},
		{"phone", "call +1 (415) 555-0100.", "call [REDACTED].", Phone},
		{"phone together", "tel:+4915112345678", "tel:[REDACTED]", Phone},
		{"ssn", "SSN 123-45-6789", "SSN [REDACTED]", SSN},
		{"pan", "PAN ABCPE1234F", "PAN [REDACTED]", PAN},
		{"aadhaar", "aadhaar 2345 6789 0124", "aadhaar [REDACTED]", Aadhaar},
		{"aws key", "key " + awsKey, "key [REDACTED]", APIKey},
		{"github token", ghToken, "[REDACTED]", APIKey},
		{"sk- key", "sk-proj-abcdefghijklmnop1234", "[REDACTED]", APIKey},
		{"stripe key", "sk_live_abcdefghijklmnop1234", "[REDACTED]", APIKey},
		{"jwt", "token " + jwt, "token [REDACTED]", APIKey},
		{"bearer", "Authorization: Bearer abcdef123456", "Authorization: Bearer [REDACTED]", Credential},
		{"basic", "Basic " + b64("user:password"), "Basic [REDACTED]", Credential},
		{"pem key", "key:\n" + pemKey + "\ndone", "key:\n[REDACTED]\ndone", PrivateKey},
		{"pem key cut short", "x " + pemKey[:40], "x [REDACTED]", PrivateKey},
		{"password=", "login password=hunter2&user=bob", "login password=[REDACTED]&user=bob", Password},
		{"json password", `{"db_password": "s3cr3t value", "user": "bob"}`, `{"db_password": "[REDACTED]", "user": "bob"}`, Password},
		{"escaped json secret", `{\"client_secret\":\"abc\"}`, `{\"client_secret\":\"[REDACTED]\"}`, Password},
		{"token:", "token: abc123", "token: [REDACTED]", Password},
		{"x-api-key header", "X-Api-Key: k1234", "X-Api-Key: [REDACTED]", Password},
		{"url credentials", "postgres://admin:hunter2@db.internal:5432/app", "postgres://[REDACTED]@db.internal:5432/app", URLCredential},
		{"base64 api key", "blob " + b64("api_key=sk-abcdefghijklmnopqrstuvwxyz"), "blob [REDACTED]", Encoded},
		{"base64url card", base64.RawURLEncoding.EncodeToString([]byte("card " + visa)), "[REDACTED]", Encoded},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			got, changed := Redact(c.in, All)
			if got != c.want || !changed {
				t.Errorf("Redact(%q) = %q, %v; want %q", c.in, got, changed, c.want)
			}
			f, ok := Detect(c.in, All)
			if !ok || f.Kind != c.kind {
				t.Errorf("Detect(%q) = %v, %v; want kind %v", c.in, f, ok, c.kind)
			}
			if got, changed := Redact(c.in, Of(c.kind)); got != c.want || !changed {
				t.Errorf("Redact(%q, %v alone) = %q, %v; want %q", c.in, c.kind, got, changed, c.want)
			}
		})
	}
}

// Ordinary values of tool outputs are left alone: ids, amounts, dates,
// UUIDs, hashes, tool call ids, versions, words near a keyword.
func TestRedactLeavesOrdinaryValues(t *testing.T) {
	for _, s := range []string{
		"", "ok", "order ord_881 refunded", "amount 12.50 EUR", "total 1234567.89", "2024-01-15T10:30:00Z", "20240115103000",
		"1700000000000", "1700000000000000", "550e8400-e29b-41d4-a716-446655440000", "12345678-1234-1234-1234-123456789012",
		"sha256:96bee2696c42a756ce877831d9163298675321875a3aeac4c06dad73fc68301f",
		"sha256:9340f67cb982888b09be2f80b9a90fa21b1ae0af6677861525254295ca8d439c",
		"tool_4111111111111111", "tc_4111111111111111", "pol_4111111111111111",
		"refund.pack@1.0.0", "v1.2.3", "192.168.1.1", "555-0100", "x = 5+12345678", "1e+10",
		"4111111111111112", "DE89 3704 0044 0532 0130 01", "DE89370400440532013001",
		"Bearer authentication failed", "Basic plan", "basic support", "max_tokens: 512", "total_tokens=90",
		"token_ref: secret://orders/api", "secret_ref=vault://x", "token_url: https://auth.example/token", "token_type: Bearer",
		"a password is required", "the token expired", "https://example.com/a/b?q=1", "ssh://git@github.com/org/repo",
		b64("hello world, how are you today?"), "ABCDE12345", "SSN 000-12-3456", "call 911", "+1 555", "[REDACTED]",
		"password=[REDACTED]", "Bearer [REDACTED]", `{"token": {"value": 1}}`, "internationalization_and_localization",
	} {
		if got, changed := Redact(s, All); got != s || changed {
			t.Errorf("Redact(%q) = %q, %v; want it unchanged", s, got, changed)
		}
		if f, ok := Detect(s, All); ok {
			t.Errorf("Detect(%q) = %v", s, f)
		}
	}
}

// A rule redacts its kinds and nothing else.
func TestRules(t *testing.T) {
	if got := RuleNames(); !slices.Equal(got, []string{"credit_card", "email", "iban", "pan", "phone", "secret", "ssn"}) {
		t.Errorf("RuleNames() = %v", got)
	}
	in := "card " + visa + ", mail bob@example.com, PAN ABCPE1234F, iban " + ibanDE + ", key " + awsKey
	for name, want := range map[string]string{
		"credit_card": "card [REDACTED], mail bob@example.com, PAN ABCPE1234F, iban " + ibanDE + ", key " + awsKey,
		"pan":         "card [REDACTED], mail bob@example.com, PAN [REDACTED], iban " + ibanDE + ", key " + awsKey,
		"email":       "card " + visa + ", mail [REDACTED], PAN ABCPE1234F, iban " + ibanDE + ", key " + awsKey,
		"iban":        "card " + visa + ", mail bob@example.com, PAN ABCPE1234F, iban [REDACTED], key " + awsKey,
		"secret":      "card " + visa + ", mail bob@example.com, PAN ABCPE1234F, iban " + ibanDE + ", key [REDACTED]",
	} {
		set, ok := Rule(name)
		if !ok {
			t.Fatalf("Rule(%q) unknown", name)
		}
		if got, _ := Redact(in, set); got != want {
			t.Errorf("rule %s: %q, want %q", name, got, want)
		}
	}
	if _, ok := Rule("iban2"); ok {
		t.Error(`Rule("iban2") is known`)
	}
}

// A finding's description never holds the value.
func TestDetectNamesNoValue(t *testing.T) {
	for _, s := range []string{visa, awsKey, ghToken, ibanDE, "bob@example.com", "password=hunter2", jwt} {
		f, ok := Detect(s, All)
		if !ok || f.What == "" || strings.Contains(f.What, s) || strings.Contains(f.What, "hunter2") {
			t.Errorf("Detect(%q) = %+v, %v", s, f, ok)
		}
	}
}

func TestIsSecretKey(t *testing.T) {
	for key, want := range map[string]bool{
		"password": true, "db_password": true, "dbPassword": true, "PASSWD": true, "passphrase": true, "pwd": true,
		"secret": true, "client_secret": true, "clientSecret": true, "secrets": true, "token": true, "access_token": true,
		"accessToken": true, "refresh_token": true, "authtoken": true, "api_key": true, "apiKey": true, "x-api-key": true,
		"APIKey": true, "private_key": true, "secret_key": true, "Authorization": true, "cookie": true, "set-cookie": true,
		"credentials": true, "bearer": true,
		"token_ref": false, "secret_ref": false, "token_url": false, "auth_ref": false, "max_tokens": false, "tokens": false,
		"tokenizer": false, "total_tokens": false, "token_type": false, "public_key": false, "idempotency_key": false,
		"key": false, "auth": false, "secretary": false, "decision_key": false, "order_id": false, "aws_access_key_id": false,
		"": false,
		// The cursor of a paged listing is a position, not a credential.
		"page_token": false, "nextPageToken": false, "next_token": false, "continuation_token": false, "pagination_token": false,
		"cursor_token": false, "sync_token": false, "prev_page_token": false, "page_access_token": true, "next_refresh_token": true,
	} {
		if got := IsSecretKey(key); got != want {
			t.Errorf("IsSecretKey(%q) = %v, want %v", key, got, want)
		}
	}
}

func TestIsCardNumber(t *testing.T) {
	for s, want := range map[string]bool{visa: true, "378282246310005": true, "4111111111111112": false, "1700000000000": false, "4111 1111 1111 1111": false} {
		if got := IsCardNumber(s); got != want {
			t.Errorf("IsCardNumber(%q) = %v", s, got)
		}
	}
}

// Nothing is allocated for a string with nothing to redact.
func TestRedactNoMatchAllocatesNothing(t *testing.T) {
	for _, s := range []string{"ok", "order ord_881 refunded for 12.50 EUR on 2024-01-15", "sha256:96bee2696c42a756ce877831d9163298675321875a3aeac4c06dad73fc68301f",
		"token_ref: secret://x", "tool_4111111111111111", "https://example.com/path/to/some/resource?id=1"} {
		if n := testing.AllocsPerRun(50, func() { Redact(s, All) }); n != 0 {
			t.Errorf("Redact(%q) allocates %v times", s, n)
		}
	}
}
