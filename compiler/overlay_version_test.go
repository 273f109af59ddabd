package compiler_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/contextos/contextos/compiler"
	"github.com/contextos/contextos/pack"
)

// An environment overlay names its base pack by exact version. A run of
// another version of that pack, for which no overlay is declared, is
// refused (fail closed) instead of running without the environment's
// rules; the error names the pack id, the version asked for and the
// versions the overlays are for.
func TestOverlayForOtherVersionRefused(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		overlays []*pack.Overlay
		want     []string // overlay versions named; nil: the compile succeeds
	}{
		{"overlay for another version", []*pack.Overlay{{OverlayID: "ov_prod", Base: "ctxpack.support@0.9.0", Environment: "prod"}}, []string{"0.9.0"}},
		{"overlays for two other versions", []*pack.Overlay{
			{OverlayID: "ov_b", Base: "ctxpack.support@2.0.0", Environment: "prod"},
			{OverlayID: "ov_a", Base: "ctxpack.support@0.9.0", Environment: "prod"},
			{OverlayID: "ov_c", Base: "ctxpack.support@2.0.0", Environment: "staging"},
		}, []string{"0.9.0", "2.0.0"}},
		{"overlay for this version too", []*pack.Overlay{
			{OverlayID: "ov_old", Base: "ctxpack.support@0.9.0", Environment: "prod"},
			{OverlayID: "ov_prod", Base: "ctxpack.support@1.0.0", Environment: "prod"},
		}, nil},
		{"overlay of another pack only", []*pack.Overlay{{OverlayID: "ov_x", Base: "ctxpack.billing@1.0.0", Environment: "prod"}}, nil},
		{"no overlays", nil, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := canonicalScenario(t)
			s.opts.Overlays = tc.overlays
			cc, err := compiler.Compile(ctx, s.inputs(), s.req, s.rc, &s.opts)
			if tc.want == nil {
				if err != nil {
					t.Fatalf("Compile: %v", err)
				}
				return
			}
			var ove *compiler.OverlayVersionError
			var ce *compiler.Error
			if !errors.Is(err, compiler.ErrOverlayVersion) || !errors.As(err, &ove) || !errors.As(err, &ce) || ce.Stage != 3 || !errors.Is(err, compiler.ErrInput) {
				t.Fatalf("Compile = %v (context %v), want an *OverlayVersionError at stage 3", err, cc != nil)
			}
			if ove.PackID != "ctxpack.support" || ove.Version != "1.0.0" || !slices.Equal(ove.OverlayVersions, tc.want) {
				t.Errorf("error = %+v, want ctxpack.support 1.0.0 with overlays for %v", ove, tc.want)
			}
		})
	}
}
