package sensitive

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// fragments are the pieces the property test glues together: findings,
// near misses, separators and markers, so that findings touch each other
// and the marker in every way.
var fragments = []string{
	visa, "4111 1111 1111 1111", "4111.1111.", "1111-1111", "４１１１", "１１１１", ibanDESp, ibanDE, "DE89", "3704 0044",
	"bob@example.com", "@", "+1 (415) 555-0100", "+49", "123-45-6789", "ABCPE1234F", awsKey, ghToken, jwt, "eyJ", pemKey,
	"-----BEGIN PRIVATE KEY-----", "-----END PRIVATE KEY-----", "password", "=", ":", "\"", "\\\"", "'", "token", "api_key",
	"Bearer ", "Basic ", b64("user:pw"), "https://", "user:pw@", "postgres://a:b@h", b64("secret=" + visa), "sk-",
	"abcdefghijklmnopq", "0123456789", "12.50", "2024-01-15", "550e8400-e29b-41d4-a716-446655440000", "sha256:", "deadbeef",
	"tool_", "tc_", " ", " ", "\n", ",", "x", "[", "]", Redacted, "[REDACTED", "REDACTED]", "&", "{", "}", "_", "-", ".",
}

func randomText(r *rand.Rand) string {
	var b strings.Builder
	for n := r.IntN(12); n >= 0; n-- {
		b.WriteString(fragments[r.IntN(len(fragments))])
	}
	return b.String()
}

func sets() map[string]Set {
	m := map[string]Set{"all": All, "secrets": Secrets, "pii": PII}
	for _, name := range RuleNames() {
		m[name], _ = Rule(name)
	}
	return m
}

// Redaction is deterministic and idempotent, and leaves nothing a
// detector finds, for every rule and any mix of findings, near misses and
// markers.
func TestRedactIdempotentProperty(t *testing.T) {
	r := rand.New(rand.NewPCG(14, 2024))
	sets := sets()
	for range 20000 {
		s := randomText(r)
		for name, set := range sets {
			checkRedact(t, name, set, s)
		}
	}
}

func checkRedact(t *testing.T, name string, set Set, s string) {
	t.Helper()
	out, changed := Redact(s, set)
	if again, _ := Redact(s, set); again != out {
		t.Fatalf("%s: Redact(%q) is not deterministic: %q then %q", name, s, out, again)
	}
	if !changed && out != s {
		t.Fatalf("%s: Redact(%q) = %q but reports no change", name, s, out)
	}
	if out2, changed2 := Redact(out, set); out2 != out || changed2 {
		t.Fatalf("%s: not idempotent: Redact(%q) = %q, Redact of that = %q (%v)", name, s, out, out2, changed2)
	}
	if f, ok := Detect(out, set); ok {
		t.Fatalf("%s: Redact(%q) = %q still holds %v", name, s, out, f)
	}
}

// A finding set apart by blank lines never survives redaction.
func TestRedactRemovesPlantedFindings(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 13))
	planted := []string{visa, "4111 1111 1111 1111", "４１１１１１１１１１１１１１１１", ibanDESp, "bob@example.com", "+1 (415) 555-0100",
		"123-45-6789", "ABCPE1234F", awsKey, ghToken, jwt, b64("password=hunter2")}
	for range 2000 {
		p := planted[r.IntN(len(planted))]
		s := randomText(r) + "\n\n" + p + "\n\n" + randomText(r)
		if out, _ := Redact(s, All); strings.Contains(out, "\n\n"+p+"\n\n") {
			t.Fatalf("Redact(%q) = %q keeps %q", s, out, p)
		}
	}
}
