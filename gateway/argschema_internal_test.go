package gateway

import (
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/contextos/contextos/internal/jsonv"
)

// shapeSchemas have a shape: valid must agree with the general validator
// on every value (it may only ever answer "valid" when the validator
// does; agreeing on refusals too shows the fast path is taken).
var shapeSchemas = []string{
	`{"type":"object","required":["order_id"],"properties":{"order_id":{"type":"string"}},"additionalProperties":false}`,
	`{"type":"object","required":["order_id","amount_inr","currency"],"properties":{"order_id":{"type":"string","pattern":"^ord_"},"amount_inr":{"type":"number"},"currency":{"enum":["INR"]},"idempotency_key":{"type":"string"}}}`,
	`{"type":"object","properties":{"n":{"type":"integer","minimum":0,"maximum":10}}}`,
	`{"type":"object","properties":{"n":{"type":["number","null"],"exclusiveMinimum":-3,"exclusiveMaximum":9007199254740991}}}`,
	`{"type":"object","properties":{"s":{"type":"string","minLength":2,"maxLength":3}},"additionalProperties":{"type":"boolean"}}`,
	`{"type":"object","properties":{"e":{"enum":["a",true,null]},"any":true,"o":{"type":"object","required":["x"],"properties":{"x":{"type":"array"}}}}}`,
	`{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","title":"t","description":"d","properties":{"a":{"type":"string","default":"x","examples":["y"]}},"required":["a"]}`,
	`{"type":"object","properties":{"f":false}}`,
	`{"type":"object","additionalProperties":true}`,
	`{}`,
}

// noShapeSchemas use a keyword a shape does not check.
var noShapeSchemas = []string{
	`{"type":"object","properties":{"n":{"type":"number","minimum":0.5}}}`,
	`{"type":"object","properties":{"n":{"type":"number","maximum":9007199254740993}}}`,
	`{"type":"object","properties":{"n":{"enum":[1,2]}}}`,
	`{"type":"object","properties":{"n":{"const":"x"}}}`,
	`{"type":"object","properties":{"n":{"multipleOf":2}}}`,
	`{"type":"object","properties":{"a":{"type":"array","items":{"type":"string"}}}}`,
	`{"type":"object","patternProperties":{"^x":{"type":"string"}}}`,
	`{"type":"object","minProperties":1}`,
	`{"type":"object","propertyNames":{"maxLength":3}}`,
	`{"type":"object","allOf":[{"required":["a"]}]}`,
	`{"type":"object","oneOf":[{"required":["a"]},{"required":["b"]}]}`,
	`{"type":"object","not":{"required":["a"]}}`,
	`{"type":"object","if":{"required":["a"]},"then":{"required":["b"]}}`,
	`{"type":"object","dependentRequired":{"a":["b"]}}`,
	`{"type":"object","unevaluatedProperties":false}`,
	`{"$defs":{"s":{"type":"string"}},"type":"object","properties":{"a":{"$ref":"#/$defs/s"}}}`,
	`{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{"d":{"type":"string","format":"date"}}}`,
}

// shapeValues are argument objects as the gateway validates them
// (normalized JSON).
var shapeValues = []string{
	`{}`, `{"order_id":"ord_881"}`, `{"order_id":7}`, `{"order_id":"ord_881","x":1}`, `{"order_id":null}`,
	`{"order_id":"ord_1","amount_inr":1200,"currency":"INR"}`, `{"order_id":"x_1","amount_inr":1200,"currency":"INR"}`,
	`{"order_id":"ord_1","amount_inr":"1200","currency":"INR"}`, `{"order_id":"ord_1","amount_inr":1,"currency":"USD"}`,
	`{"order_id":"ord_1","amount_inr":1,"currency":"INR","idempotency_key":5}`,
	`{"n":0}`, `{"n":-0}`, `{"n":10}`, `{"n":10.5}`, `{"n":11}`, `{"n":-1}`, `{"n":5.000000000000001}`, `{"n":1e300}`, `{"n":-1e300}`,
	`{"n":-3}`, `{"n":-2.9999999999999996}`, `{"n":9007199254740991}`, `{"n":9007199254740990}`, `{"n":9007199254740992}`, `{"n":null}`, `{"n":"1"}`,
	`{"s":"ab"}`, `{"s":"a"}`, `{"s":"abcd"}`, `{"s":"äö"}`, `{"s":"日本語"}`, `{"s":"日本語x"}`, `{"s":"ab","b":true}`, `{"s":"ab","b":1}`,
	`{"e":"a"}`, `{"e":true}`, `{"e":null}`, `{"e":false}`, `{"e":"b"}`, `{"e":1}`, `{"e":["a"]}`, `{"e":{"a":1}}`,
	`{"any":[1,{"x":null}]}`, `{"o":{"x":[]}}`, `{"o":{"x":{}}}`, `{"o":{}}`, `{"o":[]}`,
	`{"a":"x"}`, `{"a":1}`, `{"f":1}`, `{"g":1}`, `{"d":"2026-01-01"}`, `{"d":"not a date"}`,
}

