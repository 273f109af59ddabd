package contextos_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/compiler"
	"github.com/contextos/contextos/contextostest"
	"github.com/contextos/contextos/pack"
	"github.com/contextos/contextos/runcontext"
)

// The runtime's environment overlay names its base by exact version. A
// caller naming another published version of the same pack in
// context_pack_refs must not run outside the environment's rules: the
// run is refused with a typed error naming the pack, the version asked
// and the versions overlays exist for, and no tool is called.
func TestOverlaySkippedForOtherVersionIsRefused(t *testing.T) {
	base := string(readTestdata(t, "ctxpack.support-1.0.0.json"))
	next := strings.Replace(strings.Replace(base, `"pack_version": "1.0.0"`, `"pack_version": "1.0.1"`, 1), `"contract_version": "1.0.0"`, `"contract_version": "1.0.1"`, 1)
	ov := &pack.Overlay{OverlayID: "ov_prod", Base: "ctxpack.support@1.0.0", Environment: "prod",
		Guardrails: pack.Guardrails{MustRefuse: []string{"prod_only_refusal"}}}
	o := &contextostest.Options{Runtime: contextos.Options{Overlays: []*pack.Overlay{ov}, Evidence: evidence(t), ReplaySampleRate: 1},
		Scopes: map[string][]string{"adp_payments.issue_refund": {"payments.refund"}}}
	h := contextostest.New(t, contextostest.NewPlanner(lookupPlan(), refundPlan(1200)), [][]byte{[]byte(base), []byte(next)}, o)
	scriptDefaults(h, "")
	req, rc := refundRequest(t, 1200, true)
	req.ContextPackRefs = []string{"ctxpack.support@1.0.1"}
	res, err := h.Runtime.Invoke(context.Background(), req, rc)
	var ove *compiler.OverlayVersionError
	if !errors.Is(err, compiler.ErrOverlayVersion) || !errors.As(err, &ove) {
		t.Fatalf("Invoke of ctxpack.support@1.0.1 with an overlay only for 1.0.0 = %v (result %v), want ErrOverlayVersion", err, res != nil)
	}
	if ove.PackID != "ctxpack.support" || ove.Version != "1.0.1" || !slices.Equal(ove.OverlayVersions, []string{"1.0.0"}) {
		t.Errorf("error = %+v", ove)
	}
	if n := len(h.Adapter("adp_payments").Calls()); n != 0 {
		t.Errorf("issue_refund called %d times", n)
	}
	// The version the overlay is for still runs, under the overlay.
	req, rc = refundRequest(t, 1200, true)
	res, err = h.Runtime.Invoke(context.Background(), req, rc)
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Compiled.ContextLedger.Packs[0].Overlay; got == nil || got.OverlayID != "ov_prod" {
		t.Errorf("ledger overlay = %+v", got)
	}
}

// An overlay whose base is not exactly a pinned ref (white space, a range,
// build metadata) would apply to no pack: contextos.New refuses it with
// ErrConfig naming the overlay's place, not its text.
func TestOverlayWithInexactBaseIsAConfigError(t *testing.T) {
	for _, base := range []string{"ctxpack.support@1.0.0 ", "ctxpack.support@v1.0.0", "ctxpack.support@1.0.0+b", "ctxpack.support@01.0.0", "ctxpack.support", ""} {
		ov := &pack.Overlay{OverlayID: "ov_prod", Base: base, Environment: "prod"}
		_, err := contextos.New(contextos.PlannerFunc(func(context.Context, *contextos.PlanRequest) (*contextos.Plan, error) { return nil, nil }),
			pack.NewMemoryRegistry(nil), &runcontext.StaticKeys{}, &contextos.Options{Overlays: []*pack.Overlay{ov}})
		if !errors.Is(err, contextos.ErrConfig) || !strings.Contains(err.Error(), "Overlays[0].base") {
			t.Errorf("base %q: New = %v, want ErrConfig naming Overlays[0].base", base, err)
		}
	}
}
