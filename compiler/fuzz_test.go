package compiler_test

import (
	"errors"
	"testing"

	"github.com/contextos/contextos/compiler"
	"github.com/contextos/contextos/pack"
)

// FuzzCompileMutatedPack: any pack document that decodes either compiles
// or is refused with a *compiler.Error; Compile never panics, and what
// compiles twice compiles to the same hash.
func FuzzCompileMutatedPack(f *testing.F) {
	f.Add(read(f, "ctxpack.support-1.0.0.json"))
	f.Add([]byte(`{"contract_meta":{"contract_name":"x"}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := pack.Decode(data)
		if err != nil {
			return
		}
		ref, err := p.Ref()
		if err != nil {
			return
		}
		s := canonicalScenario(t)
		in := []compiler.Input{{Ref: ref, Pack: p}}
		cc, err := compiler.Compile(ctx, in, s.req, s.rc, &s.opts)
		if err != nil {
			var ce *compiler.Error
			if !errors.As(err, &ce) {
				t.Fatalf("error is not a *compiler.Error: %v", err)
			}
			return
		}
		again, err := compiler.Compile(ctx, in, s.req, s.rc, &s.opts)
		if err != nil || again.Hash() != cc.Hash() {
			t.Fatalf("second compile differs: %v", err)
		}
	})
}
