package contextos_test

import (
	"context"
	"errors"
	"testing"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/contextostest"
	"github.com/contextos/contextos/decision"
	"github.com/contextos/contextos/pack"
	"github.com/contextos/contextos/replay"
)

// A packet recorded under the prod overlay, with its context_ledger
// dropped (or swapped for another) and the packet resealed, is refused as
// tampered: the record names its ledger (replay.ledger_hash, inside
// record_hash), so the pin cannot be dropped to replay under any
// environment unchecked (a hostile review found it could).
func TestLedgerPinCannotBeDropped(t *testing.T) {
	ctx := context.Background()
	prod := &pack.Overlay{OverlayID: "ov_prod", Base: "ctxpack.support@1.0.0", Environment: "prod",
		EndpointRefs: map[string]string{"adp_payments": "internal://payments-prod"}}
	ha := bareHarness(t, contextostest.NewPlanner(lookupPlan(), refundPlan(1200)), &contextostest.Options{Runtime: contextos.Options{Overlays: []*pack.Overlay{prod}}})
	scriptDefaults(ha, "")
	req, rc := refundRequest(t, 1200, true)
	res := ha.Invoke(req, rc)
	contextostest.AssertStatus(t, res, decision.Decided)
	p, err := ha.Replays.Get(ctx, res.ReplayPacketID)
	if err != nil {
		t.Fatal(err)
	}
	q := *p
	q.Ledger = nil
	if got := res.Record.Replay; got == nil || got.LedgerHash != p.Ledger.LedgerHash || got.LedgerHash == "" {
		t.Fatalf("the record's replay handle %+v does not name the ledger %s", got, p.Ledger.LedgerHash)
	}
	hb := bareHarness(t, contextostest.NewPlanner(), &contextostest.Options{Runtime: contextos.Options{}})
	// Sealing refuses it; a packet sealed by other means is refused by
	// Replay.
	if err := q.Seal(); !errors.Is(err, replay.ErrTamper) {
		t.Errorf("Seal of a packet whose ledger was dropped: %v, want ErrTamper", err)
	}
	if _, err := hb.Runtime.Replay(ctx, &q); !errors.Is(err, replay.ErrTamper) {
		t.Errorf("a packet whose ledger was dropped replays: %v, want ErrTamper", err)
	}
	r := *p
	l := *p.Ledger
	l.Packs = nil
	r.Ledger = &l
	if err := r.Seal(); !errors.Is(err, replay.ErrTamper) {
		t.Errorf("Seal of a packet whose ledger was swapped: %v, want ErrTamper", err)
	}
	if _, err := hb.Runtime.Replay(ctx, &r); !errors.Is(err, replay.ErrTamper) {
		t.Errorf("a packet whose ledger was swapped and resealed replays: %v, want ErrTamper", err)
	}
}
