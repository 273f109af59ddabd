package contextos_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/compiler"
	"github.com/contextos/contextos/contextostest"
	"github.com/contextos/contextos/decision"
	"github.com/contextos/contextos/pack"
	"github.com/contextos/contextos/replay"
)

// A packet pins the run's context ledger, so a replay notices another
// environment: a packet recorded under the prod overlay (payments at the
// prod endpoint — not compiled content, so compiled_context_hash is the
// same) replays equal only on a runtime with that overlay; with the
// staging overlay or none it is a compiled_context mismatch naming the
// overlay. A run recorded without an overlay is a mismatch on a runtime
// that has one.
func TestReplayNoticesAnotherEnvironmentOverlay(t *testing.T) {
	prod := &pack.Overlay{OverlayID: "ov_prod", Base: "ctxpack.support@1.0.0", Environment: "prod",
		EndpointRefs: map[string]string{"adp_payments": "internal://payments-prod"}}
	staging := &pack.Overlay{OverlayID: "ov_staging", Base: "ctxpack.support@1.0.0", Environment: "staging",
		EndpointRefs: map[string]string{"adp_payments": "internal://payments-staging"}}
	eur := &pack.Overlay{OverlayID: "ov_eu", Base: "ctxpack.support@1.0.0", Environment: "prod",
		EndpointRefs:        map[string]string{"adp_payments": "internal://payments-prod"},
		EnvironmentDefaults: &pack.EnvironmentDefaults{Timezone: "Europe/Paris"}}
	tests := []struct {
		name       string
		recorded   []*pack.Overlay
		replayed   []*pack.Overlay
		wantEqual  bool
		wantDetail string
	}{
		{"same overlay", []*pack.Overlay{prod}, []*pack.Overlay{prod}, true, ""},
		{"staging overlay", []*pack.Overlay{prod}, []*pack.Overlay{staging}, false, "the replay applied overlay ov_staging"},
		{"no overlay", []*pack.Overlay{prod}, nil, false, "the replay applied no overlay, the packet's run applied overlay ov_prod"},
		{"overlay added", nil, []*pack.Overlay{prod}, false, "the replay applied overlay ov_prod (environment prod"},
		{"same id, other content", []*pack.Overlay{prod}, []*pack.Overlay{eur}, false, "context ledger differs from the packet's in"},
		{"neither", nil, nil, true, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			ha := bareHarness(t, contextostest.NewPlanner(lookupPlan(), refundPlan(1200)), &contextostest.Options{Runtime: contextos.Options{Overlays: tc.recorded}})
			scriptDefaults(ha, "")
			req, rc := refundRequest(t, 1200, true)
			res := ha.Invoke(req, rc)
			contextostest.AssertStatus(t, res, decision.Decided)
			p, err := ha.Replays.Get(ctx, res.ReplayPacketID)
			if err != nil {
				t.Fatal(err)
			}
			if p.Ledger == nil || p.Ledger.LedgerHash != res.Compiled.ContextLedger.LedgerHash {
				t.Fatalf("the packet pins ledger %+v, the run's ledger_hash is %s", p.Ledger, res.Compiled.ContextLedger.LedgerHash)
			}
			hb := bareHarness(t, contextostest.NewPlanner(), &contextostest.Options{Runtime: contextos.Options{Overlays: tc.replayed}})
			out, err := hb.Runtime.Replay(ctx, p)
			if err != nil {
				t.Fatal(err)
			}
			if tc.wantEqual {
				if out.Status != replay.ReplayEqual {
					t.Fatalf("replay = %s: %+v", out.Status, out.Diffs)
				}
				return
			}
			if out.Status != replay.ReplayMismatch {
				t.Fatalf("replay = %s, want a mismatch", out.Status)
			}
			found := false
			for _, d := range out.Diffs {
				if d.Kind == replay.DiffCompiledContext && strings.Contains(d.Detail, tc.wantDetail) {
					found = true
				}
			}
			if !found {
				t.Errorf("no compiled_context diff saying %q: %+v", tc.wantDetail, out.Diffs)
			}
		})
	}
}

// A packet whose pinned context ledger was changed after capture is
// refused as tampered, before any replay.
func TestReplayRefusesTamperedLedger(t *testing.T) {
	ctx := context.Background()
	prod := &pack.Overlay{OverlayID: "ov_prod", Base: "ctxpack.support@1.0.0", Environment: "prod"}
	h := bareHarness(t, contextostest.NewPlanner(lookupPlan(), refundPlan(1200)), &contextostest.Options{Runtime: contextos.Options{Overlays: []*pack.Overlay{prod}}})
	scriptDefaults(h, "")
	req, rc := refundRequest(t, 1200, true)
	res := h.Invoke(req, rc)
	p, err := h.Replays.Get(ctx, res.ReplayPacketID)
	if err != nil {
		t.Fatal(err)
	}
	for name, edit := range map[string]func(p *replay.Packet){
		"overlay removed":        func(p *replay.Packet) { p.Ledger.Packs[0].Overlay = nil },
		"compiled hash switched": func(p *replay.Packet) { p.Ledger.CompiledContextHash = p.Ledger.LedgerHash },
	} {
		q := *p
		l := *p.Ledger
		l.Packs = append([]compiler.LedgerPack(nil), l.Packs...)
		q.Ledger = &l
		edit(&q)
		out, err := h.Runtime.Replay(ctx, &q)
		if !errors.Is(err, replay.ErrTamper) || out == nil || out.Status != replay.Invalid {
			t.Errorf("%s: replay = %v, %v; want invalid with ErrTamper", name, out, err)
		}
	}
}
