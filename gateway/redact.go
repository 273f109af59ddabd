package gateway

import (
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/contextos/contextos/internal/jsonv"
	"github.com/contextos/contextos/internal/sensitive"
	"github.com/contextos/contextos/internal/sortedkeys"
)

// Redactor replaces the sensitive parts of a string and reports whether it
// changed anything. It must be deterministic and safe for concurrent use,
// and it should be idempotent and leave Redacted alone (RegexpRedactor
// makes such a rule from a regular expression).
type Redactor func(s string) (string, bool)

// Redacted is what redacted text is replaced with.
const Redacted = sensitive.Redacted

// BuiltinRedactors are the redaction rules the gateway knows by name, all
// from one catalogue of sensitive data:
//
//   - "credit_card": Luhn-valid card numbers, however written (spaces,
//     dashes, dots, fullwidth digits, glued to letters), and numbers
//     whose value is one;
//   - "pan": card numbers and Indian PANs;
//   - "iban": IBANs with a valid mod-97 checksum, with or without spaces;
//   - "email": email addresses;
//   - "phone": E.164 phone numbers ("+" then 8 to 15 digits);
//   - "ssn": US social security numbers;
//   - "secret": API keys and tokens, bearer and basic credentials, private
//     keys, secrets in key=value text, credentials in URLs, base64-wrapped
//     sensitive data, and the string values of secret-named members
//     (db_password, api_key, access_token, ...).
//
// Rules apply to every string of a result, to map keys (a key that is
// itself sensitive is renamed, deterministically and without collisions)
// and to large integers (a number that is a card number becomes the
// string Redacted). Options.Redactors adds or replaces rules.
func BuiltinRedactors() map[string]Redactor {
	m := make(map[string]Redactor, 7)
	for _, name := range sensitive.RuleNames() {
		if name == sensitive.SecretRule {
			m[name] = redactSecrets
			continue
		}
		set, _ := sensitive.Rule(name)
		m[name] = func(s string) (string, bool) { return sensitive.Redact(s, set) }
	}
	return m
}

// redactSecrets is the "secret" rule. redactValue recognizes it (by
// identity) to redact the values of secret-named members as well.
func redactSecrets(s string) (string, bool) { return sensitive.Redact(s, sensitive.Secrets) }

var secretRulePC = reflect.ValueOf(redactSecrets).Pointer()

// keyAware reports whether the built-in secret rule is among rules.
func keyAware(rules []Redactor) bool {
	for _, r := range rules {
		if r != nil && reflect.ValueOf(r).Pointer() == secretRulePC {
			return true
		}
	}
	return false
}

// markerRE matches the redaction marker and the numbered form renamed
// keys take ("[REDACTED#2]").
var markerRE = regexp.MustCompile(`\[REDACTED(?:#[0-9]+)?\]`)

// RegexpRedactor returns a rule replacing every non-empty match of the
// RE2 expression expr with Redacted. It leaves redaction markers alone (a
// match inside one is skipped, a match overlapping one absorbs it), and
// repeats until nothing changes, so that it is idempotent whatever the
// expression. An invalid expression is an error (ErrConfig).
func RegexpRedactor(expr string) (Redactor, error) {
	re, err := regexp.Compile(expr)
	if err != nil {
		return nil, fmt.Errorf("%w: redaction expression: %w", ErrConfig, err)
	}
	once := func(s string) (string, bool) {
		ms := re.FindAllStringIndex(s, -1)
		if len(ms) == 0 {
			return s, false
		}
		var markers [][]int
		if strings.Contains(s, "[REDACTED") {
			markers = markerRE.FindAllStringIndex(s, -1)
		}
		var spans [][2]int
		for _, m := range ms {
			start, end := m[0], m[1]
			if start == end {
				continue
			}
			inside := false
			for _, k := range markers {
				if k[0] <= start && end <= k[1] {
					inside = true
					break
				}
				if k[0] < end && start < k[1] { // overlaps: take the marker in
					start, end = min(start, k[0]), max(end, k[1])
				}
			}
			if !inside {
				spans = append(spans, [2]int{start, end})
			}
		}
		if len(spans) == 0 {
			return s, false
		}
		var b strings.Builder
		pos := 0
		for _, sp := range spans {
			if sp[0] < pos { // merged with the previous span
				pos = max(pos, sp[1])
				continue
			}
			b.WriteString(s[pos:sp[0]])
			b.WriteString(Redacted)
			pos = sp[1]
		}
		b.WriteString(s[pos:])
		out := b.String()
		return out, out != s
	}
	return func(s string) (string, bool) { return fixpoint(s, once) }, nil
}

// maxRounds bounds the rounds of rules applied to one string; a string
// still changing after them is redacted whole (fail closed).
const maxRounds = 8

// fixpoint applies f until it changes nothing.
func fixpoint(s string, f func(string) (string, bool)) (string, bool) {
	out, changed := f(s)
	if !changed {
		return s, false
	}
	for range maxRounds {
		next, again := f(out)
		if !again {
			return out, true
		}
		out = next
	}
	return Redacted, true
}

