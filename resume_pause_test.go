package contextos_test

import (
	"context"
	"errors"
	"testing"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/contextostest"
	"github.com/contextos/contextos/decision"
	"github.com/contextos/contextos/gateway"
)

// ResumeInput.Pause names the pause the input answers (its DEFERRED
// record): a run that awaits another pause, or none, is refused with
// ErrNotResumable and left as it is; the pause it names is continued.
// Without it, an approval decided for a pause already continued landed
// on whatever the run awaited next.
func TestResumePauseNamesThePauseAnswered(t *testing.T) {
	ctx := context.Background()
	h := bareHarness(t, cardPlanner(), nil)
	scriptDefaults(h, "")
	paused := h.Invoke(requestFor(t, "req_resume_pause", 4200))
	contextostest.AssertPending(t, paused, "GATE_FINANCE_APPROVAL")
	pend, err := h.Runtime.PendingApprovals(ctx, contextos.RunList{paused.RunID})
	if err != nil || len(pend) != 1 || pend[0].RecordID != paused.Record.RecordID {
		t.Fatalf("pending: %v %v", pend, err)
	}
	a := contextostest.Approval(paused.Pending, contextostest.Approver{UserID: "user_finance_lead_77", Role: "finance_lead"}, contextostest.FixedTime())
	in := contextos.ResumeInput{Approvals: []gateway.Approval{a}, Pause: "dr_another_pause"}
	if _, err := h.Runtime.Resume(ctx, paused.RunID, in); !errors.Is(err, contextos.ErrNotResumable) {
		t.Fatalf("a resume naming another pause: %v; want ErrNotResumable", err)
	}
	if again, err := h.Runtime.PendingApprovals(ctx, contextos.RunList{paused.RunID}); err != nil || len(again) != 1 || again[0].RecordID != pend[0].RecordID {
		t.Fatalf("the refused resume changed the pause: %v %v", again, err)
	}
	in.Pause = pend[0].RecordID
	res, err := h.Runtime.Resume(ctx, paused.RunID, in)
	if err != nil || res.Status != decision.Decided {
		t.Fatalf("a resume naming its pause: %v %v", res, err)
	}
	if _, err := h.Runtime.Resume(ctx, paused.RunID, in); !errors.Is(err, contextos.ErrNotResumable) {
		t.Fatalf("the same resume again: %v; want ErrNotResumable", err)
	}
}
