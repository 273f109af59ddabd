// Package wire owns strict decoding of the project's JSON documents:
// case-sensitive field names, unknown fields refused on closed types,
// additive fields preserved on open ones, duplicate member names and
// invalid UTF-8 refused ([CheckStrict]), and every problem reported with
// its JSON path.
//
// encoding/json matches object keys to struct fields case-insensitively and
// drops unknown keys; for governed input both are dangerous ("Tenant_ID"
// silently filling tenant_id, a misspelled budget field silently falling
// back to a default). [Decode] walks the document against the Go type first
// and refuses such keys, then decodes.
//
// A field tagged `jsonschema:"required"` (the tag the published schemas
// are generated from) must be present.
//
// A struct type is closed unless it has a field tagged `wire:"extra"` of type
// map[string]json.RawMessage (with `json:"-"`); such a type is open, keeps
// unknown members in that field, and implements MarshalJSON/UnmarshalJSON
// with [MarshalOpen] and [UnmarshalOpen].
package wire

import (
	"bytes"
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/contextos/contextos/internal/sortedkeys"
	"io"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// Problem is one decoding problem at a JSON path such as
// "user.delegation.scopes[1]" ("" is the document itself).
type Problem struct {
	Path    string
	Message string
}

// Decode strictly decodes data into v (a non-nil pointer) and returns every
// problem found; no problems means v holds the document. A document that
// fails [CheckStrict] (a duplicate member, invalid UTF-8, nesting deeper
// than [MaxDepth]) is not decoded at all: its problems are returned with
// filled false.
//
// Values with a problem of their own (a wrong JSON type, an enum value the
// type's UnmarshalText refuses) are reported and left out, and the rest of
// the document is still decoded, so a caller can validate it and report
// those problems too in one pass. filled reports whether v was decoded at
// all (false only for malformed JSON). With problems, v must not be used
// for anything but reporting.
func Decode(data []byte, v any) (probs []Problem, filled bool) {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.IsNil() {
		return []Problem{{Message: "decode target must be a non-nil pointer"}}, false
	}
	// Duplicate members, invalid UTF-8 and deep nesting first: encoding/json
	// would silently keep the last duplicate and turn bad bytes into U+FFFD.
	strict, syntax := scan(data)
	if len(strict) > 0 && !syntax {
		return strict, false
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var doc any
	if err := dec.Decode(&doc); err != nil {
		return []Problem{{Message: "invalid JSON: " + syntaxMessage(err)}}, false
	}
	if _, err := dec.Token(); err != io.EOF {
		return []Problem{{Message: "invalid JSON: trailing data after the document"}}, false
	}
	if syntax { // the scan refused what encoding/json read: refuse
		return strict, false
	}
	c := checker{}
	doc = c.check(doc, rv.Type().Elem(), "")
	probs = c.probs
	if c.dropped {
		// Decode what remains; the dropped values are already reported.
		var err error
		if data, err = json.Marshal(doc); err != nil {
			return append(probs, Problem{Message: err.Error()}), false
		}
	}
	if err := json.Unmarshal(data, v); err != nil {
		p := unmarshalProblem(err)
		for _, q := range probs {
			if q.Path == p.Path {
				return probs, true
			}
		}
		return append(probs, p), true
	}
	return probs, true
}

func syntaxMessage(err error) string {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Sprintf("%s (at byte %d)", se.Error(), se.Offset)
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return "empty document"
	}
	return err.Error()
}

func unmarshalProblem(err error) Problem {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return Problem{Path: te.Field, Message: fmt.Sprintf("expected %s, got JSON %s", kindName(te.Type), te.Value)}
	}
	return Problem{Message: err.Error()}
}

func kindName(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Map, reflect.Struct:
		return "an object"
	}
	return t.String()
}

