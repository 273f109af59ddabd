package canon

import (
	"errors"
	"math"
	"testing"
)

// objectCase is every member kind Object writes, in canonical key order,
// so the writer's bytes can be held to the reflective encoder's.
type objectCase struct {
	A  bool           `json:"a"`
	B  float64        `json:"b"`
	C  int64          `json:"c"`
	D  []string       `json:"d"`
	E  []string       `json:"e,omitempty"`
	F  *string        `json:"f"`
	G  string         `json:"g"`
	H  string         `json:"h,omitempty"`
	I  map[string]any `json:"i"`
	J  []string       `json:"j"`
	Zz string         `json:"zz"`
}

func writeObject(dst []byte, c *objectCase) ([]byte, error) {
	o := NewObject(dst)
	o.Bool(`"a":`, c.A)
	o.Float(`"b":`, c.B)
	o.Int(`"c":`, c.C)
	o.Strings(`"d":`, c.D)
	o.StringsOmit(`"e":`, c.E)
	o.StrPtr(`"f":`, c.F)
	o.Str(`"g":`, c.G)
	o.StrOmit(`"h":`, c.H)
	o.Value(`"i":`, c.I, nil)
	o.Key(`"j":`)
	o.Put(AppendStrings(o.B, c.J), nil)
	o.With(`"zz":`, func(b []byte) ([]byte, error) { return AppendString(b, c.Zz), nil })
	return o.Close()
}

// Object writes what the reflective encoder writes for the same values,
// each member's empty and filled forms.
func TestObjectSameAsEncoding(t *testing.T) {
	t.Parallel()
	s := "é\u2028<&>\"\\\x01"
	cases := []objectCase{
		{},
		{A: true, B: 1e21, C: -MaxSafeInteger, D: []string{}, E: []string{"x"}, F: &s, G: s, H: "h",
			I: map[string]any{"z": 1.0, "a": []any{"b", nil}}, J: []string{"", s}, Zz: "\xff"},
		{B: -0.000001, C: MaxSafeInteger, D: []string{"a", "b"}, F: new(string), I: map[string]any{}},
	}
	for i, c := range cases {
		want, err := JSON(c)
		if err != nil {
			t.Fatal(err)
		}
		got, err := writeObject([]byte("prefix"), &c)
		if err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		if string(got) != "prefix"+string(want) {
			t.Errorf("case %d:\n got %s\nwant prefix%s", i, got, want)
		}
	}
}

// The first error is the object's: later members do not replace it, and
// Close returns it instead of bytes.
func TestObjectKeepsTheFirstError(t *testing.T) {
	t.Parallel()
	second := errors.New("second")
	for name, write := range map[string]func(o *Object){
		"int":   func(o *Object) { o.Int(`"n":`, MaxSafeInteger+1) },
		"float": func(o *Object) { o.Float(`"n":`, math.NaN()) },
		"value": func(o *Object) { o.Value(`"n":`, math.Inf(1), nil) },
		"with":  func(o *Object) { o.With(`"n":`, func([]byte) ([]byte, error) { return nil, ErrNotCanonicalizable }) },
		"put":   func(o *Object) { o.Key(`"n":`); o.Put(nil, ErrNotCanonicalizable) },
		"fail":  func(o *Object) { o.Fail(ErrNotCanonicalizable) },
	} {
		o := NewObject(nil)
		o.Str(`"a":`, "x")
		write(&o)
		o.Fail(second)
		o.Key(`"p":`)
		o.Put([]byte("ignored"), second)
		o.Int(`"z":`, 1)
		b, err := o.Close()
		if b != nil || !errors.Is(err, ErrNotCanonicalizable) || errors.Is(err, second) {
			t.Errorf("%s: Close() = %q, %v; want nil and the first error", name, b, err)
		}
		if !errors.Is(o.Err(), ErrNotCanonicalizable) {
			t.Errorf("%s: Err() = %v", name, o.Err())
		}
	}
}

// The zero Object writes members without the braces, for Members.
func TestZeroObjectWritesMembers(t *testing.T) {
	t.Parallel()
	var m Object
	m.Str(`"b":`, "1")
	m.Int(`"c":`, 2)
	o := NewObject(nil)
	o.Str(`"a":`, "0")
	o.Members(string(m.B))
	o.Bool(`"d":`, false)
	got, err := o.Close()
	if err != nil || string(got) != `{"a":"0","b":"1","c":2,"d":false}` {
		t.Fatalf("got %s, %v", got, err)
	}
	e := NewObject(nil)
	if got, _ := e.Close(); string(got) != "{}" {
		t.Fatalf("empty object: %s", got)
	}
}
