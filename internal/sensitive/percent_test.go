package sensitive

import (
	"strings"
	"testing"
)

// A card number whose separators or digits are percent-encoded — once,
// twice or three times, in either hex case, alone or in a query — is a
// card number to a reader who decodes it: it is found and redacted whole,
// and the text around it stays.
func TestPercentEncodedCards(t *testing.T) {
	t.Parallel()
	enc := func(sep string) string { return strings.Join([]string{"4111", "1111", "1111", "1111"}, sep) }
	for _, c := range []struct{ name, in, want string }{
		{"encoded spaces", enc("%20"), Redacted},
		{"encoded dashes", enc("%2D"), Redacted},
		{"encoded dashes, lower case", enc("%2d"), Redacted},
		{"encoded dots", enc("%2E"), Redacted},
		{"encoded plus", enc("%2B"), Redacted},
		{"encoded underscores", enc("%5F"), Redacted},
		{"encoded slashes", enc("%2F"), Redacted},
		{"encoded tabs", enc("%09"), Redacted},
		{"double-encoded spaces", enc("%2520"), Redacted},
		{"double-encoded dashes", enc("%252d"), Redacted},
		{"triple-encoded spaces", enc("%252520"), Redacted},
		{"encoded no-break space", enc("%C2%A0"), Redacted},
		{"encoded zero-width space", enc("%E2%80%8B"), Redacted},
		{"two encoded separators", enc("%20-%20"), Redacted},
		{"encoded digits", "%34%31%31%31%31%31%31%31%31%31%31%31%31%31%31%31", Redacted},
		{"double-encoded digits", "%2534%2531%2531%2531%2531%2531%2531%2531%2531%2531%2531%2531%2531%2531%2531%2531", Redacted},
		{"mixed", "41%311%201111%2D1111.1111", Redacted},
		{"amex after one digit", "3%2078282246310005", Redacted},
		{"in a query", "https://pay.example/x?card=" + enc("%20") + "&ok=1", "https://pay.example/x?card=" + Redacted + "&ok=1"},
		{"in a form body", "name=bob&pan=" + enc("%2B") + "&cvv=123", "name=bob&pan=" + Redacted + "&cvv=123"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			if got, changed := Redact(c.in, All); got != c.want || !changed {
				t.Errorf("Redact(%q) = %q, %v; want %q", c.in, got, changed, c.want)
			}
			if got, _ := Redact(c.in, Of(Card)); got != c.want {
				t.Errorf("Redact(%q, card alone) = %q; want %q", c.in, got, c.want)
			}
			if f, ok := Detect(c.in, All); !ok || f.Kind != Card {
				t.Errorf("Detect(%q) = %v, %v; want a card", c.in, f, ok)
			}
		})
	}
}

// Percent-encoding makes no card of what is none: a number that fails
// the Luhn check, one too short, an escape that is no separator, and
// ordinary encoded text stay as they are.
func TestPercentEncodedNonCards(t *testing.T) {
	t.Parallel()
	for _, s := range []string{
		"4111%201111%201111%201112", // Luhn fails
		"4111%201111%201111",        // 12 digits
		"4111%251111%251111%251111", // "%2511" decodes to a control character, no separator
		"4111%41111111111111",       // %41 is 'A'
		"https://example.com/search?q=refund%20order%20881",
		"50%25%20off%20until%202026-05-04",
		"%%%20%2", "%", "%2", "%25", "%252",
	} {
		if got, changed := Redact(s, All); got != s || changed {
			t.Errorf("Redact(%q) = %q, %v; want it unchanged", s, got, changed)
		}
	}
}
