package compiler_test

import (
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/contextos/contextos/compiler"
)

// TestCompiledContextSharesNothingAcrossCompiles has goroutines compile
// over one Prepared (whose memos are shared) from two evidence lists in
// turn, each overwriting every string, number, list element and map value
// of the compiled context it got before compiling again: each compile
// still has the hashes a fresh compile gives (run under -race, a write to
// anything two compiles share is also a race).
func TestCompiledContextSharesNothingAcrossCompiles(t *testing.T) {
	s := canonicalScenario(t)
	s.opts.At = time.Date(2026, 5, 3, 9, 0, 0, 0, time.UTC)
	base := s.opts.Evidence.(compiler.StaticEvidence)
	edited := append(compiler.StaticEvidence(nil), base...)
	edited[3].Content += " (edited)"
	p, err := compiler.Prepare(s.inputs(), &s.opts)
	if err != nil {
		t.Fatal(err)
	}
	want := map[int]*compiler.CompiledContext{}
	for i, ev := range []compiler.StaticEvidence{base, edited} {
		fresh := *s
		fresh.opts.Evidence = ev
		want[i] = fresh.compile(t)
	}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := range 6 {
				i := (g + n/2) % 2
				ev := []compiler.StaticEvidence{base, edited}[i]
				cc, err := p.WithSources(ev, s.opts.Memory).Compile(ctx, s.req, s.rc)
				if err != nil {
					t.Error(err)
					return
				}
				if cc.Hash() != want[i].Hash() || cc.ContextLedger.LedgerHash != want[i].ContextLedger.LedgerHash {
					t.Errorf("goroutine %d compile %d: hashes %s %s, a fresh compile's %s %s", g, n, cc.Hash(), cc.ContextLedger.LedgerHash, want[i].Hash(), want[i].ContextLedger.LedgerHash)
					return
				}
				scribble(reflect.ValueOf(cc).Elem())
			}
		}()
	}
	wg.Wait()
}

// scribble overwrites every string, number and bool v reaches, through
// pointers, lists, arrays, struct fields and map values.
func scribble(v reflect.Value) {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			e := v.Elem()
			if v.Kind() == reflect.Interface {
				// An interface holds its value by copy: replace it.
				c := reflect.New(e.Type()).Elem()
				c.Set(e)
				scribble(c)
				if v.CanSet() {
					v.Set(c)
				}
				return
			}
			scribble(e)
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				scribble(v.Field(i))
			}
		}
	case reflect.Slice, reflect.Array:
		for i := range v.Len() {
			scribble(v.Index(i))
		}
	case reflect.Map:
		for _, k := range v.MapKeys() {
			c := reflect.New(v.Type().Elem()).Elem()
			c.Set(v.MapIndex(k))
			scribble(c)
			v.SetMapIndex(k, c)
		}
	case reflect.String:
		if v.CanSet() {
			v.SetString("scribbled")
		}
	case reflect.Int, reflect.Int64, reflect.Float64:
		if v.CanSet() {
			if v.Kind() == reflect.Float64 {
				v.SetFloat(-1)
			} else {
				v.SetInt(-1)
			}
		}
	case reflect.Bool:
		if v.CanSet() {
			v.SetBool(!v.Bool())
		}
	}
}
