package sensitive

import "testing"

// FuzzRedact: for any input and every rule, redaction is deterministic
// and idempotent, reports a change exactly when it made one, leaves
// nothing a detector finds, and never panics.
func FuzzRedact(f *testing.F) {
	for _, s := range fragments {
		f.Add(s)
	}
	f.Add("card " + visa + " iban " + ibanDESp + " key " + awsKey + " password=hunter2 Bearer abcdef123456")
	f.Add(`{"db_password":"x","token":"` + jwt + `"}`)
	f.Add("ｃａｒｄ ４１１１ １１１１ １１１１ １１１１")
	f.Add("card=4111%201111%2D1111%25201111&%34%31%31%31%C2%A0%31%31%31%31%31%31%31%31%31%31%31%31")
	for _, s := range encodedForms() {
		f.Add(s)
	}
	sets := sets()
	f.Fuzz(func(t *testing.T, s string) {
		for name, set := range sets {
			checkRedact(t, name, set, s)
		}
		_ = IsSecretKey(s)
		// A card number on its own is redacted whole.
		if IsCardNumber(s) {
			if out, _ := Redact(s, Of(Card)); out != Redacted {
				t.Fatalf("card number %q redacted to %q", s, out)
			}
		}
	})
}
