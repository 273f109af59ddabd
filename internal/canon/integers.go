package canon

import (
	"cmp"
	"encoding"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
)

// checkIntegers returns the *IntegerError of the first integer beyond
// ±MaxSafeInteger that encoding/json would write as a JSON number for v.
// It is the general path's form of the check the reflective encoder makes
// as it writes: it follows what encoding/json writes (exported and
// embedded fields, json:"-", maps' values, not their keys) and skips what
// it writes as strings (the ",string" option, []byte) or hands to a
// MarshalJSON or MarshalText method, whose output is JSON of its own
// (a pointer-receiver method only where the value is addressable), and
// flattens untagged embedded structs as encoding/json does. It does not
// apply encoding/json's rules for conflicting or shadowed embedded
// fields: an unsafe integer in a field encoding/json drops is still
// refused, which fails closed. v
// has been marshalled already, so it holds no cycle.
func checkIntegers(v reflect.Value) error {
	if !v.IsValid() {
		return nil
	}
	t := v.Type()
	tf := flagsOf(t)
	if tf&(isMarshaler|isTextMarshaler|isAppender) != 0 {
		return nil
	}
	// A method on *T applies only where encoding/json can take the
	// value's address (through a pointer, a slice, an addressable
	// struct): a T passed or held by value is written field by field.
	if tf&(ptrMarshaler|ptrTextMarshaler) != 0 && v.CanAddr() {
		return nil
	}
	switch v.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		if i := v.Int(); i > MaxSafeInteger || i < -MaxSafeInteger {
			return unsafeInt(i)
		}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		if u := v.Uint(); u > MaxSafeInteger {
			return unsafeUint(u)
		}
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			return checkIntegers(v.Elem())
		}
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			return nil // written as base64, or element by element by their own methods
		}
		fallthrough
	case reflect.Array:
		for i := 0; i < v.Len(); i++ {
			if err := checkIntegers(v.Index(i)); err != nil {
				return err
			}
		}
	case reflect.Map:
		// In the order the canonical form writes the members, so that of
		// several unsafe integers the same one is reported every time (a
		// map's own order changes from one range to the next).
		for _, k := range sortedMapKeys(v) {
			if err := checkIntegers(v.MapIndex(k)); err != nil {
				return err
			}
		}
	case reflect.Struct:
		return checkFields(v)
	}
	return nil
}

// checkFields checks the fields encoding/json writes for the struct v.
func checkFields(v reflect.Value) error {
	t := v.Type()
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() && !embeddedStruct(f) {
			continue // encoding/json writes neither
		}
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if hasOption(opts, "string") {
			continue // written as a JSON string
		}
		fv := v.Field(i)
		if embeddedStruct(f) && name == "" {
			// encoding/json flattens an untagged embedded struct: its
			// fields are written, never its own MarshalJSON or MarshalText
			// (a method promoted to v was handled at v).
			if fv.Kind() == reflect.Pointer {
				if fv.IsNil() {
					continue
				}
				fv = fv.Elem()
			}
			if err := checkFields(fv); err != nil {
				return err
			}
			continue
		}
		if err := checkIntegers(fv); err != nil {
			return err
		}
	}
	return nil
}

// hasOption reports whether a json tag's options (after the name) hold o.
func hasOption(opts, o string) bool {
	for opts != "" {
		var x string
		x, opts, _ = strings.Cut(opts, ",")
		if x == o {
			return true
		}
	}
	return false
}

// embeddedStruct reports whether f is an embedded struct (or pointer to
// one), whose exported fields encoding/json promotes even when the
// embedded type is unexported.
func embeddedStruct(f reflect.StructField) bool {
	t := f.Type
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return f.Anonymous && t.Kind() == reflect.Struct
}

// sortedMapKeys returns m's keys ordered by the member names encoding/json
// gives them (a string kind's value, a MarshalText method's text, an
// integer's decimal form), compared as the canonical form orders names,
// then byte by byte.
func sortedMapKeys(m reflect.Value) []reflect.Value {
	keys := m.MapKeys()
	names := make([]string, len(keys))
	for i, k := range keys {
		names[i] = mapKeyName(k)
	}
	idx := make([]int, len(keys))
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(a, b int) int {
		if c := compareUTF16(names[a], names[b]); c != 0 {
			return c
		}
		return cmp.Compare(names[a], names[b])
	})
	out := make([]reflect.Value, len(keys))
	for i, j := range idx {
		out[i] = keys[j]
	}
	return out
}

// mapKeyName is the member name encoding/json writes for the map key k.
func mapKeyName(k reflect.Value) string {
	if k.Kind() == reflect.String {
		return k.String()
	}
	if tm, ok := k.Interface().(encoding.TextMarshaler); ok {
		if k.Kind() == reflect.Pointer && k.IsNil() {
			return ""
		}
		if b, err := tm.MarshalText(); err == nil {
			return string(b)
		}
	}
	switch k.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return strconv.FormatInt(k.Int(), 10)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return strconv.FormatUint(k.Uint(), 10)
	}
	return fmt.Sprint(k.Interface())
}
