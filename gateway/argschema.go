package gateway

import (
	"math"
	"math/big"
	"reflect"
	"regexp"
	"regexp/syntax"
	"strings"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// shapeSchema is an argument schema of the shapes argument schemas
// usually take, checked without the general validator: objects with
// properties, required members and additionalProperties; members typed,
// enumerated (strings, booleans, null), bounded in length or by integer
// bounds, or matched to a pattern. The general validator allocates for
// every call and walks its keywords generically; this one reads the
// decoded arguments once and allocates nothing.
//
// It only ever answers "valid": shape.valid(v) reports true only when
// the general validator accepts v. Arguments it does not accept go to the
// general validator, which decides and words the problems; a schema that
// uses any keyword beyond those above has no shape (compileShape returns
// nil) and is always checked by the general validator.
type shapeSchema struct {
	anything bool      // the true schema
	nothing  bool      // the false schema: decided by the general validator
	types    jsonTypes // 0: any type
	enum     []any     // strings, booleans and nulls; nil with hasEnum false: no enum
	hasEnum  bool
	minLen   int // -1: none
	maxLen   int // -1: none
	pattern  jsonschema.Regexp
	// prefix, with literalPrefix, is the literal a pattern of the form
	// ^literal (Go's regexp syntax) matches at the start of a string: the
	// match is strings.HasPrefix (see anchoredLiteral).
	prefix        string
	literalPrefix bool
	bounds        []shapeBound
	required      []string
	props         map[string]*shapeSchema
	// extra is what members props does not name must be: nil for any
	// (additionalProperties absent or true).
	extra *shapeSchema
}

// shapeBound is a numeric bound that is an integer within ±(2^53−1): the
// general validator compares the shortest decimal form of a float64 with
// it, which for such a bound orders the same as the float64 itself.
type shapeBound struct {
	v  float64
	op boundOp
}

type boundOp uint8

const (
	boundMin   boundOp = iota // v >= bound
	boundMax                  // v <= bound
	boundExMin                // v > bound
	boundExMax                // v < bound
)

type jsonTypes uint8

const (
	typeNull jsonTypes = 1 << iota
	typeBoolean
	typeNumber
	typeInteger
	typeString
	typeArray
	typeObject
)

// shapeKeywords are the members of a compiled jsonschema.Schema a shape
// reads or may ignore (identifiers and annotations); a schema with any
// other exported member set has no shape. Reading the struct by
// reflection keeps a keyword a later version of the library adds out of
// the fast path until it is reviewed here.
var shapeKeywords = map[string]bool{
	"DraftVersion": true, "Location": true, "ID": true, "Anchor": true, "DynamicAnchor": true, "RecursiveAnchor": true,
	"Bool": true, "Types": true, "Enum": true,
	"Required": true, "Properties": true, "AdditionalProperties": true,
	"MinLength": true, "MaxLength": true, "Pattern": true,
	"Minimum": true, "Maximum": true, "ExclusiveMinimum": true, "ExclusiveMaximum": true,
	"Title": true, "Description": true, "Default": true, "Comment": true, "ReadOnly": true, "WriteOnly": true, "Examples": true, "Deprecated": true,
}

// maxShapeDepth bounds how deep a shape nests; a deeper schema has none.
const maxShapeDepth = 32

// compileShape returns the shape of s, or nil when s uses a keyword a
// shape does not check.
func compileShape(s *jsonschema.Schema) *shapeSchema {
	return shapeOf(s, 0)
}

func shapeOf(s *jsonschema.Schema, depth int) *shapeSchema {
	if s == nil || depth > maxShapeDepth {
		return nil
	}
	v := reflect.ValueOf(s).Elem()
	t := v.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		if f.IsExported() && !shapeKeywords[f.Name] && !v.Field(i).IsZero() {
			return nil
		}
	}
	sh := &shapeSchema{minLen: -1, maxLen: -1}
	if s.Bool != nil {
		sh.anything, sh.nothing = *s.Bool, !*s.Bool
		return sh
	}
	if s.Types != nil {
		for _, name := range s.Types.ToStrings() {
			bit, ok := map[string]jsonTypes{"null": typeNull, "boolean": typeBoolean, "number": typeNumber, "integer": typeInteger,
				"string": typeString, "array": typeArray, "object": typeObject}[name]
			if !ok {
				return nil
			}
			sh.types |= bit
		}
	}
	if s.Enum != nil {
		for _, e := range s.Enum.Values {
			switch e.(type) {
			case nil, bool, string:
			default:
				return nil
			}
		}
		sh.enum, sh.hasEnum = s.Enum.Values, true
	}
	if s.MinLength != nil {
		sh.minLen = *s.MinLength
	}
	if s.MaxLength != nil {
		sh.maxLen = *s.MaxLength
	}
	sh.pattern = s.Pattern
	sh.prefix, sh.literalPrefix = anchoredLiteral(s.Pattern)
	for _, b := range [...]struct {
		r  *big.Rat
		op boundOp
	}{{s.Minimum, boundMin}, {s.Maximum, boundMax}, {s.ExclusiveMinimum, boundExMin}, {s.ExclusiveMaximum, boundExMax}} {
		if b.r == nil {
			continue
		}
		f, ok := integerBound(b.r)
		if !ok {
			return nil
		}
		sh.bounds = append(sh.bounds, shapeBound{v: f, op: b.op})
	}
	sh.required = s.Required
	if len(s.Properties) > 0 {
		sh.props = make(map[string]*shapeSchema, len(s.Properties))
		for name, p := range s.Properties {
			if sh.props[name] = shapeOf(p, depth+1); sh.props[name] == nil {
				return nil
			}
		}
	}
	switch a := s.AdditionalProperties.(type) {
	case nil:
	case bool:
		if !a {
			sh.extra = &shapeSchema{nothing: true}
		}
	case *jsonschema.Schema:
		if sh.extra = shapeOf(a, depth+1); sh.extra == nil {
			return nil
		}
		if sh.extra.anything {
			sh.extra = nil
		}
	default:
		return nil
	}
	return sh
}

