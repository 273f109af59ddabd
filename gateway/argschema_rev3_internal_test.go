package gateway

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/contextos/contextos/internal/jsonv"
)

// genShapeSchema writes a random argument schema from the keywords a
// shape checks and a few it must leave to the general validator, nested
// up to depth.
func genShapeSchema(r *rand.Rand, depth int) string {
	if depth > 2 || r.IntN(8) == 0 {
		return [...]string{"true", "false", "{}"}[r.IntN(3)]
	}
	var kw []string
	types := []string{`"null"`, `"boolean"`, `"number"`, `"integer"`, `"string"`, `"array"`, `"object"`}
	switch r.IntN(4) {
	case 0:
	case 1:
		kw = append(kw, `"type":`+types[r.IntN(len(types))])
	default:
		n := 1 + r.IntN(3)
		var ts []string
		for range n {
			ts = append(ts, types[r.IntN(len(types))])
		}
		kw = append(kw, `"type":[`+strings.Join(ts, ",")+`]`)
	}
	nums := []string{"0", "-0", "1", "-1", "3", "10", "1e2", "100", "-3", "9007199254740991", "-9007199254740991", "2.0", "1.5", "1e400", "9007199254740993"}
	if r.IntN(3) == 0 {
		kw = append(kw, fmt.Sprintf(`"%s":%s`, [...]string{"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"}[r.IntN(4)], nums[r.IntN(len(nums))]))
	}
	if r.IntN(4) == 0 {
		kw = append(kw, fmt.Sprintf(`"%s":%s`, [...]string{"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"}[r.IntN(4)], nums[r.IntN(len(nums))]))
	}
	if r.IntN(4) == 0 {
		kw = append(kw, fmt.Sprintf(`"minLength":%d`, r.IntN(4)))
	}
	if r.IntN(4) == 0 {
		kw = append(kw, fmt.Sprintf(`"maxLength":%d`, r.IntN(4)))
	}
	if r.IntN(4) == 0 {
		kw = append(kw, `"pattern":`+[...]string{`"a"`, `"^a"`, `"^a$"`, `"^[a-z]+$"`, `"\\d"`, `"^.{2}$"`, `"ä"`}[r.IntN(7)])
	}
	if r.IntN(5) == 0 {
		enums := []string{`"a"`, `"ab"`, `true`, `false`, `null`, `1`, `1.0`, `"1"`, `[]`, `{}`}
		n := 1 + r.IntN(3)
		var es []string
		for range n {
			es = append(es, enums[r.IntN(len(enums))])
		}
		kw = append(kw, `"enum":[`+strings.Join(es, ",")+`]`)
	}
	if r.IntN(12) == 0 {
		kw = append(kw, `"const":`+[...]string{`"a"`, `1`, `null`}[r.IntN(3)])
	}
	if r.IntN(12) == 0 {
		kw = append(kw, [...]string{`"multipleOf":2`, `"minProperties":1`, `"maxProperties":1`, `"format":"date"`, `"dependentRequired":{"a":["b"]}`,
			`"unevaluatedProperties":false`, `"patternProperties":{"^a":{"type":"string"}}`, `"propertyNames":{"maxLength":1}`,
			`"items":{"type":"string"}`, `"minItems":1`, `"not":{"type":"string"}`, `"x-vendor":1`, `"$comment":"c"`, `"default":1`}[r.IntN(14)])
	}
	if r.IntN(2) == 0 {
		names := []string{"a", "b", "c"}
		var ps []string
		for _, n := range names {
			if r.IntN(2) == 0 {
				ps = append(ps, fmt.Sprintf(`%q:%s`, n, genShapeSchema(r, depth+1)))
			}
		}
		kw = append(kw, `"properties":{`+strings.Join(ps, ",")+`}`)
	}
	if r.IntN(3) == 0 {
		var rs []string
		for _, n := range []string{"a", "b", "c"} {
			if r.IntN(2) == 0 {
				rs = append(rs, fmt.Sprintf("%q", n))
			}
		}
		kw = append(kw, `"required":[`+strings.Join(rs, ",")+`]`)
	}
	if r.IntN(3) == 0 {
		kw = append(kw, `"additionalProperties":`+genShapeSchema(r, depth+1))
	}
	r.Shuffle(len(kw), func(i, j int) { kw[i], kw[j] = kw[j], kw[i] })
	return "{" + strings.Join(kw, ",") + "}"
}

// genShapeValue writes a random JSON value.
func genShapeValue(r *rand.Rand, depth int) string {
	switch k := r.IntN(10); {
	case k < 4 && depth < 3:
		var ms []string
		for _, n := range []string{"a", "b", "c", "d"} {
			if r.IntN(2) == 0 {
				ms = append(ms, fmt.Sprintf("%q:%s", n, genShapeValue(r, depth+1)))
			}
		}
		return "{" + strings.Join(ms, ",") + "}"
	case k == 4 && depth < 3:
		return "[" + genShapeValue(r, depth+1) + "]"
	case k == 5:
		return [...]string{`"a"`, `"ab"`, `"abc"`, `"äb"`, `"日本"`, `"1"`, `""`, `"a\u0000"`, `"xa"`, `"ab\n"`, `"\ud800"`, `"12"`}[r.IntN(12)]
	case k == 6:
		return [...]string{"true", "false", "null"}[r.IntN(3)]
	default:
		return [...]string{"0", "-0", "1", "1.0", "1e2", "100.0000000000001", "2", "3", "-3", "10", "10.5", "100", "101", "1.5", "-1",
			"9007199254740991", "9007199254740992", "9007199254740993", "1e400", "-1e400", "1e-400", "2.9999999999999996", "-2.9999999999999996",
			"99.99999999999999", "100.00000000000001", "1e300", "5e-324"}[r.IntN(27)]
	}
}

// TestShapeNeverAcceptsWhatTheValidatorRefuses is a differential property
// test of the shape fast path against the general validator over random
// schemas built from the keywords shapes check (and some they must not),
// under every draft the gateway compiles.
func TestShapeNeverAcceptsWhatTheValidatorRefuses(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 37))
	drafts := []string{"", `"$schema":"http://json-schema.org/draft-04/schema#",`, `"$schema":"http://json-schema.org/draft-06/schema#",`,
		`"$schema":"http://json-schema.org/draft-07/schema#",`, `"$schema":"https://json-schema.org/draft/2019-09/schema",`}
	shaped, accepted := 0, 0
	for range 6000 {
		src := genShapeSchema(r, 0)
		if src[0] == '{' {
			src = "{" + drafts[r.IntN(len(drafts))] + src[1:]
			src = strings.Replace(src, ",}", "}", 1)
		}
		s, err := compileSchema("t.x", json.RawMessage(src))
		if err != nil {
			continue
		}
		sh := compileShape(s)
		if sh == nil {
			continue
		}
		shaped++
		for range 20 {
			val := genShapeValue(r, 0)
			var v any
			d := json.NewDecoder(strings.NewReader(val))
			d.UseNumber()
			if d.Decode(&v) != nil {
				continue
			}
			args := jsonv.Normalize(v)
			if sh.valid(args) {
				accepted++
				if err := s.Validate(args); err != nil {
					t.Fatalf("schema %s, args %s: the shape accepts what the validator refuses: %v", src, val, err)
				}
			}
		}
	}
	if shaped < 500 || accepted < 500 {
		t.Fatalf("only %d schemas had a shape and %d values were accepted: the generator does not reach the fast path", shaped, accepted)
	}
	t.Logf("%d shaped schemas, %d accepted values", shaped, accepted)
}
