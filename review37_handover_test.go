package contextos_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/contextostest"
	"github.com/contextos/contextos/decision"
	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/runcontext"
)

// TestStreamConsumerEditingItsRequestChangesNotTheRun: the request a host
// hands to Stream is the run's as it was handed over. A consumer that
// edits that request while the run goes (it is the host's own value, and
// the consumer runs between the run's steps) changes nothing the run
// records or replays: its record, checkpoint and replay packet are those
// of a run whose consumer edits nothing, and the packet replays equal.
func TestStreamConsumerEditingItsRequestChangesNotTheRun(t *testing.T) {
	t.Parallel()
	type outcome struct {
		Status, Record, Checkpoint, Packets string
		Refunds                             int
	}
	asJSON := func(t *testing.T, v any) string {
		t.Helper()
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	play := func(t *testing.T, edit bool) outcome {
		h := harness(t, contextostest.NewPlanner(lookupPlan(), refundPlan(1200)), nil)
		req, rc := refundRequest(t, 1200, true)
		var o outcome
		edited := false
		for ev, err := range h.Runtime.Stream(context.Background(), req, rc) {
			if err != nil {
				o.Status = "error: " + err.Error()
				break
			}
			if ev.Kind == contextos.EventResult {
				o.Status, o.Record = string(ev.Final.Status), asJSON(t, ev.Final.Record)
				continue
			}
			if edit && !edited && ev.Kind == contextos.EventCompiled {
				// After the compile: the amount the finance gate reads,
				// the identity flag the record's required evidence reads,
				// and the message.
				edited = true
				req.Input.Context["refund_amount"] = 99999
				req.Input.Context["identity_verified"] = false
				req.Input.Message = "edited after the compile"
			}
		}
		if c, err := h.Checkpoints.Load(context.Background(), rc.RunID); err == nil {
			o.Checkpoint = string(c.Data)
		}
		for _, id := range h.PacketIDs() {
			p, err := h.Replays.Get(context.Background(), id)
			if err != nil {
				t.Fatal(err)
			}
			o.Packets += asJSON(t, p)
		}
		o.Refunds = h.Adapter("adp_payments").CallCount("issue_refund")
		return o
	}
	want := play(t, false)
	if want.Status != string(decision.Decided) || want.Refunds != 1 {
		t.Fatalf("the plain run is %s with %d refunds", want.Status, want.Refunds)
	}
	got := play(t, true)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("a Stream consumer editing the request it handed over changed the run (-plain +editing):\n%s", clip(diff))
	}
}

// TestResumeStreamConsumerEditingItsBudgetChangesNotTheRun: the budget a
// host hands to Resume is the run's from then on. A ResumeStream consumer
// that edits the RunBudget it handed over while the run goes changes
// neither what the checkpoint nor what the replay packet records of the
// resume: both hold the budget the resume gave.
func TestResumeStreamConsumerEditingItsBudgetChangesNotTheRun(t *testing.T) {
	t.Parallel()
	play := func(t *testing.T, edit bool) (status, checkpoint, packets string) {
		h := harness(t, contextostest.NewPlanner(lookupPlan(), refundPlan(4200)), nil)
		req, rc := refundRequest(t, 4200, true)
		paused := h.Invoke(req, rc)
		contextostest.AssertPending(t, paused, "GATE_FINANCE_APPROVAL")
		b := rc.RunBudget
		if b.TotalTokens == 0 {
			b = runcontext.DefaultRunBudget()
		}
		b.MaxToolCalls += 5
		a := contextostest.Approval(paused.Pending, contextostest.Approver{UserID: "user_finance_lead_77", Role: "finance_lead"}, contextostest.FixedTime())
		for ev, err := range h.Runtime.ResumeStream(context.Background(), paused.RunID, contextos.ResumeInput{Approvals: []gateway.Approval{a}, Budget: &b}) {
			if err != nil {
				t.Fatal(err)
			}
			if ev.Kind == contextos.EventResult {
				status = string(ev.Final.Status)
			}
			if edit {
				b.MaxToolCalls, b.TotalTokens, b.MaxCostCents = 999, 999999, 9999
			}
		}
		if c, err := h.Checkpoints.Load(context.Background(), paused.RunID); err == nil {
			checkpoint = string(c.Data)
		}
		for _, id := range h.PacketIDs() {
			p, err := h.Replays.Get(context.Background(), id)
			if err != nil {
				t.Fatal(err)
			}
			pb, _ := json.Marshal(p)
			packets += string(pb)
		}
		return status, checkpoint, packets
	}
	ws, wc, wp := play(t, false)
	gs, gc, gp := play(t, true)
	if diff := cmp.Diff([]string{ws, wc, wp}, []string{gs, gc, gp}); diff != "" {
		t.Errorf("a ResumeStream consumer editing the budget it handed over changed the run's status, checkpoint or packet (-plain +editing):\n%s", clip(diff))
	}
}

// clip keeps a long diff readable.
func clip(s string) string {
	if len(s) > 3000 {
		return s[:3000] + "…"
	}
	return s
}
