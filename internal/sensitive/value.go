package sensitive

import (
	"encoding/json"
	"maps"
	"math"
	"strconv"
	"strings"

	"slices"

	"github.com/contextos/contextos/internal/jsonv"
)

// maxRounds bounds the rounds of rules applied to one string; a string
// still changing after them is redacted whole (fail closed).
const maxRounds = 8

// RedactString applies every rule to s, in order, until none changes it
// (a string still changing after eight rounds becomes Redacted), and
// reports whether anything changed.
func RedactString[R ~func(string) (string, bool)](s string, rules []R) (string, bool) {
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
func applyRules[R ~func(string) (string, bool)](s string, rules []R) (string, bool) {
	changed := false
	for _, r := range rules {
		var c bool
		if s, c = r(s); c {
			changed = true
		}
	}
	return s, changed
}

// RedactValue returns a redacted, JSON-shaped copy of v: rules are
// applied to every string and map key and to every number that could be
// a card number; with secretKeys, the string and number values of
// secret-named members (IsSecretKey) become Redacted; a key a rule
// changes takes its redacted form, keys that would collide numbered
// ("[REDACTED#2]") in the order of the original keys; containers are
// copied (v is not modified) and values that are not JSON-shaped are
// normalized on the way. The result is deterministic, and redacting it
// again changes nothing. It reports whether redaction changed anything.
func RedactValue[R ~func(string) (string, bool)](v any, rules []R, secretKeys bool) (any, bool) {
	return redactAny(v, rules, secretKeys, false)
}

// secretRules is the Secrets set as a rule list.
var secretRules = []func(string) (string, bool){func(s string) (string, bool) { return Redact(s, Secrets) }}

// RedactSecrets is RedactValue with the secret detectors (Secrets) and
// secret-named members: what is redacted whatever rules a pack names.
// A value with no secret is returned as it is (not copied), after a
// check that allocates nothing for JSON-shaped values.
func RedactSecrets(v any) (any, bool) {
	if !hasSecrets(v, false, 0) {
		return v, false
	}
	return RedactValue(v, secretRules, true)
}

// hasSecrets reports whether RedactSecrets may change v (underSecret: v is
// the value of a secret-named member). It answers true for what it does
// not read without allocating (a large number, a value that is not
// JSON-shaped, nesting beyond the walker's bound): RedactSecrets then
// decides.
func hasSecrets(v any, underSecret bool, depth int) bool {
	if depth > maxSecretDepth {
		return true
	}
	switch x := v.(type) {
	case nil, bool:
		return false
	case string:
		if underSecret {
			return x != "" && x != Redacted
		}
		_, found := Detect(x, Secrets)
		return found
	case float64:
		return underSecret || math.Abs(x) >= 1e9 || math.IsNaN(x)
	case int:
		return underSecret || x >= 1e9 || x <= -1e9
	case int64:
		return underSecret || x >= 1e9 || x <= -1e9
	case json.Number:
		if underSecret {
			return true
		}
		_, found := Detect(x.String(), Secrets)
		// A number written short may still be large ("1E70"): what
		// decides is its value, as redactNumber reads it.
		f, err := x.Float64()
		return found || len(x) >= 10 || err == nil && math.Abs(f) >= 1e9
	case map[string]any:
		for k, e := range x {
			if _, found := Detect(k, Secrets); found {
				return true
			}
			if hasSecrets(e, IsSecretKey(k), depth+1) {
				return true
			}
		}
		return false
	case []any:
		for _, e := range x {
			if hasSecrets(e, underSecret, depth+1) {
				return true
			}
		}
		return false
	case []string:
		for _, e := range x {
			if hasSecrets(e, underSecret, depth+1) {
				return true
			}
		}
		return false
	}
	return true
}

// maxSecretDepth bounds how deep hasSecrets reads before it leaves the
// value to RedactSecrets.
const maxSecretDepth = 64

// redactAny is RedactValue; underSecret says whether v is the value of a
// secret-named member.
func redactAny[R ~func(string) (string, bool)](v any, rules []R, secretKeys, underSecret bool) (any, bool) {
	switch x := v.(type) {
	case nil, bool:
		return x, false
	case string:
		if underSecret && x != "" && x != Redacted {
			return Redacted, true
		}
		return RedactString(x, rules)
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
			return RedactString(x.String(), rules)
		}
		if _, c := RedactString(x.String(), rules); c {
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
func redactNumber[R ~func(string) (string, bool)](f float64, rules []R) (any, bool) {
	a := math.Abs(f)
	if len(rules) == 0 || a < 1e9 || math.IsInf(f, 0) || math.IsNaN(f) {
		return f, false
	}
	if _, c := RedactString(strconv.FormatFloat(f, 'f', -1, 64), rules); c {
		return Redacted, true
	}
	if a >= 1e19 {
		e := strconv.FormatFloat(a, 'e', -1, 64)
		mant, _, _ := strings.Cut(e, "e")
		if _, c := RedactString(strings.Replace(mant, ".", "", 1), rules); c {
			return Redacted, true
		}
	}
	return f, false
}

// redactMap redacts values and keys. A key a rule changes takes its
// redacted form; keys that would collide are numbered ("[REDACTED#2]"),
// in the order of the original keys, so the result is deterministic.
//
// The copy starts as the map's own copy (maps.Clone copies its table
// without hashing a key again): a member whose key stays and whose value
// is a JSON scalar that redaction leaves as it is (nil, a bool, a string
// or a float64, which an interface holds by value) is already its own
// there; every other member's value is set again, and a renamed key is
// taken out before it is put back under its new name.
func redactMap[R ~func(string) (string, bool)](x map[string]any, rules []R, secretKeys bool) (any, bool) {
	var out map[string]any
	if x == nil {
		out = map[string]any{}
	} else {
		out = maps.Clone(x)
	}
	changed := false
	type renamed struct {
		from, to string
		v        any
	}
	var moved []renamed
	for k, e := range x {
		nk, kc := RedactString(k, rules)
		// The renamed key decides too, so that a second pass, which sees
		// only it, decides the same.
		secret := secretKeys && (IsSecretKey(k) || kc && IsSecretKey(nk))
		val, c := redactAny(e, rules, secretKeys, secret)
		changed = changed || c
		if kc {
			delete(out, k)
			moved = append(moved, renamed{k, nk, val})
			continue
		}
		if c || !jsonv.Scalar(e) { // redactAny returns an unchanged scalar itself
			out[k] = val
		}
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
