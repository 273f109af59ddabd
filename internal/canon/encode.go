package canon

import (
	"encoding"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/gowebpki/jcs"
)

// errSlowPath makes the encoder hand a value back to the general path
// (encoding/json, then the canonical writer), which handles everything
// encoding/json does.
var errSlowPath = errors.New("canon: value needs the general path")

// appendValue writes the RFC 8785 form of a Go value directly, with
// encoding/json's semantics (field tags, omitempty, omitzero, Marshaler
// and TextMarshaler, []byte as base64, invalid UTF-8 as U+FFFD). It returns
// errSlowPath for what it does not handle (embedded structs, the ",string"
// option, non-string map keys other than integers and TextMarshalers),
// and the result is then computed the general way; FuzzEncodeMatchesSlow
// and TestEncodeMatchesSlow hold the two paths to the same bytes.
func appendValue(dst []byte, v reflect.Value) ([]byte, error) {
	if !v.IsValid() {
		return append(dst, "null"...), nil
	}
	return appendValueF(dst, v, flagsOf(v.Type()))
}

// appendValueF is appendValue with the type's flags already known.
func appendValueF(dst []byte, v reflect.Value, tf typeFlags) ([]byte, error) {
	t := v.Type()
	if tf&isAppender != 0 && (v.Kind() != reflect.Pointer || !v.IsNil()) {
		return v.Interface().(Appender).AppendCanonical(dst)
	}
	if tf&isOpen != 0 {
		// An open type's MarshalJSON writes its fields and its extension
		// members (internal/wire.MarshalOpen); written natively here.
		if v.Kind() == reflect.Pointer {
			if v.IsNil() {
				return append(dst, "null"...), nil
			}
			v = v.Elem()
		}
		return appendStruct(dst, v)
	}
	if tf&isMarshaler != 0 && (v.Kind() != reflect.Pointer || !v.IsNil()) {
		return appendMarshaler(dst, v.Interface().(json.Marshaler))
	}
	if tf&ptrMarshaler != 0 && v.Kind() != reflect.Pointer && v.CanAddr() {
		return appendMarshaler(dst, v.Addr().Interface().(json.Marshaler))
	}
	if tf&isTextMarshaler != 0 && (v.Kind() != reflect.Pointer || !v.IsNil()) {
		b, err := v.Interface().(encoding.TextMarshaler).MarshalText()
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrNotCanonicalizable, err)
		}
		return appendGoString(dst, string(b)), nil
	}
	if tf&ptrTextMarshaler != 0 && v.Kind() != reflect.Pointer && v.CanAddr() {
		b, err := v.Addr().Interface().(encoding.TextMarshaler).MarshalText()
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrNotCanonicalizable, err)
		}
		return appendGoString(dst, string(b)), nil
	}
	switch v.Kind() {
	case reflect.Bool:
		if v.Bool() {
			return append(dst, "true"...), nil
		}
		return append(dst, "false"...), nil
	case reflect.String:
		if t == numberType {
			return appendNumberLiteral(dst, v.String())
		}
		return appendGoString(dst, v.String()), nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return appendInt(dst, v.Int())
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		u := v.Uint()
		if u > MaxSafeInteger {
			return nil, unsafeUint(u)
		}
		return strconv.AppendUint(dst, u, 10), nil
	case reflect.Float32:
		f := v.Float()
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return nil, fmt.Errorf("%w: unsupported value %v", ErrNotCanonicalizable, f)
		}
		// encoding/json writes float32 with 32-bit precision; its text, read
		// back as a float64, is what the canonical form formats.
		g, _ := strconv.ParseFloat(strconv.FormatFloat(f, 'g', -1, 32), 64)
		return appendFloat(dst, g)
	case reflect.Float64:
		return appendFloat(dst, v.Float())
	case reflect.Interface:
		if v.IsNil() {
			return append(dst, "null"...), nil
		}
		if v.CanInterface() {
			return appendAny(dst, v.Elem().Interface())
		}
		return appendValue(dst, v.Elem())
	case reflect.Pointer:
		if v.IsNil() {
			return append(dst, "null"...), nil
		}
		return appendValue(dst, v.Elem())
	case reflect.Slice:
		if v.IsNil() {
			return append(dst, "null"...), nil
		}
		if et := t.Elem(); et.Kind() == reflect.Uint8 && flagsOf(et)&(isMarshaler|ptrTextMarshaler|isTextMarshaler) == 0 {
			return appendGoString(dst, base64.StdEncoding.EncodeToString(v.Bytes())), nil
		}
		fallthrough
	case reflect.Array:
		ef := flagsOf(t.Elem())
		dst = append(dst, '[')
		for i := 0; i < v.Len(); i++ {
			if i > 0 {
				dst = append(dst, ',')
			}
			var err error
			if dst, err = appendValueF(dst, v.Index(i), ef); err != nil {
				return nil, err
			}
		}
		return append(dst, ']'), nil
	case reflect.Map:
		if v.IsNil() {
			return append(dst, "null"...), nil
		}
		if v.CanInterface() {
			// The JSON-shaped maps records, steps and constraints hold are
			// written without reflection (appendMap's per-entry values):
			// the same bytes (TestEncodeMatchesSlow).
			switch m := v.Interface().(type) {
			case map[string]any:
				return appendAny(dst, m)
			case map[string]map[string]any:
				return appendObject(dst, m)
			}
		}
		return appendMap(dst, v)
	case reflect.Struct:
		return appendStruct(dst, v)
	}
	return nil, errSlowPath
}