// redactValue returns a redacted, JSON-shaped copy of v: rules are applied
// to every string and map key and to every number that could be a card
// number, the string and number values of secret-named members are redacted when the
// built-in secret rule is active, containers are copied (the input is not
// modified), and values that are not JSON-shaped are normalized on the way
// (one pass where normalizing, then redacting, would copy twice). The
// result is deterministic, and redacting it again changes nothing.
func redactValue(v any, rules []Redactor) (any, bool) {
	return redactAny(v, rules, len(rules) > 0 && keyAware(rules), false)
}

// redactAny is redactValue; secretKeys says whether secret-named members
// are redacted, underSecret whether v is the value of one.
func redactAny(v any, rules []Redactor, secretKeys, underSecret bool) (any, bool) {
	switch x := v.(type) {
	case nil, bool:
		return x, false
	case string:
		if underSecret && x != "" && x != Redacted {
			return Redacted, true
		}
		return redactString(x, rules)
	case float64:
		if underSecret {
			return Redacted, true
		}
		return redactNumber(x, rules)
	case json.Number:
		if underSecret {
			return Redacted, true
		}
		f, err := x.Float64()
		if err != nil {
			return redactString(x.String(), rules)
		}
		if _, c := redactString(x.String(), rules); c {
			return Redacted, true
		}
		return redactNumber(f, rules)
	case map[string]any:
		return redactMap(x, rules, secretKeys)
	case []any:
		if x == nil {
			return []any{}, false // as jsonv.Normalize writes it
		}
		out := make([]any, len(x))
		changed := false
		for i, e := range x {
			var c bool
			out[i], c = redactAny(e, rules, secretKeys, underSecret)
			changed = changed || c
		}
		return out, changed
	}
	// Numbers of other types, []string, structs: their JSON shape first
	// (a copy, containing only the cases above).
	return redactAny(jsonv.Normalize(v), rules, secretKeys, underSecret)
}

// redactNumber returns Redacted for a number whose digits hold what a rule
// redacts (a card number written as a JSON number), else f. It reads the
// number as JSON writes it: an integer, or one with a fraction
// ("41111111111.11111", which a reader sees as a dotted card), when its
// integer part has at least ten digits (smaller ones cannot hold a card
// beside the float noise of amounts); and, at 1e19 and beyond, where the
// JSON form ends in zeros the value does not hold, its significant digits
// ("4.111111111111111e+20" holds 4111111111111111).
func redactNumber(f float64, rules []Redactor) (any, bool) {
	a := math.Abs(f)
	if len(rules) == 0 || a < 1e9 || math.IsInf(f, 0) || math.IsNaN(f) {
		return f, false
	}
	if _, c := redactString(strconv.FormatFloat(f, 'f', -1, 64), rules); c {
		return Redacted, true
	}
	if a >= 1e19 {
		e := strconv.FormatFloat(a, 'e', -1, 64)
		mant, _, _ := strings.Cut(e, "e")
		if _, c := redactString(strings.Replace(mant, ".", "", 1), rules); c {
			return Redacted, true
		}
	}
	return f, false
}

// redactMap redacts values and keys. A key a rule changes takes its
// redacted form; keys that would collide are numbered ("[REDACTED#2]"),
// in the order of the original keys, so the result is deterministic.
func redactMap(x map[string]any, rules []Redactor, secretKeys bool) (any, bool) {
	out := make(map[string]any, len(x))
	changed := false
	type renamed struct {
		from, to string
		v        any
	}
	var moved []renamed
	for k, e := range x {
		nk, kc := redactString(k, rules)
		// The renamed key decides too, so that a second pass, which sees
		// only it, decides the same.
		secret := secretKeys && (sensitive.IsSecretKey(k) || kc && sensitive.IsSecretKey(nk))
		val, c := redactAny(e, rules, secretKeys, secret)
		changed = changed || c
		if kc {
			moved = append(moved, renamed{k, nk, val})
			continue
		}
		out[k] = val
	}
	if len(moved) == 0 {
		return out, changed
	}
	slices.SortFunc(moved, func(a, b renamed) int { return strings.Compare(a.from, b.from) })
	for _, m := range moved {
		name := m.to
		for n := 2; ; n++ {
			if _, taken := out[name]; !taken {
				break
			}
			name = numbered(m.to, n)
		}
		out[name] = m.v
	}
	return out, true
}

// numbered numbers the last marker of a redacted key.
func numbered(key string, n int) string {
	marker := "[REDACTED#" + strconv.Itoa(n) + "]"
	if i := strings.LastIndex(key, Redacted); i >= 0 {
		return key[:i] + marker + key[i+len(Redacted):]
	}
	return key + " " + marker
}

// redactString applies every rule to s until none changes it.
func redactString(s string, rules []Redactor) (string, bool) {
	if len(rules) == 0 || s == "" {
		return s, false
	}
	out, changed := applyRules(s, rules)
	if !changed {
		return s, false
	}
	for range maxRounds {
		next, again := applyRules(out, rules)
		if !again {
			return out, true
		}
		out = next
	}
	return Redacted, true
}

// applyRules applies each rule once, in order.
func applyRules(s string, rules []Redactor) (string, bool) {
	changed := false
	for _, r := range rules {
		var c bool
		if s, c = r(s); c {
			changed = true
		}
	}
	return s, changed
}

// joinKnown lists rule names for error messages.
func joinKnown(m map[string]Redactor) string {
	return strings.Join(sortedkeys.Of(m), ", ")
}
