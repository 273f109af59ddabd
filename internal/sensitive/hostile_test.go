package sensitive

import (
	"strings"
	"testing"
)

// Hostile strings: evasions of the patterns (look-alike separators,
// nesting, markers planted in the input, truncation) and inputs built to
// make redaction slow or unstable. Each is redacted (the secret is gone)
// or left alone (want == in), and redacting again changes nothing.
func TestHostileStrings(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("4111 1111 1111 1111x", 1<<14) // 320 KiB of glued cards
	for _, c := range []struct {
		name, in string
		gone     []string // must not survive
		want     string   // when set, the exact result
	}{
		{name: "card split by zero-width spaces", in: "card 4111\u200b1111\u200b1111\u200b1111", want: "card [REDACTED]"},
		{name: "card split by no-break spaces", in: "4111\u00a01111\u00a01111\u00a01111 ok", want: "[REDACTED] ok"},
		{name: "fullwidth digits mixed with ascii", in: "４１１１1111１１１１1111", want: "[REDACTED]"},
		{name: "card with fullwidth hyphens", in: "4111－1111－1111－1111", want: "[REDACTED]"},
		{name: "lowercase iban", in: "iban de89370400440532013000.", want: "iban [REDACTED]."},
		{name: "base64 of base64 of a key", in: b64(b64("password=hunter2")), want: Redacted},
		{name: "pem block without its end", in: "-----BEGIN EC PRIVATE KEY-----\nMHcCAQEEIK", want: Redacted},
		{name: "marker planted before a secret", in: "password=[REDACTED]hunter2 token=[REDACTED]", gone: []string{"hunter2"}},
		{name: "secret in escaped json", in: `{\"api_key\":\"k-123\\\"x\", \"n\":1}`, gone: []string{"k-123"}},
		{name: "bearer with tab", in: "Authorization:Bearer\tabc123456789", want: "Authorization:Bearer\t[REDACTED]"},
		{name: "credentials in a url with a port", in: "redis://:s3cret@cache:6379/0", want: "redis://[REDACTED]@cache:6379/0"},
		{name: "sk key in a query string", in: "GET /v1?key=sk-abcdefghijklmnopqrstuvwx&x=1", gone: []string{"sk-abcdefghijklmnopqrstuvwx"}},
		{name: "azure sas signature in a query", in: "https://acct.blob.core.windows.net/c/x.pdf?sv=2022-11-02&se=2026-12-08&sp=r&sig=Zm9vYmFyYmF6cXV4MTIzNDU2Nzg5MA%3D",
			want: "https://acct.blob.core.windows.net/c/x.pdf?sv=2022-11-02&se=2026-12-08&sp=r&sig=[REDACTED]"},
		{name: "s3 pre-signed url signature", in: "https://b.s3.amazonaws.com/x.pdf?X-Amz-Expires=300&X-Amz-Signature=4f0c2c1d9e8b7a6f5e4d3c2b1a0f9e8d",
			want: "https://b.s3.amazonaws.com/x.pdf?X-Amz-Expires=300&X-Amz-Signature=[REDACTED]"},
		{name: "card next to a luhn-invalid group", in: "4111111111111111-4242", want: "[REDACTED]-4242"},
		{name: "card with spaced dashes", in: "card 4111 - 1111 - 1111 - 1111 ok", want: "card [REDACTED] ok"},
		{name: "card with double spaces", in: "4111  1111  1111  1111", want: "[REDACTED]"},
		{name: "card form-encoded in a query", in: "?card=4111+1111+1111+1111&x=1", want: "?card=[REDACTED]&x=1"},
		{name: "card split by tabs and line breaks", in: "4111\t1111\n1111\r\n1111", want: "[REDACTED]"},
		{name: "card split by underscores and slashes", in: "4111_1111/1111_1111", want: "[REDACTED]"},
		{name: "hundreds of kilobytes of glued cards", in: long, gone: []string{"4111 1111 1111 1111"}},
		{name: "long runs of separators and digits", in: strings.Repeat("1-", 1<<16), want: strings.Repeat("1-", 1<<16)},
		{name: "long hex token", in: strings.Repeat("a4111111111111111", 1<<12), want: strings.Repeat("a4111111111111111", 1<<12)},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			out, _ := Redact(c.in, All)
			if c.want != "" && out != c.want {
				t.Errorf("Redact(%.80q) = %.80q, want %.80q", c.in, out, c.want)
			}
			for _, g := range c.gone {
				if strings.Contains(out, g) {
					t.Errorf("Redact(%.80q) = %.80q keeps %q", c.in, out, g)
				}
			}
			if again, changed := Redact(out, All); again != out || changed {
				t.Errorf("not idempotent: %.80q → %.80q", out, again)
			}
		})
	}
}
