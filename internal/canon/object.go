package canon

// Object writes one JSON object's members, in the order given, as the
// canonical form a hand-written writer (an Appender) produces: the caller
// gives the members in RFC 8785 order, and its tests hold the bytes to
// [JSON]. A member's key is given as it is written, quoted and with its
// colon (`"name":`), so writing it is one copy; keys are the caller's
// constants and need no escaping.
//
// The first error (a number JSON cannot hold, a value that is not
// canonicalizable) is kept: later members are skipped or written without
// their value, and [Object.Close] returns the error instead of the bytes.
type Object struct {
	// B is the bytes written so far; a caller writing a member's value
	// itself (after [Object.Key]) appends to it.
	B   []byte
	n   int
	err error
}

// NewObject starts an object at the end of dst. The zero Object writes
// members without the opening brace (a run of members another object
// will hold, as [Object.Members] takes).
func NewObject(dst []byte) Object { return Object{B: append(dst, '{')} }

// Key starts a member: k is the member's name written as JSON with its
// colon. The caller writes the value to B.
func (o *Object) Key(k string) {
	if o.n > 0 {
		o.B = append(o.B, ',')
	}
	o.n++
	o.B = append(o.B, k...)
}

// Members writes members already encoded (`"a":1,"b":2`), which sort
// together at this place.
func (o *Object) Members(m string) { o.Key(m) }

// Str writes a string member.
func (o *Object) Str(k, v string) { o.Key(k); o.B = AppendString(o.B, v) }

// StrOmit writes a string member unless it is empty (omitempty).
func (o *Object) StrOmit(k, v string) {
	if v != "" {
		o.Str(k, v)
	}
}

// StrPtr writes a *string member, nil as null.
func (o *Object) StrPtr(k string, v *string) {
	o.Key(k)
	if v == nil {
		o.B = append(o.B, "null"...)
		return
	}
	o.B = AppendString(o.B, *v)
}

// Strings writes a []string member, nil as null.
func (o *Object) Strings(k string, v []string) {
	o.Key(k)
	o.B = AppendStrings(o.B, v)
}

// StringsOmit writes a []string member unless it is empty (omitempty).
func (o *Object) StringsOmit(k string, v []string) {
	if len(v) > 0 {
		o.Strings(k, v)
	}
}

// Int writes an integer member; one beyond ±MaxSafeInteger is the
// object's error.
func (o *Object) Int(k string, v int64) {
	o.Key(k)
	if o.err != nil {
		return
	}
	o.B, o.err = AppendInt(o.B, v)
}

// Float writes a number member; NaN and the infinities are the object's
// error.
func (o *Object) Float(k string, v float64) {
	o.Key(k)
	if o.err != nil {
		return
	}
	o.B, o.err = AppendFloat(o.B, v)
}

// Bool writes a boolean member.
func (o *Object) Bool(k string, v bool) { o.Key(k); o.B = AppendBool(o.B, v) }

// Value writes any value's member; raw, when not nil, is the value's
// canonical form already written.
func (o *Object) Value(k string, v any, raw []byte) {
	o.Key(k)
	if o.err != nil {
		return
	}
	if raw != nil {
		o.B = append(o.B, raw...)
		return
	}
	o.B, o.err = AppendValue(o.B, v)
}

// With writes a member whose value f appends.
func (o *Object) With(k string, f func(dst []byte) ([]byte, error)) {
	o.Key(k)
	if o.err != nil {
		return
	}
	o.B, o.err = f(o.B)
}

// Put keeps what an append function returned for the value of the
// member just started (o.Put(f(o.B))): its bytes, or its error. After
// the object's first error, it keeps nothing.
func (o *Object) Put(b []byte, err error) {
	switch {
	case o.err != nil:
	case err != nil:
		o.err = err
	default:
		o.B = b
	}
}

// Fail keeps err as the object's error unless it has one.
func (o *Object) Fail(err error) {
	if o.err == nil {
		o.err = err
	}
}

// Err is the object's first error.
func (o *Object) Err() error { return o.err }

// Close ends the object: its bytes, or its first error.
func (o *Object) Close() ([]byte, error) {
	if o.err != nil {
		return nil, o.err
	}
	return append(o.B, '}'), nil
}

// AppendStrings appends a []string's canonical form, nil as null.
func AppendStrings(dst []byte, v []string) []byte {
	if v == nil {
		return append(dst, "null"...)
	}
	dst = append(dst, '[')
	for i, s := range v {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = AppendString(dst, s)
	}
	return append(dst, ']')
}