// typeFlags caches what a type implements; reflect's Implements is too
// slow to ask per value.
type typeFlags uint16

const (
	isMarshaler typeFlags = 1 << iota
	ptrMarshaler
	isTextMarshaler
	ptrTextMarshaler
	isZeroerFlag
	ptrZeroer
	isOpen // a struct with a `wire:"extra"` extension map
	isAppender
	flagsKnown
)

var flagCache sync.Map // reflect.Type → typeFlags

func flagsOf(t reflect.Type) typeFlags {
	if f, ok := flagCache.Load(t); ok {
		return f.(typeFlags)
	}
	f := flagsKnown
	if st := t; st.Kind() == reflect.Struct || st.Kind() == reflect.Pointer && st.Elem().Kind() == reflect.Struct {
		if st.Kind() == reflect.Pointer {
			st = st.Elem()
		}
		if si := infoOf(st); si.extra >= 0 && !si.slow {
			f |= isOpen
		}
	}
	if t.Implements(appenderType) {
		f |= isAppender
	}
	pt := reflect.PointerTo(t)
	for _, c := range []struct {
		typ  reflect.Type
		self typeFlags
		ptr  typeFlags
	}{{marshalerType, isMarshaler, ptrMarshaler}, {textMarshalerType, isTextMarshaler, ptrTextMarshaler}, {isZeroerType, isZeroerFlag, ptrZeroer}} {
		if t.Implements(c.typ) {
			f |= c.self
		} else if t.Kind() != reflect.Pointer && pt.Implements(c.typ) {
			f |= c.ptr
		}
	}
	flagCache.Store(t, f)
	return f
}

var (
	appenderType      = reflect.TypeFor[Appender]()
	marshalerType     = reflect.TypeFor[json.Marshaler]()
	textMarshalerType = reflect.TypeFor[encoding.TextMarshaler]()
	numberType        = reflect.TypeFor[json.Number]()
)

func appendMarshaler(dst []byte, m json.Marshaler) ([]byte, error) {
	b, err := m.MarshalJSON()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNotCanonicalizable, err)
	}
	out, err := transform(b)
	if err != nil {
		return nil, fmt.Errorf("%w: MarshalJSON: %w", ErrNotCanonicalizable, err)
	}
	return append(dst, out...), nil
}

// appendInt writes an integer within ±MaxSafeInteger; beyond it the
// canonical form would be the nearest double's, another number: refused.
func appendInt(dst []byte, i int64) ([]byte, error) {
	if i > MaxSafeInteger || i < -MaxSafeInteger {
		return nil, unsafeInt(i)
	}
	return strconv.AppendInt(dst, i, 10), nil
}

