package pack_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/contextos/contextos/pack"
	"github.com/contextos/contextos/pack/packtest"
	"github.com/contextos/contextos/policy"
)

// FuzzDecode: any input decodes or fails with a *ValidationError, never a
// panic; what decodes re-encodes and decodes again to the same content hash.
func FuzzDecode(f *testing.F) {
	f.Add(readFile(f, "ctxpack.support-1.0.0.json"))
	f.Add([]byte(`{"contract_meta":{},"pack_meta":{"pack_id":"..","pack_version":"1.0.0"}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := pack.Decode(data)
		if err != nil {
			if !errors.Is(err, pack.ErrInvalid) {
				t.Fatalf("error is not ErrInvalid: %v", err)
			}
			return
		}
		h1, err := pack.ContentHash(p)
		if err != nil {
			return // non-finite numbers cannot be hashed; that is reported, not a crash
		}
		p2, err := pack.Decode(packtest.Bare(t, p))
		if err != nil {
			t.Fatalf("re-encoded pack does not decode: %v", err)
		}
		if h2, _ := pack.ContentHash(p2); h1 != h2 {
			t.Fatalf("content hash changed across a round trip")
		}
	})
}

// FuzzValidate: every gate runs on any decodable pack without panicking,
// and every problem names a known gate.
func FuzzValidate(f *testing.F) {
	f.Add(readFile(f, "ctxpack.support-1.0.0.json"))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := pack.Decode(data)
		if err != nil {
			return
		}
		err = pack.Validate(p, nil)
		if err == nil {
			return
		}
		ve, ok := err.(*pack.ValidationError)
		if !ok || len(ve.Problems) == 0 {
			t.Fatalf("Validate error is not a non-empty *ValidationError: %v", err)
		}
		gates := []string{pack.GateSchema, pack.GateReferential, pack.GatePolicy, pack.GateRisk, pack.GateTenancy, pack.GateSecurity, pack.GateEvaluation}
		for _, q := range ve.Problems {
			if !contains(gates, q.Gate) || q.Code == "" {
				t.Fatalf("problem without a known gate or code: %+v", q)
			}
		}
	})
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// FuzzParseRef: refs either parse and print back exactly, or are refused
// with ErrUnpinnedRef.
func FuzzParseRef(f *testing.F) {
	for _, s := range []string{"ctxpack.support@5.2.0", "ctxpack.support", "a@latest", "a@1.0.0+b", "a@01.0.0", "a:b_c.d-e@0.0.0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := pack.ParseRef(s)
		if err != nil {
			if !errors.Is(err, pack.ErrUnpinnedRef) {
				t.Fatalf("error is not ErrUnpinnedRef: %v", err)
			}
			return
		}
		if r.String() != s {
			t.Fatalf("ParseRef(%q).String() = %q", s, r.String())
		}
	})
}

// FuzzGuardChange: any pair of gate conditions validates and diffs
// without a panic, and whenever Diff classes the change of the gate's
// condition as minor (it activates in every case it did), the policy
// engine agrees on sample data: where the old condition activates the
// gate, the new one does too.
func FuzzGuardChange(f *testing.F) {
	const amt = `{"var":"request.context.refund_amount"}`
	old := `{">":[` + amt + `,3000]}`
	for _, n := range []string{old, `{">":[` + amt + `,1000]}`, `{">=":[` + amt + `,3000]}`, `{"or":[` + old + `,{"==":[{"var":"user.role"},"x"]}]}`,
		`{"!":{"<=":[` + amt + `,3000]}}`, `{"!!":[` + old + `]}`, `{"and":[` + old + `,true]}`, `true`, `{"in":[{"var":"user.role"},["a","b"]]}`} {
		f.Add(old, n)
	}
	f.Add(`{"in":[{"var":"user.role"},["a"]]}`, `{"in":[{"var":"user.role"},["a","b"]]}`)
	f.Add(`{"and":[{"var":"request.context.n"},false]}`, `false`)
	f.Fuzz(func(t *testing.T, oldWhen, newWhen string) {
		base := canonical(t)
		base.PolicyLayer.ApprovalGates[0].When = rawJSON(oldWhen)
		next := canonical(t)
		next.PolicyLayer.ApprovalGates[0].When = rawJSON(newWhen)
		next.PackMeta.PackVersion = "1.1.0"
		res := pack.Diff(base, next, nil)
		minor := false
		for _, c := range res.Changes {
			if c.Path == "policy_layer.approval_gates.GATE_FINANCE_APPROVAL.when" {
				minor = c.Class == pack.ClassMinor
			}
		}
		if !minor {
			return
		}
		eo, err1 := policy.Prepare(base, nil)
		en, err2 := policy.Prepare(next, nil)
		if err1 != nil || err2 != nil {
			return
		}
		for _, amount := range []float64{-1, 0, 1, 999, 1000, 2999, 3000, 3000.5, 3001, 1e9} {
			for _, role := range []any{"support_agent", "x", "a", "b", ""} {
				for _, n := range []any{0.0, 1.0, []any{}, []any{1.0}, "s", true, false} {
					doc := policy.Document{"intent": "support.refund", "user": map[string]any{"role": role},
						"request": map[string]any{"context": map[string]any{"refund_amount": amount, "identity_verified": true, "n": n}}}
					ro, err1 := eo.Evaluate(policy.Input{RunID: "run_fuzz", Data: doc})
					rn, err2 := en.Evaluate(policy.Input{RunID: "run_fuzz", Data: doc})
					if err1 != nil || err2 != nil {
						continue // the engine fails closed
					}
					if slices.Contains(ro.Gates[0].ActivatedBy, "when") && !slices.Contains(rn.Gates[0].ActivatedBy, "when") {
						t.Fatalf("Diff classes %s → %s as minor, but at amount %v role %v n %v only the old one activates", oldWhen, newWhen, amount, role, n)
					}
				}
			}
		}
	})
}
