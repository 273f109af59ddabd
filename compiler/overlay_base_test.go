package compiler_test

import (
	"errors"
	"testing"

	"github.com/contextos/contextos/compiler"
	"github.com/contextos/contextos/pack"
)

// An overlay whose base is a misspelling of the run's pack ref (case,
// whitespace, a leading v, build metadata, leading zeros) is refused: it
// would apply to nothing, and the run would compile without the
// environment's rules (a hostile review found them silently skipped).
func TestOverlayBaseMustBeExactRef(t *testing.T) {
	for _, base := range []string{"ctxpack.support@1.0.0 ", " ctxpack.support@1.0.0", "CTXPACK.SUPPORT@1.0.0", "ctxpack.support@v1.0.0",
		"ctxpack.support@1.0.0+build.1", "ctxpack.support@01.0.0", "ctxpack.support@1.0", "ctxpack.support@1.0.0-rc.1", "ctxpack.support@1.0.0\n"} {
		s := canonicalScenario(t)
		s.opts.Overlays = []*pack.Overlay{{OverlayID: "ov_prod", Base: base, Environment: "prod"}}
		cc, err := compiler.Compile(ctx, s.inputs(), s.req, s.rc, &s.opts)
		if err == nil {
			applied := false
			for _, p := range cc.ContextLedger.Packs {
				if p.Overlay != nil {
					applied = true
				}
			}
			t.Errorf("base %q: compile succeeded, overlay applied=%v (prod rules silently skipped)", base, applied)
		} else if !errors.Is(err, compiler.ErrInput) {
			t.Errorf("base %q: %v does not match ErrInput", base, err)
		}
	}
}
