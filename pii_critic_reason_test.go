package contextos_test

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/contextostest"
	"github.com/contextos/contextos/decision"
)

// A host critic's reason is free text from outside the run, as an
// approver's reason is: personal data in it (an IBAN, a card number, an
// email address) reaches no verdict event, result, record, checkpoint or
// packet, whatever rules the pack names. Found by
// TestNothingLeaksGeneratedRuns.
func TestCriticReasonPersonalDataNeverStored(t *testing.T) {
	const reason = "send it to DE89 3704 0044 0532 0130 00 not card 4111-1111-1111-1111, ask jane.doe@example.com"
	leaked := []string{"DE89 3704 0044 0532 0130 00", "4111-1111-1111-1111", "jane.doe@example.com"}
	for _, verdict := range []contextos.CriticVerdict{contextos.VerdictReplan, contextos.VerdictReject} {
		t.Run(string(verdict), func(t *testing.T) {
			cps := &capturingCheckpoints{InMemoryCheckpoints: contextos.NewInMemoryCheckpoints()}
			pks := &capturingPackets{InMemoryPackets: contextos.NewInMemoryPackets()}
			p := contextos.PlannerFunc(func(_ context.Context, pr *contextos.PlanRequest) (*contextos.Plan, error) {
				if pr.Turn == 0 {
					return lookupPlan(), nil
				}
				return deniedPlan(), nil
			})
			h := bareHarness(t, p, &contextostest.Options{Runtime: contextos.Options{Critic: &secretCritic{verdict: verdict, reason: reason},
				Checkpoints: cps, Replays: pks}})
			scriptDefaults(h, "")
			req, rc := refundRequest(t, 1200, true)
			var events []byte
			var final *contextos.Result
			for ev, err := range h.Runtime.Stream(context.Background(), req, rc) {
				if err != nil {
					t.Fatal(err)
				}
				b, _ := json.Marshal(ev)
				events = append(events, b...)
				if ev.Final != nil {
					final = ev.Final
				}
			}
			if final == nil {
				t.Fatal("no result")
			}
			if !bytes.Contains(events, []byte(`"`+string(verdict)+`"`)) {
				t.Fatal("the critic's verdict was not taken")
			}
			recs, _ := h.Decisions.List(context.Background(), decision.Filter{})
			arte := map[string][]byte{"events": events}
			arte["result"], _ = json.Marshal(final)
			arte["records"], _ = json.Marshal(recs)
			for i, b := range cps.data {
				arte["checkpoint "+string(rune('a'+i))] = b
			}
			for i, b := range pks.data {
				arte["packet "+string(rune('a'+i))] = b
			}
			for what, b := range arte {
				for _, s := range leaked {
					if bytes.Contains(b, []byte(s)) {
						t.Errorf("the %s holds %q", what, s)
					}
				}
			}
		})
	}
}
