package gateway

import (
	"regexp"
	"strings"

	"github.com/contextos/contextos/internal/jsonv"
)

// Redactor replaces the sensitive parts of a string and reports whether it
// changed anything. It must be deterministic and safe for concurrent use.
type Redactor func(s string) (string, bool)

// Redacted is what redacted text is replaced with.
const Redacted = "[REDACTED]"

var (
	cardRE   = regexp.MustCompile(`\b(?:\d[ -]?){12,18}\d\b`)
	indPANRE = regexp.MustCompile(`\b[A-Z]{5}[0-9]{4}[A-Z]\b`)
	emailRE  = regexp.MustCompile(`\b[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}\b`)
)

// BuiltinRedactors are the redaction rules the gateway knows by name:
// "credit_card" (Luhn-valid card numbers), "pan" (card primary account
// numbers and Indian PANs) and "email". Options.Redactors adds or replaces
// rules.
func BuiltinRedactors() map[string]Redactor {
	return map[string]Redactor{
		"credit_card": cardRedactor,
		"pan": func(s string) (string, bool) {
			s, a := cardRedactor(s)
			s, b := replaceAll(indPANRE, s)
			return s, a || b
		},
		"email": func(s string) (string, bool) { return replaceAll(emailRE, s) },
	}
}

func cardRedactor(s string) (string, bool) {
	if countDigits(s) < 13 {
		return s, false
	}
	changed := false
	out := cardRE.ReplaceAllStringFunc(s, func(m string) string {
		if luhn(m) {
			changed = true
			return Redacted
		}
		return m
	})
	return out, changed
}

func replaceAll(re *regexp.Regexp, s string) (string, bool) {
	if !re.MatchString(s) {
		return s, false
	}
	return re.ReplaceAllString(s, Redacted), true
}

func countDigits(s string) int {
	n := 0
	for i := 0; i < len(s); i++ {
		if s[i] >= '0' && s[i] <= '9' {
			n++
		}
	}
	return n
}

func luhn(s string) bool {
	sum, n, double := 0, 0, false
	for i := len(s) - 1; i >= 0; i-- {
		c := s[i]
		if c < '0' || c > '9' {
			continue
		}
		d := int(c - '0')
		if double {
			if d *= 2; d > 9 {
				d -= 9
			}
		}
		sum += d
		n++
		double = !double
	}
	return n >= 13 && sum%10 == 0
}

// redactValue returns a redacted, JSON-shaped copy of v: rules are applied
// to every string, containers are copied (the input is not modified), and
// values that are not JSON-shaped are normalized on the way (one pass
// where normalizing, then redacting, would copy twice).
func redactValue(v any, rules []Redactor) (any, bool) {
	switch x := v.(type) {
	case nil, bool, float64:
		return x, false
	case string:
		changed := false
		for _, r := range rules {
			var c bool
			if x, c = r(x); c {
				changed = true
			}
		}
		return x, changed
	case map[string]any:
		out := make(map[string]any, len(x))
		changed := false
		for k, e := range x {
			var c bool
			out[k], c = redactValue(e, rules)
			changed = changed || c
		}
		return out, changed
	case []any:
		if x == nil {
			return []any{}, false // as jsonv.Normalize writes it
		}
		out := make([]any, len(x))
		changed := false
		for i, e := range x {
			var c bool
			out[i], c = redactValue(e, rules)
			changed = changed || c
		}
		return out, changed
	}
	// Numbers of other types, []string, structs: their JSON shape first
	// (a copy, containing only the cases above).
	return redactValue(jsonv.Normalize(v), rules)
}

func redactString(s string, rules []Redactor) (string, bool) {
	v, c := redactValue(s, rules)
	return v.(string), c
}

// joinKnown lists rule names for error messages.
func joinKnown(m map[string]Redactor) string {
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	return strings.Join(sortStrings(names), ", ")
}
