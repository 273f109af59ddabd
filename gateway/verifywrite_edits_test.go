package gateway_test

import (
	"reflect"
	"testing"

	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/gateway/gatewaytest"
	"github.com/contextos/contextos/internal/deepcheck"
	"github.com/contextos/contextos/runcontext"
)

// TestVerifyWriteEditingChangesNothing: RunOptions.VerifyWrite is told
// the call's own policy decisions, and the run keeps the error it
// returns as its refusal. A hook that edits the decisions it is told,
// and keeps the errors it returned and edits them later (at its next
// call, and after the run's last), changes neither the results the run
// returned, the transcript entries and their chain hash, nor the
// decisions CallDecisions reports: they are what they are with a hook
// that edits nothing.
func TestVerifyWriteEditingChangesNothing(t *testing.T) {
	t.Parallel()
	withStep := func(c gateway.CallRequest, i int) gateway.CallRequest {
		c.Step = gateway.StepID{Index: i}
		return c
	}
	calls := []gateway.CallRequest{lookupCall(), withStep(refundCall(4200), 3), withStep(refundCall(1200), 4), withStep(refundCall(4200), 5)}
	play := func(t *testing.T, edit bool) callsRecord {
		f := newFixture(t, editPack(ruleAppliesToRefunds), func(_ *fixture, _ *runcontext.RunContext, req *runcontext.InvokeRequest, _ map[string]gateway.Capability) {
			req.Input.Context["refund_amount"] = 100
		})
		rec := &gatewaytest.Recorder{}
		opts := f.opts
		opts.Transcript = canonChecked{t, rec}
		gw, err := gateway.New([]gateway.Registration{
			{AdapterID: "adp_orders", Adapter: f.orders, Capabilities: map[string]gateway.Capability{"lookup": {ArgsSchema: lookupSchema, Scopes: []string{"orders.read"}}}},
			{AdapterID: "adp_payments", Adapter: f.payments, Capabilities: map[string]gateway.Capability{"issue_refund": {ArgsSchema: refundSchema, Scopes: []string{"payments.refund"}, CostCents: 0.31}}},
		}, &opts)
		if err != nil {
			t.Fatal(err)
		}
		var o callsRecord
		var kept []*gateway.ToolError
		verify := func(w *gateway.WriteCall) *gateway.ToolError {
			o.Told++
			if edit {
				deepcheck.Vandalize(reflect.ValueOf(w.Decisions))
				deepcheck.Vandalize(reflect.ValueOf(kept))
			}
			if o.Told > 1 {
				return nil
			}
			// The first write is blocked; the hook keeps its error.
			te := gateway.NewToolError(gateway.CodePermissionDenied, false, "missing_evidence: order_lookup",
				map[string]any{"missing_evidence": []string{"order_lookup"}, "names": []any{"order_lookup", map[string]any{"rule": "R_1"}}, "by": map[string]any{"decision_key": "support.refund.execute"}})
			kept = append(kept, te)
			return te
		}
		run, err := gw.NewRun(gateway.RunConfig{Prepared: f.prepared, Compiled: f.cc, Request: f.req, RunContext: f.rc, Meter: runcontext.NewMeter(f.rc.RunBudget, f.now)},
			&gateway.RunOptions{VerifyWrite: verify})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range calls {
			res, err := run.Call(ctx, c)
			if err != nil {
				t.Fatal(err)
			}
			o.Results = append(o.Results, res)
		}
		if edit {
			deepcheck.Vandalize(reflect.ValueOf(kept))
		}
		for _, res := range o.Results {
			o.Decisions = append(o.Decisions, run.CallDecisions(res.ToolCallID))
		}
		finishCalls(t, &o, rec, run)
		return o
	}
	want := play(t, false)
	got := play(t, true)
	if s := []gateway.Status{want.Results[1].Status, want.Results[2].Status, want.Results[3].Status}; want.Told != 3 ||
		s[0] != gateway.StatusBlocked || s[1] != gateway.StatusCompleted || s[2] != gateway.StatusPaused || len(want.Decisions[1]) == 0 {
		t.Fatalf("the plain run asked the hook %d times, its writes are %v with %d decisions: the test needs a refusal, a write the hook lets go and one a gate holds, each with its own decisions",
			want.Told, s, len(want.Decisions[1]))
	}
	sameCalls(t, "a hook that edits what it is told and what it returned", want, got)
}