var (
	rawType             = reflect.TypeFor[json.RawMessage]()
	textUnmarshalerType = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// Join appends a member name or index to a JSON path.
func Join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

// Index appends an array index to a JSON path.
func Index(path string, i int) string { return path + "[" + strconv.Itoa(i) + "]" }

type checker struct {
	probs   []Problem
	dropped bool
}

func (c *checker) add(path, msg string) { c.probs = append(c.probs, Problem{Path: path, Message: msg}) }

// check reports the problems of val against t and returns val with the
// values that have a problem of their own removed (nil in their place).
func (c *checker) check(val any, t reflect.Type, path string) any {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if val == nil || t == rawType || t.Kind() == reflect.Interface {
		return val
	}
	// Enum-like string types validate their text here, so the error carries its path.
	if reflect.PointerTo(t).Implements(textUnmarshalerType) {
		if s, ok := val.(string); ok {
			if err := reflect.New(t).Interface().(encoding.TextUnmarshaler).UnmarshalText([]byte(s)); err != nil {
				c.add(path, err.Error())
				return c.drop()
			}
			return val
		}
	}
	switch t.Kind() {
	case reflect.Struct:
		obj, ok := val.(map[string]any)
		if !ok {
			return c.mismatch(path, "an object", val)
		}
		info := fieldsOf(t)
		for _, name := range info.required {
			if _, ok := obj[name]; !ok {
				c.add(Join(path, name), "is required")
			}
		}
		for _, k := range sortedkeys.Of(obj) {
			if ft, ok := info.exact[k]; ok {
				obj[k] = c.check(obj[k], ft, Join(path, k))
				continue
			}
			if want, ok := info.folded[strings.ToLower(k)]; ok {
				c.add(Join(path, k), fmt.Sprintf("unknown field %q: field names are case-sensitive (did you mean %q?)", k, want))
				delete(obj, k) // never let encoding/json fold it onto the real field
				c.dropped = true
				continue
			}
			if !info.open {
				c.add(Join(path, k), fmt.Sprintf("unknown field %q", k))
			}
		}
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 && t.Kind() == reflect.Slice {
			if _, ok := val.(string); !ok {
				return c.mismatch(path, "a base64 string", val)
			}
			return val
		}
		arr, ok := val.([]any)
		if !ok {
			return c.mismatch(path, "an array", val)
		}
		for i, e := range arr {
			arr[i] = c.check(e, t.Elem(), Index(path, i))
		}
	case reflect.Map:
		obj, ok := val.(map[string]any)
		if !ok {
			return c.mismatch(path, "an object", val)
		}
		for _, k := range sortedkeys.Of(obj) {
			obj[k] = c.check(obj[k], t.Elem(), Join(path, k))
		}
	case reflect.String:
		if _, ok := val.(string); !ok {
			return c.mismatch(path, "a string", val)
		}
	case reflect.Bool:
		if _, ok := val.(bool); !ok {
			return c.mismatch(path, "a boolean", val)
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n, ok := val.(json.Number)
		if !ok {
			return c.mismatch(path, "an integer", val)
		}
		if _, err := strconv.ParseInt(string(n), 10, t.Bits()); err != nil {
			c.add(path, fmt.Sprintf("expected an integer that fits in %d bits, got %s", t.Bits(), clipNum(n)))
			return c.drop()
		}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		n, ok := val.(json.Number)
		if !ok {
			return c.mismatch(path, "a non-negative integer", val)
		}
		if _, err := strconv.ParseUint(string(n), 10, t.Bits()); err != nil {
			c.add(path, fmt.Sprintf("expected a non-negative integer that fits in %d bits, got %s", t.Bits(), clipNum(n)))
			return c.drop()
		}
	case reflect.Float32, reflect.Float64:
		n, ok := val.(json.Number)
		if !ok {
			return c.mismatch(path, "a number", val)
		}
		if _, err := strconv.ParseFloat(string(n), t.Bits()); err != nil {
			c.add(path, "number out of range")
			return c.drop()
		}
	}
	return val
}

func (c *checker) mismatch(path, want string, val any) any {
	c.add(path, "expected "+want+", got "+jsonKind(val))
	return c.drop()
}

func (c *checker) drop() any {
	c.dropped = true
	return nil
}

func clipNum(n json.Number) string {
	if len(n) > 32 {
		return string(n[:32]) + "…"
	}
	return string(n)
}

func jsonKind(v any) string {
	switch v.(type) {
	case map[string]any:
		return "an object"
	case []any:
		return "an array"
	case string:
		return "a string"
	case json.Number:
		return "a number"
	case bool:
		return "a boolean"
	}
	return "null"
}

type fieldInfo struct {
	exact    map[string]reflect.Type
	folded   map[string]string
	open     bool
	names    []string
	required []string // fields tagged jsonschema:"required", in declaration order
}

var fieldCache sync.Map // reflect.Type → *fieldInfo

func fieldsOf(t reflect.Type) *fieldInfo {
	if fi, ok := fieldCache.Load(t); ok {
		return fi.(*fieldInfo)
	}
	fi := &fieldInfo{exact: map[string]reflect.Type{}, folded: map[string]string{}}
	collect(t, fi)
	sort.Strings(fi.names)
	v, _ := fieldCache.LoadOrStore(t, fi)
	return v.(*fieldInfo)
}

func collect(t reflect.Type, fi *fieldInfo) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if f.Tag.Get("wire") == "extra" {
			fi.open = true
			continue
		}
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				collect(ft, fi)
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		fi.exact[name] = f.Type
		fi.folded[strings.ToLower(name)] = name
		fi.names = append(fi.names, name)
		if hasTagOption(f.Tag.Get("jsonschema"), "required") {
			fi.required = append(fi.required, name)
		}
	}
}

func hasTagOption(tag, opt string) bool {
	for _, o := range strings.Split(tag, ",") {
		if o == opt {
			return true
		}
	}
	return false
}

// IsOpen reports whether the struct type t keeps unknown members.
func IsOpen(t reflect.Type) bool {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t.Kind() == reflect.Struct && fieldsOf(t).open
}

// MarshalOpen marshals known (a value of an alias type without methods)
// and merges the extra members; a known member always wins over an extra
// one of the same name.
func MarshalOpen(known any, extra map[string]json.RawMessage) ([]byte, error) {
	b, err := json.Marshal(known)
	if err != nil || len(extra) == 0 {
		return b, err
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	for k, v := range extra {
		if _, ok := m[k]; !ok {
			m[k] = v
		}
	}
	return json.Marshal(m) // map keys are written sorted
}

// UnmarshalOpen unmarshals data into known (a pointer to an alias type
// without methods) and returns the members that are not its fields, or nil.
//
// data must pass [CheckStrict]; otherwise the error is a *StrictError.
func UnmarshalOpen(data []byte, known any) (map[string]json.RawMessage, error) {
	if err := Strict(data); err != nil {
		return nil, err
	}
	if err := json.Unmarshal(data, known); err != nil {
		return nil, err
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, err
	}
	info := fieldsOf(reflect.TypeOf(known).Elem())
	for _, n := range info.names {
		delete(m, n)
	}
	if len(m) == 0 {
		return nil, nil
	}
	return m, nil
}
