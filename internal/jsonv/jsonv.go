// Package jsonv owns the normalization of Go values into JSON-shaped values
// (the form policy documents and tool arguments are evaluated, validated
// and hashed in).
package jsonv

import "encoding/json"

// Normalize returns v as a JSON-shaped value: nil, bool, string, float64,
// map[string]any and []any, copying containers. Other values go through
// their JSON form; a value with no JSON form becomes nil.
func Normalize(v any) any {
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
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = Normalize(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = Normalize(e)
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
