package scrub_test

import (
	"encoding/base64"
	"encoding/hex"
	"net/url"
	"strings"
	"testing"

	"github.com/contextos/contextos/transport/internal/scrub"
)

// FuzzScrub: a secret of 6 bytes or more, written into any text raw or in
// any form the package names, never survives a scrub; in a longer base64
// text it is found at any byte alignment.
func FuzzScrub(f *testing.F) {
	f.Add("sk_live_4eC39HqLyjWDarjtT1zdp7dc", "before ", " after")
	f.Add("a/b+c=d&e?f g", "", "")
	f.Add("aaaaaa", "a", "aa")
	f.Add("\x00\xff\x10binary", "x", "")
	f.Fuzz(func(t *testing.T, secret, before, after string) {
		if len(secret) < 6 || len(secret) > 128 || strings.ContainsRune(secret, 0) || strings.Contains(scrub.Mask, secret) {
			t.Skip()
		}
		s := set(secret)
		b := []byte(secret)
		for _, form := range []string{secret, base64.StdEncoding.EncodeToString(b), base64.RawURLEncoding.EncodeToString(b),
			hex.EncodeToString(b), url.QueryEscape(secret), url.PathEscape(secret)} {
			text := before + form + after
			// What is left between the masks never holds the form whole.
			for _, part := range strings.Split(s.String(text), scrub.Mask) {
				if strings.Contains(part, form) {
					t.Fatalf("%q survives in %q", form, s.String(text))
				}
			}
		}
		for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding} {
			text := enc.EncodeToString([]byte(before + secret + after))
			if s.String(text) == text {
				t.Fatalf("%q at offset %d of %q not found", secret, len(before)%3, text)
			}
		}
	})
}
