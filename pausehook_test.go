package contextos_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/contextostest"
	"github.com/contextos/contextos/decision"
	"github.com/contextos/contextos/gateway"
)

// Options.OnPause is told of each pause once it is persisted: the pending
// approval as PendingApprovals lists it, its arguments redacted; a run
// that does not pause, a resume that ends the run and a replay of the
// paused run do not call it, and a hook that panics does not change the
// run.
func TestOnPause(t *testing.T) {
	ctx := context.Background()
	var mu sync.Mutex
	var told []contextos.PendingApproval
	var h *contextostest.Harness
	var persisted []bool
	opts := &contextostest.Options{}
	opts.Runtime.OnPause = func(ctx context.Context, p contextos.PendingApproval) {
		// The pause is persisted before the hook hears of it: the
		// listing holds it already.
		list, err := h.Runtime.PendingApprovals(ctx, contextos.RunList{p.RunID})
		mu.Lock()
		defer mu.Unlock()
		told = append(told, p)
		persisted = append(persisted, err == nil && len(list) == 1 && list[0].ActionDigest == p.ActionDigest)
	}
	h = bareHarness(t, cardPlanner(), opts)
	scriptDefaults(h, "")

	small := h.Invoke(requestFor(t, "req_hook_small", 1200))
	if small.Status != decision.Decided || len(told) != 0 {
		t.Fatalf("a run without a pause: %s, hook told %d times", small.Status, len(told))
	}
	paused := h.Invoke(requestFor(t, "req_hook_paused", 4200))
	contextostest.AssertPending(t, paused, "GATE_FINANCE_APPROVAL")
	if len(told) != 1 {
		t.Fatalf("hook told %d times of one pause", len(told))
	}
	if !persisted[0] {
		t.Error("the hook was called before the pause was persisted (PendingApprovals did not list it)")
	}
	want, err := h.Runtime.PendingApprovals(ctx, contextos.RunList{paused.RunID})
	if err != nil || len(want) != 1 {
		t.Fatalf("PendingApprovals: %v, %v", want, err)
	}
	if !jsonEqual(t, told[0], want[0]) {
		t.Errorf("hook told %+v\nPendingApprovals lists %+v", told[0], want[0])
	}
	b, _ := json.Marshal(told[0])
	if strings.Contains(string(b), cardNumber) || told[0].Args["card"] != gateway.Redacted {
		t.Errorf("the hook saw the card number: %s", b)
	}
	res := h.Approve(paused, contextostest.Approver{UserID: "user_finance_lead_77", Role: "finance_lead"})
	if res.Status != decision.Decided || len(told) != 1 {
		t.Errorf("resume to the end: %s, hook told %d times (want 1)", res.Status, len(told))
	}
	contextostest.AssertReplayEqual(t, h.Replay(res))
	if len(told) != 1 {
		t.Errorf("a replay called the hook: told %d times", len(told))
	}
}

// A pause hook that panics leaves the run paused as it would be without
// the hook.
func TestOnPausePanics(t *testing.T) {
	opts := &contextostest.Options{}
	opts.Runtime.OnPause = func(context.Context, contextos.PendingApproval) { panic("hook broke") }
	h := bareHarness(t, cardPlanner(), opts)
	scriptDefaults(h, "")
	paused := h.Invoke(requestFor(t, "req_hook_panic", 4200))
	contextostest.AssertPending(t, paused, "GATE_FINANCE_APPROVAL")
	res := h.Approve(paused, contextostest.Approver{UserID: "user_finance_lead_77", Role: "finance_lead"})
	contextostest.AssertStatus(t, res, decision.Decided)
}
