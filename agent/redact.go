package agent

import (
	"bytes"
	"encoding/json"
	"maps"
	"slices"

	"github.com/contextos/contextos/internal/sensitive"
)

// Every event, completion and error a run gives passes the secret
// redactor (internal/sensitive, the catalogue the Tool Gateway redacts
// with): API keys, bearer and basic credentials, private keys, passwords
// in URLs and in key=value text, and base64-wrapped secrets are replaced
// with Redacted wherever a backend put them — an event's message and
// text, a completion's final text, every string (and member name) of an
// event's or a completion's data, and an error's message. A CLI that
// prints its API key inside a 401 error does not pass it on.

// Redacted replaces a secret in an event, a completion or an error.
const Redacted = sensitive.Redacted

// redactText returns s with every secret replaced by Redacted; s itself
// when it holds none (no allocation).
func redactText(s string) string {
	out, _ := sensitive.Redact(s, sensitive.Secrets)
	return out
}

// redactData returns data (bounded JSON, see boundData) with every secret
// in its strings and member names replaced by Redacted, and the string
// value of a member whose name says it holds a secret (api_key, token,
// password, …) replaced whole; data itself when nothing changed.
func redactData(data json.RawMessage) json.RawMessage {
	if len(data) == 0 || bytes.Equal(data, oversizeData) || bytes.Equal(data, invalidData) || !mayHoldSecret(string(data)) {
		return data
	}
	return redactDecoded(data)
}

// redactDecoded is redactData without its shortcut: data is decoded,
// every string walked, and encoded again when anything changed.
func redactDecoded(data json.RawMessage) json.RawMessage {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil {
		return invalidData
	}
	v, changed := redactValue(v, false)
	if !changed {
		return data
	}
	out, err := marshalNoEscape(v)
	if err != nil {
		return invalidData
	}
	// A redaction may lengthen a string: bound the result again.
	return boundData(out)
}

// mayHoldSecret reports whether compact JSON (boundData's output) may
// need redaction: it has a string with an escape (decoded, it may read
// differently), a string in which a secret is found, or a member whose
// name says it holds a secret. A string without escapes is its own
// decoded text, so for data without escapes the answer is exact, and the
// common case (facets, counts) is decided without decoding anything.
func mayHoldSecret(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] != '"' {
			continue
		}
		j := i + 1
		for j < len(s) && s[j] != '"' {
			if s[j] == '\\' {
				return true
			}
			j++
		}
		str := s[i+1 : min(j, len(s))]
		if _, found := sensitive.Detect(str, sensitive.Secrets); found {
			return true
		}
		if j+1 < len(s) && s[j+1] == ':' && sensitive.IsSecretKey(str) {
			return true
		}
		i = j
	}
	return false
}

// redactValue redacts the strings of a decoded JSON value; secretMember
// says the value is a member whose name names a secret.
func redactValue(v any, secretMember bool) (any, bool) {
	switch x := v.(type) {
	case string:
		if secretMember && x != "" && x != Redacted {
			return Redacted, true
		}
		out, changed := sensitive.Redact(x, sensitive.Secrets)
		return out, changed
	case []any:
		changed := false
		for i, e := range x {
			var c bool
			if x[i], c = redactValue(e, secretMember); c {
				changed = true
			}
		}
		return x, changed
	case map[string]any:
		changed := false
		for _, k := range slices.Sorted(maps.Keys(x)) {
			val, c := redactValue(x[k], sensitive.IsSecretKey(k))
			nk, kc := sensitive.Redact(k, sensitive.Secrets)
			if kc {
				delete(x, k)
				if _, taken := x[nk]; taken {
					// Two members whose names redact alike: the value kept
					// is the first in sorted order.
					changed = true
					continue
				}
			}
			x[nk] = val
			changed = changed || c || kc
		}
		return x, changed
	}
	return v, false
}

// redactedCompletion returns c bounded (Completion.bounded), its final
// text redacted before the bound cuts it (a cut never leaves part of a
// secret behind) and its data redacted.
func redactedCompletion(c Completion) Completion {
	c.FinalText = redactText(c.FinalText)
	c = c.bounded()
	c.Data = redactData(c.Data)
	return c
}
