// Package principal owns how the module compares the names of people and
// services: an approver with the run's requester, one reviewer with
// another. Two names are the same principal when their canonical forms
// are equal: Unicode NFKC, with format characters (zero-width spaces and
// joiners, bidirectional controls, the byte-order mark, soft hyphens),
// control characters, variation selectors and the other default-ignorable
// code points (the combining grapheme joiner, Hangul fillers, …) and
// surrounding white space removed, and case folded. A name that only
// looks different ("usr_771" followed by a zero-width space, a
// full-width "ｕｓｒ_771", "USR_771") is the same principal.
package principal

import (
	"strings"
	"unicode"

	"golang.org/x/text/cases"
	"golang.org/x/text/unicode/norm"
)

// fold is the case folding the canonical form uses; a cases.Caser is not
// safe for concurrent use, so each call takes its own (they are cheap).
func fold() cases.Caser { return cases.Fold() }

// Canonical returns s in the form two names are compared in.
func Canonical(s string) string {
	if isPlain(s) {
		return strings.ToLower(strings.TrimSpace(s))
	}
	s = strings.Map(func(r rune) rune {
		if unicode.In(r, unicode.Cf, unicode.Cc, unicode.Variation_Selector, unicode.Other_Default_Ignorable_Code_Point) {
			return -1
		}
		return r
	}, norm.NFKC.String(s))
	// NFKC after folding: folding can produce sequences NFKC composes.
	s = norm.NFKC.String(fold().String(s))
	// Then lower case, rune by rune: case folding maps a few scripts'
	// lower case to their upper case (Cherokee), and the folder maps that
	// upper case back to lower case, so folding alone is not idempotent;
	// lower case is what every plain name compares in.
	return strings.TrimSpace(norm.NFKC.String(strings.Map(unicode.ToLower, s)))
}

// Same reports whether a and b name the same principal. Two empty (or
// all-invisible) names are not the same principal: an absent name
// matches nobody.
func Same(a, b string) bool {
	ca := Canonical(a)
	return ca != "" && ca == Canonical(b)
}

// isPlain reports an ASCII name with no control characters, whose
// canonical form is its lower case, trimmed (the common case, without
// the Unicode tables).
func isPlain(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x80 || c < 0x20 && c != '\t' && c != '\n' && c != '\r' || c == 0x7f {
			return false
		}
	}
	return true
}
