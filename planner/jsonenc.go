package planner

import (
	"bytes"
	"encoding/json"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/contextos/contextos"
)

// marshal is compact JSON without HTML escaping, keys of maps sorted. A
// value that cannot be encoded (a NaN in a result) is encoded as null.
//
// The values a conversation encodes (tool arguments and outputs decoded
// from JSON or built by adapters, result documents, decision options)
// take a fast path (appendJSON) that writes what encoding/json writes,
// byte for byte; any other value, or one the fast path cannot encode,
// goes through encoding/json.
func marshal(v any) []byte {
	if b, ok := appendJSON(make([]byte, 0, 256), v); ok {
		return b
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return []byte("null")
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

// appendJSON appends v's JSON text as encoding/json (without HTML
// escaping) writes it; ok is false for a value it does not encode
// itself, which the caller encodes with encoding/json (dst is then
// garbage).
func appendJSON(dst []byte, v any) (_ []byte, ok bool) {
	switch x := v.(type) {
	case nil:
		return append(dst, "null"...), true
	case string:
		return appendString(dst, x), true
	case bool:
		return strconv.AppendBool(dst, x), true
	case int:
		return strconv.AppendInt(dst, int64(x), 10), true
	case int64:
		return strconv.AppendInt(dst, x, 10), true
	case int32:
		return strconv.AppendInt(dst, int64(x), 10), true
	case uint64:
		return strconv.AppendUint(dst, x, 10), true
	case float64:
		return appendFloat(dst, x)
	case json.Number:
		if x == "" {
			return append(dst, '0'), true
		}
		if !validNumber(string(x)) {
			return dst, false
		}
		return append(dst, x...), true
	case map[string]any:
		if x == nil {
			return append(dst, "null"...), true
		}
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		dst = append(dst, '{')
		for i, k := range keys {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendString(dst, k)
			dst = append(dst, ':')
			if dst, ok = appendJSON(dst, x[k]); !ok {
				return dst, false
			}
		}
		return append(dst, '}'), true
	case []any:
		if x == nil {
			return append(dst, "null"...), true
		}
		dst = append(dst, '[')
		for i, e := range x {
			if i > 0 {
				dst = append(dst, ',')
			}
			if dst, ok = appendJSON(dst, e); !ok {
				return dst, false
			}
		}
		return append(dst, ']'), true
	case []string:
		if x == nil {
			return append(dst, "null"...), true
		}
		return appendStrings(dst, x), true
	case resultDoc:
		return appendResultDoc(dst, &x)
	case contextos.DecisionOption:
		return appendDecisionOption(dst, &x), true
	}
	return dst, false
}

// appendFloat writes f as encoding/json does; NaN and infinities have no
// JSON form (ok false).
func appendFloat(dst []byte, f float64) ([]byte, bool) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return dst, false
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	dst = strconv.AppendFloat(dst, f, format, -1, 64)
	if format == 'e' {
		// e-09 becomes e-9, as encoding/json writes it.
		if n := len(dst); n >= 4 && dst[n-4] == 'e' && dst[n-3] == '-' && dst[n-2] == '0' {
			dst[n-2] = dst[n-1]
			dst = dst[:n-1]
		}
	}
	return dst, true
}

// validNumber reports whether s is a JSON number (encoding/json refuses
// a json.Number that is not).
func validNumber(s string) bool {
	if s == "" {
		return false
	}
	if s[0] == '-' {
		s = s[1:]
		if s == "" {
			return false
		}
	}
	switch {
	case s[0] == '0':
		s = s[1:]
	case '1' <= s[0] && s[0] <= '9':
		s = strings.TrimLeft(s[1:], "0123456789")
	default:
		return false
	}
	if len(s) >= 2 && s[0] == '.' && '0' <= s[1] && s[1] <= '9' {
		s = strings.TrimLeft(s[2:], "0123456789")
	}
	if len(s) >= 2 && (s[0] == 'e' || s[0] == 'E') {
		s = s[1:]
		if s[0] == '+' || s[0] == '-' {
			s = s[1:]
			if s == "" {
				return false
			}
		}
		if s[0] < '0' || s[0] > '9' {
			return false
		}
		s = strings.TrimLeft(s, "0123456789")
	}
	return s == ""
}

// appendResultDoc writes d as encoding/json writes a resultDoc.
func appendResultDoc(dst []byte, d *resultDoc) (_ []byte, ok bool) {
	dst = append(dst, `{"status":`...)
	dst = appendString(dst, d.Status)
	if d.Output != nil {
		dst = append(dst, `,"output":`...)
		if dst, ok = appendJSON(dst, d.Output); !ok {
			return dst, false
		}
	}
	if e := d.Error; e != nil {
		dst = append(dst, `,"error":{"code":`...)
		dst = appendString(dst, e.Code)
		if e.Message != "" {
			dst = append(dst, `,"message":`...)
			dst = appendString(dst, e.Message)
		}
		dst = append(dst, `,"retryable":`...)
		dst = strconv.AppendBool(dst, e.Retryable)
		dst = append(dst, '}')
	}
	if d.Truncated {
		dst = append(dst, `,"truncated":true`...)
	}
	if d.OutputBytes != 0 {
		dst = append(dst, `,"output_bytes":`...)
		dst = strconv.AppendInt(dst, int64(d.OutputBytes), 10)
	}
	return append(dst, '}'), true
}

// appendDecisionOption writes d as encoding/json writes it.
func appendDecisionOption(dst []byte, d *contextos.DecisionOption) []byte {
	dst = append(dst, `{"decision_key":`...)
	dst = appendString(dst, d.DecisionKey)
	dst = append(dst, `,"allowed_outcomes":`...)
	if d.AllowedOutcomes == nil {
		dst = append(dst, "null"...)
	} else {
		dst = appendStrings(dst, d.AllowedOutcomes)
	}
	for _, f := range []struct {
		name string
		v    []string
	}{{"refusal_outcomes", d.RefusalOutcomes}, {"escalation_outcomes", d.EscalationOutcomes}, {"required_evidence", d.RequiredEvidence}} {
		if len(f.v) > 0 {
			dst = append(dst, ',')
			dst = appendString(dst, f.name)
			dst = append(dst, ':')
			dst = appendStrings(dst, f.v)
		}
	}
	return append(dst, '}')
}
