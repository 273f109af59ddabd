package compiler

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/contextos/contextos/internal/canon"
	"github.com/contextos/contextos/runcontext"
)

// filler fills a value of any of the compiler's hashed types from bytes:
// every exported field (extension members included), with the values
// that tell encoders apart: strings to escape, invalid UTF-8, names that
// sort differently by UTF-16 than by code point, integers at and beyond
// ±(2^53−1), nil and empty slices and maps, nil pointers, unknown
// approval modes. With full, nothing is left nil or empty (a field a
// writer forgets then shows).
type filler struct {
	data  []byte
	full  bool
	safe  bool // no unsafe integer, no unknown approval mode
	depth int
}

func (f *filler) next() byte {
	if len(f.data) == 0 {
		return 0
	}
	b := f.data[0]
	f.data = f.data[1:]
	return b
}

var fillStrings = []string{
	"", "a", "refund", "x\"y\\z", "line\nbreak\ttab\r\b\f", "\x00\x01\x1f\x7f",
	"\xff", "a\xc3", "\xed\xa0\x80", "é漢", "😀", "\uE000", "\u2028\u2029", "<&>",
	"sha256:0c7b5113ceb5e76124c857a0f1879b8f8efc8945d4294349888dde59c13a760a",
	"a long one, long enough for eight-byte scans: 0123456789abcdefghijklmnop",
}

var fillInts = []int64{0, 1, -1, 42, 1<<53 - 1, -(1<<53 - 1), 1 << 53, -(1 << 53), math.MaxInt64, math.MinInt64}

var approvalModeType = reflect.TypeFor[runcontext.ApprovalMode]()

func (f *filler) str() string {
	b := f.next()
	if b < 200 || f.depth > 3 {
		s := fillStrings[int(b)%len(fillStrings)]
		if f.full && s == "" {
			s = "full"
		}
		return s
	}
	// Raw bytes from the input: anything at all.
	n := int(f.next() % 12)
	if n > len(f.data) {
		n = len(f.data)
	}
	s := string(f.data[:n])
	f.data = f.data[n:]
	if f.full && s == "" {
		s = "raw"
	}
	return s
}

func (f *filler) fill(v reflect.Value) {
	t := v.Type()
	if t == approvalModeType {
		modes := []runcontext.ApprovalMode{"", runcontext.ReadOnly, runcontext.Destructive, runcontext.Network, "bogus"}
		m := modes[int(f.next())%len(modes)]
		if f.full && m == "" || f.safe && m == "bogus" {
			m = runcontext.LocalWrite
		}
		v.SetString(string(m))
		return
	}
	switch t.Kind() {
	case reflect.String:
		v.SetString(f.str())
	case reflect.Bool:
		v.SetBool(f.full || f.next()&1 == 1)
	case reflect.Int, reflect.Int64:
		b := f.next()
		i := fillInts[int(b)%len(fillInts)]
		if b >= 128 && b < 250 { // mostly safe integers
			i = int64(b) - 180
		}
		if f.full && i == 0 || f.safe && (i > 1<<53-1 || i < -(1<<53-1)) {
			i = 7
		}
		v.SetInt(i)
	case reflect.Float64:
		fl := []float64{0, 0.1, -1.5, 1e21, 1e-7, 123456789012345680000, math.Copysign(0, -1)}
		v.SetFloat(fl[int(f.next())%len(fl)])
	case reflect.Pointer:
		if !f.full && f.next()%3 == 0 {
			return
		}
		p := reflect.New(t.Elem())
		f.fill(p.Elem())
		v.Set(p)
	case reflect.Slice:
		b := f.next()
		if !f.full && (b%5 == 0 || f.depth > 4) {
			return // nil
		}
		n := int(b % 4)
		if f.full && n == 0 {
			n = 2
		}
		s := reflect.MakeSlice(t, n, n)
		f.depth++
		for i := range n {
			f.fill(s.Index(i))
		}
		f.depth--
		v.Set(s)
	case reflect.Map:
		b := f.next()
		if !f.full && (b%5 == 0 || f.depth > 4) {
			return // nil
		}
		n := int(b % 4)
		if f.full && n == 0 {
			n = 2
		}
		m := reflect.MakeMapWithSize(t, n)
		f.depth++
		for range n {
			k := reflect.New(t.Key()).Elem()
			k.SetString(f.str())
			e := reflect.New(t.Elem()).Elem()
			f.fill(e)
			m.SetMapIndex(k, e)
		}
		f.depth--
		v.Set(m)
	case reflect.Interface:
		if x := f.anyValue(); x != nil {
			v.Set(reflect.ValueOf(x))
		}
	case reflect.Struct:
		for i := range t.NumField() {
			sf := t.Field(i)
			if !sf.IsExported() {
				continue
			}
			if sf.Type == reflect.TypeFor[map[string]json.RawMessage]() {
				f.fillExtra(v.Field(i))
				continue
			}
			f.fill(v.Field(i))
		}
	default:
		panic("filler: no values for " + t.String())
	}
}

