package gateway_test

import (
	"context"
	"reflect"
	"testing"

	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/gateway/gatewaytest"
	"github.com/contextos/contextos/internal/deepcheck"
	"github.com/contextos/contextos/runcontext"
)

// TestObserverEditingAttemptsChangesNothing: RunOptions.Observe is told
// each attempt before the call's result is built and recorded. An
// observer that edits everything the attempt reaches (the outcome's
// output, lists and citations, the error's details) changes neither the
// results the run returns, nor the transcript entries and their chain
// hash: they are what they are with an observer that edits nothing.
func TestObserverEditingAttemptsChangesNothing(t *testing.T) {
	t.Parallel()
	calls := []gateway.CallRequest{
		lookupCall(),
		{CapabilityID: "adp_policy.eval", Step: gateway.StepID{Index: 2}, Args: map[string]any{"order_id": "ord_881"}},
		refundCall(1200),
	}
	play := func(t *testing.T, edit bool) callsRecord {
		f := newFixture(t, lowValue)
		rec := &gatewaytest.Recorder{}
		opts := f.opts
		opts.Transcript = canonChecked{t, rec}
		failing := gateway.AdapterFunc(func(context.Context, *gateway.Call) (*gateway.Outcome, error) {
			return nil, &gateway.ToolError{Code: gateway.CodeExecutionFailed, Reason: "dependency_failed", Message: "policy service down", Details: map[string]any{"upstream": "policy"}}
		})
		f.orders.On("lookup").Return(&gateway.Outcome{Output: map[string]any{"order_id": "ord_881", "lines": []any{map[string]any{"sku": "a"}}},
			Citations: []gateway.Citation{{EvidenceRef: "kg:order:ord_881"}}, RiskTags: []string{"pii"}, Signals: []string{"ok"}, Artifacts: []string{"art_1"}})
		gw, err := gateway.New([]gateway.Registration{
			{AdapterID: "adp_orders", Adapter: f.orders, Capabilities: map[string]gateway.Capability{"lookup": {ArgsSchema: lookupSchema, Scopes: []string{"orders.read"}}}},
			{AdapterID: "adp_policy", Adapter: failing, Capabilities: map[string]gateway.Capability{"eval": {}}},
			{AdapterID: "adp_payments", Adapter: f.payments, Capabilities: map[string]gateway.Capability{"issue_refund": {ArgsSchema: refundSchema, Scopes: []string{"payments.refund"}, CostCents: 0.31}}},
		}, &opts)
		if err != nil {
			t.Fatal(err)
		}
		var o callsRecord
		observe := func(a gateway.Attempt) {
			o.Told++
			if edit {
				deepcheck.Vandalize(reflect.ValueOf(&a))
			}
		}
		run, err := gw.NewRun(gateway.RunConfig{Prepared: f.prepared, Compiled: f.cc, Request: f.req, RunContext: f.rc, Meter: runcontext.NewMeter(f.rc.RunBudget, f.now)},
			&gateway.RunOptions{Observe: observe})
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
		finishCalls(t, &o, rec, run)
		return o
	}
	want := play(t, false)
	got := play(t, true)
	if want.Told < len(calls) || want.Results[1].Status.Succeeded() || !want.Results[2].Status.Succeeded() {
		t.Fatalf("the plain run observed %d attempts, its eval is %s and refund %s: the test needs a failed call and a write", want.Told, want.Results[1].Status, want.Results[2].Status)
	}
	sameCalls(t, "an observer that edits the attempts it is told", want, got)
}
