package pack_test

import (
	"context"
	"crypto/ed25519"
	"errors"
	"strings"
	"testing"

	"github.com/contextos/contextos/pack"
)

// TestValidateOptionsGates: host gates run after the built-in ones, only
// when those pass, and Sign and a registry's Put refuse a pack one fails.
func TestValidateOptionsGates(t *testing.T) {
	refuse := func(*pack.Pack) []pack.Problem {
		return []pack.Problem{{Gate: pack.GateReplay, Code: "manifest_changed", Path: "tooling_layer", Message: "golden case changed"}}
	}
	calls := 0
	count := func(*pack.Pack) []pack.Problem { calls++; return nil }
	key := ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize))
	tests := []struct {
		name      string
		p         *pack.Pack
		gates     []pack.GateFunc
		wantCode  pack.Code
		wantCalls int
	}{
		{"passing gates", canonical(t), []pack.GateFunc{count, nil, count}, "", 2},
		{"failing gate", canonical(t), []pack.GateFunc{count, refuse}, "manifest_changed", 1},
		{"built-in failure first", mutated(t, func(p *pack.Pack) { p.PackMeta.TTLSeconds = 0 }), []pack.GateFunc{count, refuse}, pack.CodeFormat, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			calls = 0
			opts := &pack.ValidateOptions{Gates: tc.gates}
			err := pack.Validate(tc.p, opts)
			if calls != tc.wantCalls {
				t.Errorf("host gates ran %d times, want %d", calls, tc.wantCalls)
			}
			if tc.wantCode == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			var ve *pack.ValidationError
			if !errors.As(err, &ve) || !errors.Is(err, pack.ErrInvalid) || !ve.Has(tc.wantCode) {
				t.Fatalf("Validate = %v, want a problem %s", err, tc.wantCode)
			}
			if tc.wantCode == "manifest_changed" && (len(ve.Problems) != 1 || ve.Problems[0].Gate != pack.GateReplay) {
				t.Errorf("problems = %+v, want the replay gate's only", ve.Problems)
			}
			if _, err := pack.Sign(tc.p, "kid_test", key, opts); !errors.Is(err, pack.ErrInvalid) {
				t.Errorf("Sign = %v, want ErrInvalid", err)
			}
			signed, err := pack.Sign(tc.p, "kid_test", key, nil)
			if tc.wantCode == "manifest_changed" {
				if err != nil {
					t.Fatalf("Sign without gates: %v", err)
				}
				if _, err := pack.NewMemoryRegistry(opts).Put(context.Background(), signed); !errors.Is(err, pack.ErrInvalid) {
					t.Errorf("Put = %v, want ErrInvalid", err)
				}
			}
		})
	}
}

// A host gate fails closed: one that panics fails the pack (Sign and Put
// refuse it; the panic value, which may hold anything, is not repeated),
// and a problem naming no known gate is filed under GateHost.
func TestHostGateFailsClosed(t *testing.T) {
	t.Parallel()
	key := ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize))
	panics := func(*pack.Pack) []pack.Problem { panic("sk-live-secret") }
	unnamed := func(*pack.Pack) []pack.Problem {
		return []pack.Problem{{Code: "custom", Message: "host check"}, {Gate: "made-up", Code: "custom"}, {Gate: pack.GateReplay, Code: "custom"}}
	}
	for _, tc := range []struct {
		name  string
		gate  pack.GateFunc
		gates []string
		code  pack.Code
	}{
		{"panic", panics, []string{pack.GateHost}, pack.CodeGatePanicked},
		{"unknown gate names", unnamed, []string{pack.GateHost, pack.GateHost, pack.GateReplay}, "custom"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			opts := &pack.ValidateOptions{Gates: []pack.GateFunc{tc.gate}}
			err := pack.Validate(canonical(t), opts)
			var ve *pack.ValidationError
			if !errors.As(err, &ve) || len(ve.Problems) != len(tc.gates) {
				t.Fatalf("Validate: %v", err)
			}
			for i, p := range ve.Problems {
				if p.Gate != tc.gates[i] || p.Code != tc.code {
					t.Errorf("problem %d: %+v, want gate %s code %s", i, p, tc.gates[i], tc.code)
				}
			}
			if strings.Contains(err.Error(), "sk-live") {
				t.Errorf("the panic value leaked: %v", err)
			}
			if _, err := pack.Sign(canonical(t), "k1", key, opts); !errors.As(err, &ve) {
				t.Errorf("Sign: %v", err)
			}
			signed, err := pack.Sign(canonical(t), "k1", key, nil)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := pack.NewMemoryRegistry(opts).Put(context.Background(), signed); !errors.As(err, &ve) {
				t.Errorf("Put: %v", err)
			}
		})
	}
}