// fillExtra fills an open object's extension members: mostly none (as on
// the wire), some with members whose names a field has.
func (f *filler) fillExtra(v reflect.Value) {
	if b := f.next(); b%4 != 0 {
		return
	}
	raws := []string{`1`, `"x"`, `{"b":1,"a":[true,null]}`, `1e21`, ` [ ] `}
	m := map[string]json.RawMessage{}
	for range int(f.next()%3) + 1 {
		k := f.str()
		if f.next()%4 == 0 {
			k = "kind" // shadowed by the field
		}
		m[k] = json.RawMessage(raws[int(f.next())%len(raws)])
	}
	v.Set(reflect.ValueOf(m))
}

// anyValue is a JSON-shaped value for a map[string]any member.
func (f *filler) anyValue() any {
	f.depth++
	defer func() { f.depth-- }()
	switch b := f.next(); {
	case b%8 == 0:
		return nil
	case b%8 == 1:
		return f.str()
	case b%8 == 2:
		return []float64{0.5, 1e21, -3, 1e-7}[int(f.next())%4]
	case b%8 == 3:
		if i := fillInts[int(f.next())%len(fillInts)]; !f.safe || i <= 1<<53-1 && i >= -(1<<53-1) {
			return i
		}
		return int64(-3)
	case b%8 == 4:
		return f.next()&1 == 1
	case b%8 == 5 && f.depth < 4:
		return []any{f.anyValue(), f.anyValue()}
	case b%8 == 6 && f.depth < 4:
		return map[string]any{f.str(): f.anyValue(), f.str(): f.anyValue()}
	}
	return json.Number("12.50")
}

// checkSame fails t unless the writer and canon.JSON of v agree: the same
// bytes, or the same error (for an unsafe integer, an *IntegerError).
func checkSame(t *testing.T, what string, a canon.Appender, v any) {
	t.Helper()
	want, werr := canon.JSON(v)
	got, gerr := a.AppendCanonical(nil)
	if (werr == nil) != (gerr == nil) || errors.Is(werr, canon.ErrUnsafeInteger) != errors.Is(gerr, canon.ErrUnsafeInteger) ||
		// Which of several unsafe integers canon names depends on map
		// order in its general path; any other error is the same error.
		werr != nil && !errors.Is(werr, canon.ErrUnsafeInteger) && werr.Error() != gerr.Error() {
		t.Fatalf("%s: reflection: %v, writer: %v", what, werr, gerr)
	}
	if werr == nil && !bytes.Equal(want, got) {
		t.Fatalf("%s:\nreflection %s\nwriter     %s", what, want, got)
	}
	// The digest the compiler takes is over the same bytes.
	if werr == nil {
		d, err := canon.DigestOf(a)
		if err != nil || d != canon.DigestBytes(want) {
			t.Fatalf("%s: DigestOf = %s, %v; want %s", what, d, err, canon.DigestBytes(want))
		}
	}
}

