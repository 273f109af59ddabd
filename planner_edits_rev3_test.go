package contextos_test

import (
	"context"
	"testing"

	"github.com/contextos/contextos"
)

// TestPlannerEditingItsRequestChangesNotTheRun: a planner is given the
// run's request and run context to read. One that edits them (a member
// of the input context the run's facts are read from, the run's
// metadata) changes neither the run it plans nor its checkpoint: the
// checkpoint writer keeps the request's and the run context's JSON from
// the run's first save, and holds itself to json.Marshal of the state
// (VerifyCheckpointEncoding, on for this package), so an edit made
// between saves is a runtime panic here and, outside tests, a checkpoint
// that no longer says what the run read.
func TestPlannerEditingItsRequestChangesNotTheRun(t *testing.T) {
	plain := contextos.PlannerFunc(func(ctx context.Context, req *contextos.PlanRequest) (*contextos.Plan, error) {
		return refundPlan(1200), nil
	})
	editing := contextos.PlannerFunc(func(ctx context.Context, req *contextos.PlanRequest) (*contextos.Plan, error) {
		req.Request.Input.Context["refund_amount"] = 999999.0
		req.Request.Input.Context["identity_verified"] = false
		if req.Run.Metadata == nil {
			req.Run.Metadata = map[string]any{}
		}
		req.Run.Metadata["edited_by_planner"] = true
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
	if req.Input.Context["refund_amount"] != 1200 || rc.Metadata["edited_by_planner"] != nil {
		t.Errorf("the caller's request or run context was edited by the planner: %v, %v", req.Input.Context, rc.Metadata)
	}
}