// integerBound returns r as a float64 when it is an integer within
// ±(2^53−1) (exactly a float64, and written exactly as the shortest
// decimal of that float64).
func integerBound(r *big.Rat) (float64, bool) {
	if !r.IsInt() || !r.Num().IsInt64() {
		return 0, false
	}
	n := r.Num().Int64()
	if n > 1<<53-1 || n < -(1<<53-1) {
		return 0, false
	}
	return float64(n), true
}

// valid reports whether the general validator certainly accepts v; false
// means only that the general validator must decide.
func (sh *shapeSchema) valid(v any) bool {
	if sh.anything {
		return true
	}
	if sh.nothing {
		return false
	}
	var t jsonTypes
	var num float64
	switch x := v.(type) {
	case nil:
		t = typeNull
	case bool:
		t = typeBoolean
	case string:
		t = typeString
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return false
		}
		t, num = typeNumber, x
	case map[string]any:
		t = typeObject
	case []any:
		t = typeArray
	default:
		return false // a Go value the general validator reads in its own way
	}
	// A number is an integer when it has no fraction: the shortest decimal
	// of a finite float64 is an integer exactly then.
	if sh.types != 0 && sh.types&t == 0 && !(t == typeNumber && sh.types&typeInteger != 0 && num == math.Trunc(num)) {
		return false
	}
	if sh.hasEnum {
		found := false
		switch t {
		case typeNull, typeBoolean, typeString:
			for _, e := range sh.enum {
				if e == v {
					found = true
					break
				}
			}
		}
		if !found {
			return false
		}
	}
	switch x := v.(type) {
	case string:
		if sh.minLen >= 0 || sh.maxLen >= 0 {
			n := utf8.RuneCountInString(x)
			if sh.minLen >= 0 && n < sh.minLen || sh.maxLen >= 0 && n > sh.maxLen {
				return false
			}
		}
		if sh.literalPrefix {
			if !strings.HasPrefix(x, sh.prefix) {
				return false
			}
		} else if sh.pattern != nil && !sh.pattern.MatchString(x) {
			return false
		}
	case float64:
		for _, b := range sh.bounds {
			switch {
			case b.op == boundMin && !(x >= b.v), b.op == boundMax && !(x <= b.v),
				b.op == boundExMin && !(x > b.v), b.op == boundExMax && !(x < b.v):
				return false
			}
		}
	case map[string]any:
		for _, name := range sh.required {
			if _, ok := x[name]; !ok {
				return false
			}
		}
		if sh.props == nil && sh.extra == nil {
			return true
		}
		for name, e := range x {
			if p, ok := sh.props[name]; ok {
				if !p.valid(e) {
					return false
				}
			} else if sh.extra != nil && !sh.extra.valid(e) {
				return false
			}
		}
	}
	return true
}

// anchoredLiteral returns the literal a pattern of Go's regexp syntax
// (the validator's own engine: a *regexp.Regexp) matches when it is only
// that literal anchored at the start of the text (^ord_, ^ord\.): such a
// pattern matches exactly the strings that start with the literal. Any
// other pattern, or another engine's, is matched by the pattern itself.
func anchoredLiteral(p jsonschema.Regexp) (string, bool) {
	re, ok := p.(*regexp.Regexp)
	if !ok || re == nil {
		return "", false
	}
	// regexp.Compile parses with syntax.Perl, as here.
	parsed, err := syntax.Parse(re.String(), syntax.Perl)
	if err != nil {
		return "", false
	}
	parsed = parsed.Simplify()
	if parsed.Op != syntax.OpConcat || len(parsed.Sub) != 2 {
		return "", false
	}
	anchor, lit := parsed.Sub[0], parsed.Sub[1]
	if anchor.Op != syntax.OpBeginText || lit.Op != syntax.OpLiteral || lit.Flags&syntax.FoldCase != 0 {
		return "", false
	}
	return string(lit.Rune), true
}