// checkWriters holds contentEncoding and ledgerEncoding to canon.JSON for
// cc: the content hash's value, the ledger with and without ledger_hash.
func checkWriters(t *testing.T, cc *CompiledContext) {
	t.Helper()
	checkSame(t, "content", contentEncoding{cc}, compiledContent{cc.CompiledPrompt, cc.Manifests, cc.RuntimeControls, cc.BudgetReport})
	checkSame(t, "ledger", ledgerEncoding{&cc.ContextLedger, false}, &cc.ContextLedger)
	l := cc.ContextLedger
	l.LedgerHash = ""
	checkSame(t, "ledger without ledger_hash", ledgerEncoding{&cc.ContextLedger, true}, &l)
}

func fillCompiled(data []byte, full, safe bool) *CompiledContext {
	cc := &CompiledContext{}
	f := &filler{data: data, full: full, safe: safe}
	f.fill(reflect.ValueOf(cc).Elem())
	return cc
}

// TestCanonicalWritersMatchReflection: the compiler's writers write what
// canon's reflective encoder writes, for everything filled (every field
// of every type set, so a field a writer leaves out fails here), for
// nothing filled, and for pseudo-random values.
func TestCanonicalWritersMatchReflection(t *testing.T) {
	for seed := range uint64(3000) {
		r := rand.New(rand.NewPCG(seed, 37))
		data := make([]byte, 64+r.IntN(2048))
		for i := range data {
			data[i] = byte(r.Uint32())
		}
		checkWriters(t, fillCompiled(data, seed%4 == 0, seed%3 == 0))
	}
	checkWriters(t, &CompiledContext{})
	// Everything filled with safe, valid values: the writers succeed.
	r := rand.New(rand.NewPCG(1, 2))
	full := make([]byte, 8192)
	for i := range full {
		full[i] = byte(r.Uint32())
	}
	cc := fillCompiled(full, true, true)
	if _, err := (contentEncoding{cc}).AppendCanonical(nil); err != nil {
		t.Fatalf("content of safe values: %v", err)
	}
	if _, err := (ledgerEncoding{&cc.ContextLedger, false}).AppendCanonical(nil); err != nil {
		t.Fatalf("ledger of safe values: %v", err)
	}
	checkWriters(t, cc)
}

// TestCanonicalWritersRefuseUnsafeIntegers: an integer beyond ±(2^53−1)
// is refused by the writers as by canon, with an *IntegerError.
func TestCanonicalWritersRefuseUnsafeIntegers(t *testing.T) {
	cc := &CompiledContext{}
	cc.BudgetReport.TokensUsedAtCompile = 1 << 53
	if _, err := (contentEncoding{cc}).AppendCanonical(nil); !errors.Is(err, canon.ErrUnsafeInteger) {
		t.Fatalf("content: %v, want ErrUnsafeInteger", err)
	}
	if _, err := contentHash(cc); !errors.Is(err, canon.ErrUnsafeInteger) {
		t.Fatalf("contentHash: %v, want ErrUnsafeInteger", err)
	}
	cc = &CompiledContext{}
	cc.ContextLedger.Omissions = []Omission{{EstimatedTokens: -(1 << 60)}}
	if _, err := LedgerHash(&cc.ContextLedger); !errors.Is(err, canon.ErrUnsafeInteger) {
		t.Fatalf("LedgerHash: %v, want ErrUnsafeInteger", err)
	}
}

// FuzzCanonicalWriters holds contentEncoding and ledgerEncoding to
// canon.JSON for compiled contexts filled from arbitrary bytes.
func FuzzCanonicalWriters(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte("\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c\x0d\x0e\x0f"))
	f.Add(bytes.Repeat([]byte{0xc8, 0x05, 'a', 0xff, '"', 0x81}, 80))
	f.Add(bytes.Repeat([]byte{7, 11, 13, 200, 4, 0xed, 0xa0, 0x80, 3, 9}, 60))
	f.Fuzz(func(t *testing.T, data []byte) {
		checkWriters(t, fillCompiled(data, false, false))
		checkWriters(t, fillCompiled(data, true, false))
		checkWriters(t, fillCompiled(data, true, true))
	})
}
