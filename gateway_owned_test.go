package contextos_test

import (
	"context"
	"testing"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/runcontext"
)

// TestPluginEditingItsRunContextChangesNotTheGateway: the gateway keeps
// the runtime's own request and run context without copying them again
// (gatewayhook.Owned). That holds only while nobody else holds them: a
// planner that edits every member of its request and run context the
// gateway's checks read (the tenant, the safety mode, the budget's tool
// calls and payload size, the user, the attachments, the input context)
// changes neither the calls the run makes nor their results, ids and
// statuses, nor the run's record.
func TestPluginEditingItsRunContextChangesNotTheGateway(t *testing.T) {
	plain := contextos.PlannerFunc(func(ctx context.Context, req *contextos.PlanRequest) (*contextos.Plan, error) {
		return refundPlan(1200), nil
	})
	editing := contextos.PlannerFunc(func(ctx context.Context, req *contextos.PlanRequest) (*contextos.Plan, error) {
		rc := req.Run
		rc.TenantID = "tenant_other"
		rc.SafetyMode = runcontext.ReadOnly
		rc.RunBudget.MaxToolCalls = 0
		rc.RunBudget.MaxPayloadBytes = 1
		rc.RunBudget.MaxCostCents = 0
		rc.User.UserID = "user_other"
		rc.User.Delegation = nil
		req.Request.Attachments = nil
		req.Request.Input.Context["refund_amount"] = 999999.0
		return refundPlan(1200), nil
	})
	want := harness(t, plain, nil)
	wreq, wrc := refundRequest(t, 1200, true)
	wres := want.Invoke(wreq, wrc)
	got := harness(t, editing, nil)
	req, rc := refundRequest(t, 1200, true)
	res := got.Invoke(req, rc)
	if res.Record.Status != wres.Record.Status {
		t.Errorf("status %s; with a planner that edits nothing %s", res.Record.Status, wres.Record.Status)
	}
	if len(res.ToolResults) != len(wres.ToolResults) || len(res.ToolResults) == 0 {
		t.Fatalf("%d tool results; with a planner that edits nothing %d", len(res.ToolResults), len(wres.ToolResults))
	}
	for i, r := range res.ToolResults {
		w := wres.ToolResults[i]
		if r.Status != w.Status || r.ToolCallID != w.ToolCallID || r.Metadata.IdempotencyKey != w.Metadata.IdempotencyKey || r.Metadata.ToolTranscriptID != w.Metadata.ToolTranscriptID {
			t.Errorf("tool result %d: %s %s %s %s; with a planner that edits nothing %s %s %s %s", i,
				r.Status, r.ToolCallID, r.Metadata.IdempotencyKey, r.Metadata.ToolTranscriptID, w.Status, w.ToolCallID, w.Metadata.IdempotencyKey, w.Metadata.ToolTranscriptID)
		}
	}
}
