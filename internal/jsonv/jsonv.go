// Package jsonv owns the normalization of Go values into JSON-shaped values
// (the form policy documents and tool arguments are evaluated, validated
// and hashed in), and the one writer of a JSON string as encoding/json
// writes it (AppendString), which the wire envelopes and the checkpoint
// encoder share.
package jsonv

import (
	"encoding/json"
	"maps"
	"math"
	"slices"
	"strconv"
)

// MaxDepth bounds the nesting Normalize and Finite follow. A container
// nested deeper (a cyclic map or slice a Go caller built, say) has no JSON
// form: Normalize makes it nil and Finite reports false, instead of
// recursing until the stack overflows.
const MaxDepth = 1000

// Normalize returns v as a JSON-shaped value: nil, bool, string, float64,
// map[string]any and []any, copying containers. Other values go through
// their JSON form; a value with no JSON form (a cycle, nesting beyond
// MaxDepth) becomes nil.
func Normalize(v any) any { return normalize(v, 0) }

func normalize(v any, depth int) any {
	if depth > MaxDepth {
		return nil
	}
	switch x := v.(type) {
	case nil, bool, string, float64:
		return x
	case int:
		return float64(x)
	case int64:
		return float64(x)
	case int32:
		return float64(x)
	case float32:
		return float64(x)
	case uint:
		return float64(x)
	case uint64:
		return float64(x)
	case json.Number:
		f, err := x.Float64()
		if err != nil {
			return x.String()
		}
		return f
	case map[string]any:
		if x != nil && depth < MaxDepth && Flat(x) {
			// Every member is JSON-shaped already and shares nothing: the
			// map's own copy is the normalized copy (no rehashing).
			return maps.Clone(x)
		}
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = normalize(e, depth+1)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = normalize(e, depth+1)
		}
		return out
	case []string:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = e
		}
		return out
	}
	// Anything else goes through its JSON form.
	b, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	var out any
	if json.Unmarshal(b, &out) != nil {
		return nil
	}
	return out
}

// Finite reports whether every number in v is finite and v has a JSON
// form: JSON has no NaN or infinity, so a value that fails could be
// neither hashed nor recorded.
// It reads JSON-shaped values, Go numbers and json.Number (which must be a
// number literal) directly; any other value must encode as JSON.
func Finite(v any) bool { return finite(v, 0) }

func finite(v any, depth int) bool {
	if depth > MaxDepth {
		return false
	}
	switch x := v.(type) {
	case float64:
		return !math.IsNaN(x) && !math.IsInf(x, 0)
	case float32:
		return !math.IsNaN(float64(x)) && !math.IsInf(float64(x), 0)
	case json.Number:
		// It must be a JSON number literal ("NaN" and "abc" are not) that
		// is finite as a float64.
		if _, err := json.Marshal(x); err != nil {
			return false
		}
		f, _ := strconv.ParseFloat(string(x), 64) // ±Inf when out of range
		return !math.IsNaN(f) && !math.IsInf(f, 0)
	case map[string]any:
		for _, e := range x {
			if !finite(e, depth+1) {
				return false
			}
		}
	case []any:
		for _, e := range x {
			if !finite(e, depth+1) {
				return false
			}
		}
	case []float64:
		for _, e := range x {
			if !finite(e, depth+1) {
				return false
			}
		}
	case map[string]float64:
		for _, e := range x {
			if !finite(e, depth+1) {
				return false
			}
		}
	case nil, string, bool, int, int64, int32, uint, uint64, uint32:
	default:
		// Any other Go value (a struct, a pointer, a []map[string]any, a
		// channel): it must have a JSON form, or the result could not be
		// recorded.
		_, err := json.Marshal(x)
		return err == nil
	}
	return true
}

// Flat reports whether every member of m is a JSON scalar (nil, bool,
// string or float64): values an interface holds by value, so a copy of the
// map (maps.Clone, which copies its table without hashing a key again)
// shares nothing with m, and is what Normalize, Clone and CloneObject
// return for it.
func Flat(m map[string]any) bool {
	for _, e := range m {
		if !Scalar(e) {
			return false
		}
	}
	return true
}

// Scalar reports whether v is a JSON scalar an interface holds by value
// (nil, bool, string or float64): a copy of it shares nothing with it.
func Scalar(v any) bool {
	switch v.(type) {
	case nil, bool, string, float64:
		return true
	}
	return false
}

// Clone deep-copies the objects and arrays of a JSON-shaped value
// (map[string]any and []any; nil stays nil), lists of strings (a Go
// caller's []string, kept as one) and raw JSON; other values are copied
// as they are, their types kept.
func Clone(v any) any {
	switch x := v.(type) {
	case map[string]any:
		return CloneObject(x)
	case []any:
		if x == nil {
			return x
		}
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = Clone(e)
		}
		return out
	case []string:
		return slices.Clone(x)
	case json.RawMessage:
		return slices.Clone(x)
	}
	return v
}

// CloneObject is Clone of an object.
func CloneObject(m map[string]any) map[string]any {
	if m == nil {
		return nil
	}
	if Flat(m) {
		// Nothing a member holds can be shared: the map's own copy is a
		// deep copy.
		return maps.Clone(m)
	}
	out := make(map[string]any, len(m))
	for k, e := range m {
		out[k] = Clone(e)
	}
	return out
}

// CloneRaw copies a map of raw JSON values (nil stays nil), each value's
// bytes its own.
func CloneRaw(m map[string]json.RawMessage) map[string]json.RawMessage {
	if m == nil {
		return nil
	}
	out := make(map[string]json.RawMessage, len(m))
	for k, v := range m {
		out[k] = slices.Clone(v)
	}
	return out
}
