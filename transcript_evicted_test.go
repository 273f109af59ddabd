package contextos_test

import (
	"context"
	"testing"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/contextostest"
	"github.com/contextos/contextos/decision"
	"github.com/contextos/contextos/gateway"
)

// A transcript that keeps a bounded number of runs (gateway's
// MemoryTranscript with a limit, the gateway's default keeps 10,000) may
// drop a paused run's entries; the run's resume goes on from its
// checkpoint's chain state and appends from there, so the store then holds
// the run's entries from a sequence past 0. A later resume of the run must
// not refuse that transcript as forged: the run's own runtime wrote every
// entry of it.
func TestResumeAfterTheTranscriptDroppedTheRunsEarlyEntries(t *testing.T) {
	two := refundPlan(4200)
	two.Steps = append(two.Steps, contextos.Step{CapabilityID: "adp_payments.issue_refund", Args: map[string]any{"order_id": "ord_882", "amount_inr": 4100, "currency": "INR"}})
	store := gateway.NewMemoryTranscriptLimit(1)
	h := bareHarness(t, contextostest.NewPlanner(lookupPlan(), two, lookupPlan()), &contextostest.Options{Runtime: contextos.Options{Transcripts: store}})
	scriptDefaults(h, "")
	req, rc := refundRequest(t, 4200, true)
	paused := h.Invoke(req, rc)
	contextostest.AssertPending(t, paused, "GATE_FINANCE_APPROVAL")

	// Another run starts: the transcript drops the paused run's entries.
	req2, rc2 := refundRequest(t, 4200, true)
	rc2.RunID = paused.RunID + "_other"
	h.Invoke(req2, rc2)
	if n := len(store.Entries(paused.RunID)); n != 0 {
		t.Fatalf("the transcript kept %d entries of the paused run", n)
	}

	approve := func(p *contextos.Result) []gateway.Approval {
		return []gateway.Approval{contextostest.Approval(p.Pending, contextostest.Approver{UserID: "user_finance_lead_77", Role: "finance_lead"}, contextostest.FixedTime())}
	}
	again, err := h.Runtime.Resume(context.Background(), paused.RunID, contextos.ResumeInput{Approvals: approve(paused)})
	if err != nil {
		t.Fatal(err)
	}
	if again.Status != decision.Deferred {
		t.Fatalf("the resumed run ended %s; want it paused at the second refund", again.Status)
	}
	res, err := h.Runtime.Resume(context.Background(), paused.RunID, contextos.ResumeInput{Approvals: approve(again)})
	if err != nil {
		t.Fatalf("the second resume of a run whose early entries the transcript dropped was refused: %v", err)
	}
	if res.Status != decision.Decided {
		t.Fatalf("status %s, want DECIDED", res.Status)
	}
}

// Invoking an ended run again answers its stored result (reopen). The run
// was resumed after the bounded transcript dropped its early entries, so
// the store holds its later entries alone: the repeated Invoke must still
// answer, not refuse the run's own transcript.
func TestInvokeAgainAfterTheTranscriptDroppedTheRunsEarlyEntries(t *testing.T) {
	store := gateway.NewMemoryTranscriptLimit(1)
	h := bareHarness(t, contextostest.NewPlanner(lookupPlan(), refundPlan(4200), lookupPlan()), &contextostest.Options{Runtime: contextos.Options{Transcripts: store}})
	scriptDefaults(h, "")
	req, rc := refundRequest(t, 4200, true)
	paused := h.Invoke(req, rc)
	contextostest.AssertPending(t, paused, "GATE_FINANCE_APPROVAL")
	req2, rc2 := refundRequest(t, 4200, true)
	rc2.RunID = paused.RunID + "_other"
	h.Invoke(req2, rc2)

	a := contextostest.Approval(paused.Pending, contextostest.Approver{UserID: "user_finance_lead_77", Role: "finance_lead"}, contextostest.FixedTime())
	done, err := h.Runtime.Resume(context.Background(), paused.RunID, contextos.ResumeInput{Approvals: []gateway.Approval{a}})
	if err != nil {
		t.Fatal(err)
	}
	if done.Status != decision.Decided {
		t.Fatalf("status %s, want DECIDED", done.Status)
	}
	again, err := h.Runtime.Invoke(context.Background(), req, rc)
	if err != nil {
		t.Fatalf("invoking the ended run again was refused: %v", err)
	}
	if again.Record == nil || again.Record.RecordID != done.Record.RecordID {
		t.Fatalf("invoking the ended run again answered %+v, want its record %s", again.Record, done.Record.RecordID)
	}
}