func decodeArgs(t testing.TB, s string) map[string]any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatal(err)
	}
	m, _ := jsonv.Normalize(v).(map[string]any)
	return m
}

func TestShapeAgreesWithValidator(t *testing.T) {
	for _, src := range shapeSchemas {
		s, err := compileSchema("t.x", json.RawMessage(src))
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		sh := compileShape(s)
		if sh == nil {
			t.Errorf("%s has no shape", src)
			continue
		}
		for _, val := range shapeValues {
			args := decodeArgs(t, val)
			want := s.Validate(args) == nil
			if got := sh.valid(args); got != want {
				t.Errorf("schema %s, args %s: shape valid %v, validator %v", src, val, got, want)
			}
		}
	}
	for _, src := range noShapeSchemas {
		s, err := compileSchema("t.x", json.RawMessage(src))
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		if compileShape(s) != nil {
			t.Errorf("%s has a shape; it uses a keyword shapes do not check", src)
		}
	}
}

// TestShapeRefusesGoValues: a value that is not normalized JSON (which the
// gateway never validates, but a shape must not judge) goes to the
// general validator.
func TestShapeRefusesGoValues(t *testing.T) {
	s, err := compileSchema("t.x", json.RawMessage(`{"type":"object","properties":{"n":{"type":"number"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	sh := compileShape(s)
	for _, v := range []any{map[string]any{"n": 1}, map[string]any{"n": math.NaN()}, map[string]any{"n": math.Inf(1)}, map[string]any{"n": []string{}}} {
		if sh.valid(v) {
			t.Errorf("shape accepts %#v", v)
		}
	}
}

// TestValidateArgsShapeProblems: arguments the shape does not accept get
// the general validator's problems, as before shapes.
func TestValidateArgsShapeProblems(t *testing.T) {
	s, err := compileSchema("t.x", json.RawMessage(shapeSchemas[1]))
	if err != nil {
		t.Fatal(err)
	}
	args := decodeArgs(t, `{"order_id":"x_1","amount_inr":"1","currency":"USD"}`)
	with := validateArgs(s, compileShape(s), args, nil, "")
	without := validateArgs(s, nil, args, nil, "")
	if len(with) != 3 || len(with) != len(without) {
		t.Fatalf("problems %v, without the shape %v", with, without)
	}
	for i := range with {
		if with[i] != without[i] {
			t.Errorf("problem %d: %v, without the shape %v", i, with[i], without[i])
		}
	}
	if probs := validateArgs(s, compileShape(s), decodeArgs(t, `{"order_id":"ord_1","amount_inr":1,"currency":"INR"}`), nil, ""); probs != nil {
		t.Errorf("valid arguments: %v", probs)
	}
}

// FuzzShape: a shape never accepts arguments the general validator refuses.
func FuzzShape(f *testing.F) {
	for i, src := range shapeSchemas {
		f.Add(src, shapeValues[i%len(shapeValues)])
	}
	for i, val := range shapeValues {
		f.Add(shapeSchemas[i%len(shapeSchemas)], val)
	}
	f.Fuzz(func(t *testing.T, src, val string) {
		if !strings.HasPrefix(strings.TrimSpace(src), "{") {
			return
		}
		s, err := compileSchema("t.x", json.RawMessage(src))
		if err != nil {
			return
		}
		sh := compileShape(s)
		var v any
		if sh == nil || json.Unmarshal([]byte(val), &v) != nil {
			return
		}
		args := jsonv.Normalize(v)
		if sh.valid(args) {
			if err := s.Validate(args); err != nil {
				t.Fatalf("schema %s, args %s: the shape accepts what the validator refuses: %v", src, val, err)
			}
		}
	})
}
