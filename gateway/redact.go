package gateway

import (
	"fmt"
	"math"
	"reflect"
	"regexp"
	"slices"
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
// string Redacted). Options.Redactors adds or replaces rules. The
// built-in "secret" rule applies to every run's results whatever rules
// its packs name; the others apply when a pack names them.
func BuiltinRedactors() map[string]Redactor {
	m := make(map[string]Redactor, 7)
	for _, name := range sensitive.RuleNames() {
		if r, ok := namedRules[name]; ok {
			m[name] = r
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

// The other built-in rules, each a function of its own: every closure of
// one literal shares its code, so only a function of its own can be told
// from a host's rule by identity (see builtinSet).
func redactCreditCard(s string) (string, bool) { return sensitive.Redact(s, ruleSets[0]) }
func redactPAN(s string) (string, bool)        { return sensitive.Redact(s, ruleSets[1]) }
func redactIBAN(s string) (string, bool)       { return sensitive.Redact(s, ruleSets[2]) }
func redactEmail(s string) (string, bool)      { return sensitive.Redact(s, ruleSets[3]) }
func redactPhone(s string) (string, bool)      { return sensitive.Redact(s, ruleSets[4]) }
func redactSSN(s string) (string, bool)        { return sensitive.Redact(s, ruleSets[5]) }

// namedRuleNames are the rules of the functions above, in ruleSets' order.
var namedRuleNames = [...]string{"credit_card", "pan", "iban", "email", "phone", "ssn"}

// ruleSets are the kinds each of namedRuleNames redacts.
var ruleSets = func() (sets [len(namedRuleNames)]sensitive.Set) {
	for i, name := range namedRuleNames {
		sets[i], _ = sensitive.Rule(name)
	}
	return sets
}()

// namedRules are the built-in rules that are functions of their own, by
// name.
var namedRules = map[string]Redactor{
	sensitive.SecretRule: redactSecrets,
	"credit_card":        redactCreditCard,
	"pan":                redactPAN,
	"iban":               redactIBAN,
	"email":              redactEmail,
	"phone":              redactPhone,
	"ssn":                redactSSN,
}

// builtinSets are the kinds each built-in rule function redacts, by its
// code pointer.
var builtinSets = func() map[uintptr]sensitive.Set {
	m := make(map[uintptr]sensitive.Set, len(namedRules))
	for name, r := range namedRules {
		set, _ := sensitive.Rule(name)
		m[reflect.ValueOf(r).Pointer()] = set
	}
	return m
}()

// builtinSet returns the kinds a built-in rule redacts, and false for any
// other rule (a host's, or a built-in replaced through Options.Redactors).
func builtinSet(r Redactor) (sensitive.Set, bool) {
	if r == nil {
		return 0, false
	}
	set, ok := builtinSets[reflect.ValueOf(r).Pointer()]
	return set, ok
}

// cleanSet returns the union of the kinds rules redact when every rule is
// a built-in one, and false otherwise. A string in which no detector of
// that union finds anything is one no rule of the list changes: each
// rule is sensitive.Redact with a subset of the union, which changes a
// string only where one of its detectors finds something.
func cleanSet(rules []Redactor) (sensitive.Set, bool) {
	var union sensitive.Set
	for _, r := range rules {
		set, ok := builtinSet(r)
		if !ok {
			return 0, false
		}
		union |= set
	}
	return union, len(rules) > 0
}

// cleanString reports whether no detector of set finds anything in s.
func cleanString(s string, set sensitive.Set) bool {
	_, found := sensitive.Detect(s, set)
	return !found
}

// maxCleanDepth bounds how deep cleanValue reads; deeper values take
// the general redaction.
const maxCleanDepth = 64

// cleanValue reports whether redacting v with rules whose kinds are set
// (cleanSet; the secret rule among them) changes nothing, and its
// redacted copy is therefore jsonv.Normalize(v): v holds only nil,
// booleans, strings, float64 numbers below 1e9 in magnitude (a larger
// one could be a card number), objects and arrays of those, no key that
// names a secret (IsSecretKey: its value would be redacted whatever it
// is), and no key or string in which a detector of set finds anything.
// It answers false for anything else, which the general redaction
// decides.
func cleanValue(v any, set sensitive.Set, depth int) bool {
	if depth > maxCleanDepth {
		return false
	}
	switch x := v.(type) {
	case nil, bool:
		return true
	case string:
		return cleanString(x, set)
	case float64:
		return math.Abs(x) < 1e9 // false for NaN and the infinities
	case map[string]any:
		for k, e := range x {
			if sensitive.IsSecretKey(k) || !cleanString(k, set) || !cleanValue(e, set, depth+1) {
				return false
			}
		}
		return true
	case []any:
		for _, e := range x {
			if !cleanValue(e, set, depth+1) {
				return false
			}
		}
		return true
	}
	return false
}

// cleanObject is cleanValue of the object m at depth 0 (a nil m is
// clean), and reports too whether m is non-nil and its members are all
// JSON scalars (nil, bool, string, float64: jsonv.Flat), read in the same
// look at each member.
func cleanObject(m map[string]any, set sensitive.Set) (flat, clean bool) {
	flat = m != nil
	for k, e := range m {
		if sensitive.IsSecretKey(k) || !cleanString(k, set) || !cleanValue(e, set, 1) {
			return false, false
		}
		flat = flat && jsonv.Scalar(e)
	}
	return flat, true
}

// cleanStrings reports whether no detector of set finds anything in any
// of s.
func cleanStrings(s []string, set sensitive.Set) bool {
	for _, e := range s {
		if !cleanString(e, set) {
			return false
		}
	}
	return true
}

var secretRulePC = reflect.ValueOf(redactSecrets).Pointer()

// isSecretRule reports whether r is the built-in secret rule.
func isSecretRule(r Redactor) bool { return r != nil && reflect.ValueOf(r).Pointer() == secretRulePC }

// keyAware reports whether the built-in secret rule is among rules.
func keyAware(rules []Redactor) bool { return slices.ContainsFunc(rules, isSecretRule) }

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
	return sensitive.RedactValue(v, rules, len(rules) > 0 && keyAware(rules))
}

// redactString applies every rule to s until none changes it.
func redactString(s string, rules []Redactor) (string, bool) { return sensitive.RedactString(s, rules) }

// joinKnown lists rule names for error messages.
func joinKnown(m map[string]Redactor) string {
	return strings.Join(sortedkeys.Of(m), ", ")
}
