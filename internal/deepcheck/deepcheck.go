// Package deepcheck is test support for the copies the module hands to
// outside code: Fill sets every member a value reaches, Shared names the
// first list, map or pointer two values share, Vandalize edits in place
// everything a value reaches, and Overrun writes past the length of
// every list it reaches (as an append does), as hostile outside code
// might. They
// work by reflection, so a member added to a type later is covered too.
//
// Only tests import this package.
package deepcheck

import (
	"fmt"
	"reflect"
)

// Fill sets every exported member v reaches to a value that is not its
// zero value: strings, numbers and bools, one-element lists, one-member
// maps (a map of interface values holds an object nesting a list and an
// object), and pointers to filled values. v must be settable.
func Fill(v reflect.Value) {
	switch v.Kind() {
	case reflect.String:
		v.SetString("s")
	case reflect.Int, reflect.Int64:
		v.SetInt(7)
	case reflect.Float64:
		v.SetFloat(0.5)
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				Fill(v.Field(i))
			}
		}
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		Fill(p.Elem())
		v.Set(p)
	case reflect.Slice:
		s := reflect.MakeSlice(v.Type(), 1, 1)
		Fill(s.Index(0))
		v.Set(s)
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		k := reflect.New(v.Type().Key()).Elem()
		Fill(k)
		if v.Type().Elem().Kind() == reflect.Interface {
			m.SetMapIndex(k, reflect.ValueOf(map[string]any{"list": []any{"x", map[string]any{"k": 1.5}}}))
		} else {
			e := reflect.New(v.Type().Elem()).Elem()
			Fill(e)
			m.SetMapIndex(k, e)
		}
		v.Set(m)
	case reflect.Interface:
		v.Set(reflect.ValueOf("x"))
	}
}

// Shared names, from path, the first list, map or pointer that a and b
// (values of one type) share; "" when they share none.
func Shared(path string, a, b reflect.Value) string {
	switch a.Kind() {
	case reflect.Struct:
		for i := range a.NumField() {
			if a.Type().Field(i).IsExported() {
				if s := Shared(path+"."+a.Type().Field(i).Name, a.Field(i), b.Field(i)); s != "" {
					return s
				}
			}
		}
	case reflect.Pointer, reflect.Slice, reflect.Map:
		if a.IsNil() || b.IsNil() {
			return ""
		}
		if (a.Kind() != reflect.Slice || a.Len() > 0) && a.Pointer() == b.Pointer() {
			return path
		}
		switch a.Kind() {
		case reflect.Pointer:
			return Shared(path, a.Elem(), b.Elem())
		case reflect.Slice:
			for i := range a.Len() {
				if s := Shared(fmt.Sprintf("%s[%d]", path, i), a.Index(i), b.Index(i)); s != "" {
					return s
				}
			}
		case reflect.Map:
			for _, k := range a.MapKeys() {
				if s := Shared(fmt.Sprintf("%s[%v]", path, k), a.MapIndex(k), b.MapIndex(k)); s != "" {
					return s
				}
			}
		}
	case reflect.Interface:
		if !a.IsNil() && !b.IsNil() && a.Elem().Kind() == b.Elem().Kind() {
			return Shared(path, a.Elem(), b.Elem())
		}
	}
	return ""
}

// Vandalize edits, in place, everything v reaches through pointers,
// lists, maps and interfaces: every settable string, number, bool and
// byte (a []byte's, a checkpoint's Data) changes, scalars held in
// interfaces become a string, and every map of interface values gains a
// member. What v shares with anything else is
// edited there too.
func Vandalize(v reflect.Value) {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			return
		}
		e := v.Elem()
		if v.Kind() == reflect.Interface && v.CanSet() {
			switch e.Kind() {
			case reflect.String, reflect.Bool, reflect.Float64, reflect.Int:
				v.Set(reflect.ValueOf("vandalized"))
				return
			}
		}
		Vandalize(e)
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				Vandalize(v.Field(i))
			}
		}
	case reflect.Slice, reflect.Array:
		for i := range v.Len() {
			Vandalize(v.Index(i))
		}
	case reflect.Map:
		if v.IsNil() {
			return
		}
		for _, k := range v.MapKeys() {
			e := reflect.New(v.Type().Elem()).Elem()
			e.Set(v.MapIndex(k))
			Vandalize(e)
			v.SetMapIndex(k, e)
		}
		if v.Type().Key().Kind() == reflect.String && v.Type().Elem().Kind() == reflect.Interface {
			v.SetMapIndex(reflect.ValueOf("vandalized").Convert(v.Type().Key()), reflect.ValueOf(true))
		}
	case reflect.String:
		if v.CanSet() {
			v.SetString(v.String() + "~vandalized")
		}
	case reflect.Int, reflect.Int64:
		if v.CanSet() {
			v.SetInt(v.Int() + 1)
		}
	case reflect.Float64:
		if v.CanSet() {
			v.SetFloat(v.Float() + 1)
		}
	case reflect.Bool:
		if v.CanSet() {
			v.SetBool(!v.Bool())
		}
	case reflect.Uint8:
		if v.CanSet() {
			v.SetUint(v.Uint() ^ 0x20)
		}
	}
}

// Overrun writes, in place, into the room past the length of every list
// v reaches (up to its capacity), as outside code appending to a list it
// was handed does: each element there is filled (Fill; a byte is
// flipped). What v shares that room with (another party's longer list
// over the same array) changes there too. Lists are followed through
// pointers, structs, maps and interfaces; their elements within their
// length are not edited.
func Overrun(v reflect.Value) {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			Overrun(v.Elem())
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				Overrun(v.Field(i))
			}
		}
	case reflect.Slice:
		if v.IsNil() {
			return
		}
		room := v.Slice(v.Len(), v.Cap())
		for i := range room.Len() {
			e := room.Index(i)
			if e.Kind() == reflect.Uint8 {
				e.SetUint(e.Uint() ^ 0x20)
				continue
			}
			Fill(e)
		}
		for i := range v.Len() {
			Overrun(v.Index(i))
		}
	case reflect.Array:
		for i := range v.Len() {
			Overrun(v.Index(i))
		}
	case reflect.Map:
		for it := v.MapRange(); it.Next(); {
			// A map's value is a copy: its lists share their arrays.
			e := reflect.New(v.Type().Elem()).Elem()
			e.Set(it.Value())
			Overrun(e)
		}
	}
}
