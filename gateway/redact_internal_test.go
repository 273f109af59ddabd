package gateway

import (
	"encoding/json"
	"reflect"
	"testing"
)

// redactValue copies, normalizes and redacts in one pass: what it returns
// is what normalizing and then redacting returned, and the input is left
// as it was.
func TestRedactValueNormalizes(t *testing.T) {
	type note struct {
		Text string `json:"text"`
		N    int    `json:"n"`
	}
	const card = "4111111111111111"
	rules := []Redactor{cardRedactor}
	for _, c := range []struct {
		name    string
		in      any
		want    any
		changed bool
	}{
		{"nil map", map[string]any(nil), map[string]any{}, false},
		{"nil slice", []any(nil), []any{}, false},
		{"plain", map[string]any{"a": "x", "b": 1.5, "c": true, "d": nil}, map[string]any{"a": "x", "b": 1.5, "c": true, "d": nil}, false},
		{"ints", map[string]any{"i": 3, "j": int64(-4), "u": uint(5)}, map[string]any{"i": 3.0, "j": -4.0, "u": 5.0}, false},
		{"number", []any{json.Number("7.25"), json.Number("card " + card)}, []any{7.25, "card " + Redacted}, true},
		{"strings", map[string]any{"s": []string{"ok", "card " + card}}, map[string]any{"s": []any{"ok", "card " + Redacted}}, true},
		{"struct", map[string]any{"n": note{Text: card, N: 2}}, map[string]any{"n": map[string]any{"text": Redacted, "n": 2.0}}, true},
		{"nested", []any{map[string]any{"k": []any{card}}}, []any{map[string]any{"k": []any{Redacted}}}, true},
	} {
		before, _ := json.Marshal(c.in)
		got, changed := redactValue(c.in, rules)
		if !reflect.DeepEqual(got, c.want) || changed != c.changed {
			t.Errorf("%s: redactValue = %#v, %v; want %#v, %v", c.name, got, changed, c.want, c.changed)
		}
		if after, _ := json.Marshal(c.in); string(after) != string(before) {
			t.Errorf("%s: the input changed: %s → %s", c.name, before, after)
		}
	}
}
