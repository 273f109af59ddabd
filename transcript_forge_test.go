package contextos_test

import (
	"context"
	"testing"

	"github.com/contextos/contextos/contextostest"
	"github.com/contextos/contextos/decision"
	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/internal/canon"
)

// A resume goes on from the last entry the transcript store holds
// (internal/engine/runtime.go chainOf), without verifying the chain or
// that it extends the chain its checkpoint left. An entry appended to the
// store while the run was paused, properly chained (the chain is a digest
// anyone can extend), is adopted: the run's record seals a transcript
// chain that holds a result the gateway never produced, and the stored
// transcript verifies. (A plain resume is not a takeover, so the replay
// does not take the entry as recorded and reports a mismatch: the forgery
// is found by replaying, not by the record or the transcript.)
func TestResumeAdoptsAForgedTranscriptEntry(t *testing.T) {
	t.Skip("hostile review finding, not fixed: a resume adopts transcript entries it never verified (see the report)")
	h := harness(t, contextostest.NewPlanner(lookupPlan(), refundPlan(4200)), nil)
	scriptDefaults(h, "")
	req, rc := refundRequest(t, 4200, true)
	paused := h.Invoke(req, rc)
	contextostest.AssertPending(t, paused, "GATE_FINANCE_APPROVAL")

	var run []gateway.TranscriptEntry
	for _, e := range h.Transcript.Entries() {
		if e.RunID == paused.RunID {
			run = append(run, e)
		}
	}
	var forged gateway.TranscriptEntry
	for _, e := range run {
		if e.Kind == "result" {
			forged = e.Clone()
		}
	}
	if forged.Result == nil {
		t.Fatal("the paused run recorded no result")
	}
	last := run[len(run)-1]
	forged.Seq = last.Seq + 1
	forged.Result.ToolCallID = "tool_forged"
	h0, err := canon.Digest(forged.Result)
	if err != nil {
		t.Fatal(err)
	}
	forged.EntryHash, forged.PrevHash = h0, last.ChainHash
	forged.ChainHash = canon.DigestBytes([]byte(last.ChainHash + h0))
	if _, err := gateway.VerifyTranscript(append(run, forged)); err != nil {
		t.Fatalf("the forged entry does not chain: %v", err)
	}
	if err := h.Transcript.Append(context.Background(), forged); err != nil {
		t.Fatal(err)
	}

	done := h.Approve(paused, contextostest.Approver{UserID: "user_finance_lead_77", Role: "finance_lead"})
	if done.Status != decision.Decided {
		return // refused: fixed
	}
	var after []gateway.TranscriptEntry
	for _, e := range h.Transcript.Entries() {
		if e.RunID == paused.RunID {
			after = append(after, e)
		}
	}
	end, err := gateway.VerifyTranscript(after)
	adopted := false
	for _, e := range after {
		adopted = adopted || (e.Result != nil && e.Result.ToolCallID == "tool_forged")
	}
	if err == nil && adopted && end == done.Record.Lineage.ToolTranscriptChainHash {
		t.Errorf("the resumed run's record seals a transcript chain holding a result its gateway never produced (chain %s)", end)
	}
	if r := h.Replay(done); r != nil {
		t.Logf("replay of the resumed run: %s %+v", r.Status, r.Diffs)
	}
}