func appendFloat(dst []byte, f float64) ([]byte, error) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return nil, fmt.Errorf("%w: unsupported value %v", ErrNotCanonicalizable, f)
	}
	if f == math.Trunc(f) && math.Abs(f) < 1e15 {
		return strconv.AppendInt(dst, int64(f), 10), nil // -0 becomes 0, as RFC 8785 says
	}
	s, err := jcs.NumberToJSON(f)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNotCanonicalizable, err)
	}
	return append(dst, s...), nil
}

func appendNumberLiteral(dst []byte, s string) ([]byte, error) {
	if s == "" {
		s = "0" // encoding/json writes an empty json.Number as 0
	}
	// A JSON number (not another literal), then its canonical form.
	if c := s[0]; c != '-' && (c < '0' || c > '9') || !json.Valid([]byte(s)) {
		return nil, fmt.Errorf("%w: invalid number literal %q", ErrNotCanonicalizable, s)
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return nil, fmt.Errorf("%w: invalid number literal %q", ErrNotCanonicalizable, s)
	}
	return appendFloat(dst, f)
}

// appendGoString writes a Go string the way encoding/json then the
// canonical writer would: each invalid UTF-8 byte becomes U+FFFD.
func appendGoString(dst []byte, s string) []byte {
	if plainASCII(s) { // printable ASCII with nothing to escape: copied as is

		dst = append(dst, '"')
		dst = append(dst, s...)
		return append(dst, '"')
	}
	if utf8.ValidString(s) {
		return appendString(dst, s)
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 {
			b.WriteRune(utf8.RuneError)
		} else {
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return appendString(dst, b.String())
}

// plainASCII reports whether s is printable ASCII without '"' or '\\',
// eight bytes at a time: a byte below 0x20, at or above 0x80, or equal to
// either quote character sets the high bit of its lane in one of the masks.
func plainASCII[T string | []byte](s T) bool {
	const (
		lo   = 0x0101010101010101
		high = 0x8080808080808080
	)
	for ; len(s) >= 8; s = s[8:] {
		t := s[:8] // a constant length: no bounds checks below
		w := uint64(t[0]) | uint64(t[1])<<8 | uint64(t[2])<<16 | uint64(t[3])<<24 |
			uint64(t[4])<<32 | uint64(t[5])<<40 | uint64(t[6])<<48 | uint64(t[7])<<56
		ctl := (w - 0x20*lo) & ^w // a lane below 0x20 (or at/above 0x80, caught next)
		quote := w ^ '"'*lo       // a zero lane where w has '"'
		bslash := w ^ '\\'*lo     // a zero lane where w has '\\'
		zero := (quote-lo)&^quote | (bslash-lo)&^bslash
		if (w|ctl|zero)&high != 0 {
			return false
		}
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= utf8.RuneSelf || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

type kv struct {
	key string
	val reflect.Value
}

func appendMap(dst []byte, v reflect.Value) ([]byte, error) {
	kt := v.Type().Key()
	entries := make([]kv, 0, v.Len())
	iter := v.MapRange()
	for iter.Next() {
		k := iter.Key()
		var key string
		switch {
		case kt.Kind() == reflect.String: // as encoding/json: string kinds are used directly, even TextMarshalers
			key = k.String()
		case flagsOf(kt)&isTextMarshaler != 0:
			b, err := k.Interface().(encoding.TextMarshaler).MarshalText()
			if err != nil {
				return nil, fmt.Errorf("%w: %w", ErrNotCanonicalizable, err)
			}
			key = string(b)
		case kt.Kind() >= reflect.Int && kt.Kind() <= reflect.Int64:
			key = strconv.FormatInt(k.Int(), 10)
		case kt.Kind() >= reflect.Uint && kt.Kind() <= reflect.Uintptr:
			key = strconv.FormatUint(k.Uint(), 10)
		default:
			return nil, errSlowPath
		}
		if !utf8.ValidString(key) {
			return nil, errSlowPath
		}
		entries = append(entries, kv{key, iter.Value()})
	}
	slices.SortFunc(entries, func(a, b kv) int { return compareUTF16(a.key, b.key) })
	ef := flagsOf(v.Type().Elem())
	dst = append(dst, '{')
	for i, e := range entries {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendString(dst, e.key)
		dst = append(dst, ':')
		var err error
		if dst, err = appendValueF(dst, e.val, ef); err != nil {
			return nil, err
		}
	}
	return append(dst, '}'), nil
}

type field struct {
	name      string
	key       []byte // the canonical member name and its colon, precomputed
	index     int
	omitEmpty bool
	omitZero  bool
	flags     typeFlags
}

type structInfo struct {
	fields []field // sorted by name, UTF-16 order
	slow   bool
	extra  int // index of the `wire:"extra"` map[string]json.RawMessage field, or -1
}

var structCache sync.Map // reflect.Type → *structInfo

func infoOf(t reflect.Type) *structInfo {
	if si, ok := structCache.Load(t); ok {
		return si.(*structInfo)
	}
	si := &structInfo{extra: -1}
	seen := map[string]bool{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if f.Tag.Get("wire") == "extra" {
			if f.Type == reflect.TypeFor[map[string]json.RawMessage]() {
				si.extra = i
			} else {
				si.slow = true
			}
			continue
		}
		if f.Anonymous {
			si.slow = true // embedded fields follow Go's promotion rules: leave them to encoding/json
			break
		}
		if !f.IsExported() {
			continue
		}
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if name == "" {
			name = f.Name
		}
		fi := field{name: name, index: i, flags: flagsOf(f.Type)}
		for _, o := range strings.Split(opts, ",") {
			switch o {
			case "omitempty":
				fi.omitEmpty = true
			case "omitzero":
				fi.omitZero = true
			case "string":
				si.slow = true
			}
		}
		if seen[name] || !validTagName(name) {
			si.slow = true
		}
		seen[name] = true
		si.fields = append(si.fields, fi)
	}
	slices.SortFunc(si.fields, func(a, b field) int { return compareUTF16(a.name, b.name) })
	for i := range si.fields {
		si.fields[i].key = append(appendString(nil, si.fields[i].name), ':')
	}
	v, _ := structCache.LoadOrStore(t, si)
	return v.(*structInfo)
}

// validTagName mirrors encoding/json's isValidTag; a field whose tag name
// it would refuse goes to the general path.
func validTagName(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		switch {
		case strings.ContainsRune("!#$%&()*+-./:;<=>?@[]^_{|}~ ", c):
		case !unicode.IsLetter(c) && !unicode.IsDigit(c):
			return false
		}
	}
	return true
}

func appendStruct(dst []byte, v reflect.Value) ([]byte, error) {
	si := infoOf(v.Type())
	if si.slow {
		return nil, errSlowPath
	}
	if si.extra >= 0 && v.Field(si.extra).Len() > 0 {
		return appendOpen(dst, v, si)
	}
	dst = append(dst, '{')
	first := true
	for _, f := range si.fields {
		fv := v.Field(f.index)
		if f.omitEmpty && isEmpty(fv) || f.omitZero && isZero(fv) {
			continue
		}
		if !first {
			dst = append(dst, ',')
		}
		first = false
		dst = append(dst, f.key...)
		var err error
		if dst, err = appendValueF(dst, fv, f.flags); err != nil {
			return nil, err
		}
	}
	return append(dst, '}'), nil
}

// appendOpen writes an open struct whose extension map has members: the
// fields and the members not shadowed by a field, sorted together.
func appendOpen(dst []byte, v reflect.Value, si *structInfo) ([]byte, error) {
	type member struct {
		name string
		val  []byte
	}
	var members []member
	names := map[string]bool{}
	for _, f := range si.fields {
		fv := v.Field(f.index)
		names[f.name] = true
		if f.omitEmpty && isEmpty(fv) || f.omitZero && isZero(fv) {
			continue
		}
		b, err := appendValueF(nil, fv, f.flags)
		if err != nil {
			return nil, err
		}
		members = append(members, member{f.name, b})
	}
	iter := v.Field(si.extra).MapRange()
	for iter.Next() {
		k := iter.Key().String()
		if names[k] {
			continue // a field wins over an extension member of the same name
		}
		if !utf8.ValidString(k) {
			return nil, errSlowPath
		}
		b, err := appendMarshaler(nil, iter.Value().Interface().(json.RawMessage))
		if err != nil {
			return nil, err
		}
		members = append(members, member{k, b})
	}
	slices.SortFunc(members, func(a, b member) int { return compareUTF16(a.name, b.name) })
	dst = append(dst, '{')
	for i, m := range members {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendString(dst, m.name)
		dst = append(dst, ':')
		dst = append(dst, m.val...)
	}
	return append(dst, '}'), nil
}

func isEmpty(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Array, reflect.Map, reflect.Slice, reflect.String:
		return v.Len() == 0
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64, reflect.Interface, reflect.Pointer:
		return v.IsZero()
	}
	return false
}

type isZeroer interface{ IsZero() bool }

var isZeroerType = reflect.TypeFor[isZeroer]()

func isZero(v reflect.Value) bool {
	tf := flagsOf(v.Type())
	if tf&isZeroerFlag != 0 {
		if v.Kind() == reflect.Pointer && v.IsNil() {
			return true
		}
		return v.Interface().(isZeroer).IsZero()
	}
	if tf&ptrZeroer != 0 && v.CanAddr() {
		return v.Addr().Interface().(isZeroer).IsZero()
	}
	return v.IsZero()
}

// appendAny writes JSON-shaped values (the contents of map[string]any and
// []any) without reflection; other values go through appendValue.
func appendAny(dst []byte, x any) ([]byte, error) {
	switch v := x.(type) {
	case nil:
		return append(dst, "null"...), nil
	case string:
		return appendGoString(dst, v), nil
	case float64:
		return appendFloat(dst, v)
	case bool:
		if v {
			return append(dst, "true"...), nil
		}
		return append(dst, "false"...), nil
	case int:
		return appendInt(dst, int64(v))
	case int64:
		return appendInt(dst, v)
	case json.Number:
		return appendNumberLiteral(dst, string(v))
	case []any:
		if v == nil {
			return append(dst, "null"...), nil
		}
		dst = append(dst, '[')
		for i, e := range v {
			if i > 0 {
				dst = append(dst, ',')
			}
			var err error
			if dst, err = appendAny(dst, e); err != nil {
				return nil, err
			}
		}
		return append(dst, ']'), nil
	case map[string]any:
		if v == nil {
			return append(dst, "null"...), nil
		}
		return appendObject(dst, v)
	}
	return appendValue(dst, reflect.ValueOf(x))
}

// appendObject writes a non-nil map of JSON values (map[string]any) or of
// JSON objects (a capability's argument constraints) as appendMap does.
//
// Its members are taken with their values in one pass over the map (no
// look-up of a key again), and sorted by key.
func appendObject[V any](dst []byte, m map[string]V) ([]byte, error) {
	var small [16]objMember[V] // most objects are small: their members stay on the stack
	ms := small[:0]
	for k, v := range m {
		if !utf8.ValidString(k) {
			return nil, errSlowPath
		}
		ms = append(ms, objMember[V]{k, v})
	}
	if len(ms) > 1 {
		slices.SortFunc(ms, func(a, b objMember[V]) int { return compareUTF16(a.k, b.k) })
	}
	dst = append(dst, '{')
	for i := range ms {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendString(dst, ms[i].k)
		dst = append(dst, ':')
		var err error
		if dst, err = appendAny(dst, ms[i].v); err != nil {
			return nil, err
		}
	}
	return append(dst, '}'), nil
}

// objMember is one member of a map appendObject writes.
type objMember[V any] struct {
	k string
	v V
}
