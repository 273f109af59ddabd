package gateway_test

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/internal/deepcheck"
	"github.com/contextos/contextos/pack"
	"github.com/contextos/contextos/runcontext"
)

// A call's own policy decisions (CallDecisions) survive a later call with
// the same tool_call_id that is refused before policy runs (here: an
// attachment the request does not declare), which has none of its own.
func TestCallDecisionsSurviveALaterRefusalOfTheSameCall(t *testing.T) {
	t.Parallel()
	f := newFixture(t, lowValue, func(fx *fixture, _ *runcontext.RunContext, _ *runcontext.InvokeRequest, _ map[string]gateway.Capability) {
		fx.editPack = func(p *pack.Pack) {
			no := false
			dsl := &p.PolicyLayer.PolicyBundles[0].PolicyDSL
			dsl.Rules = append(dsl.Rules, pack.Rule{RuleID: "R_TOOL_REFUND_CAP", If: json.RawMessage(`{">":[{"var":["tool.args.amount_inr",0]},1000]}`),
				Then: &pack.Effect{Allow: &no, Reason: "refunds above 1000 INR go through the refunds desk"}, Rationale: "Large refunds are settled by the refunds desk."})
		}
	})
	if _, err := f.run.Call(ctx, lookupCall()); err != nil {
		t.Fatal(err)
	}
	small := refundCall(800)
	small.Step = gateway.StepID{Index: 4}
	ran, err := f.run.Call(ctx, small)
	if err != nil || ran.Status != gateway.StatusCompleted {
		t.Fatalf("refund = %+v, %v", ran, err)
	}
	if len(f.run.CallDecisions(ran.ToolCallID)) == 0 {
		t.Fatal("the executed refund has no call decisions")
	}
	again := small
	again.Attachments = []string{"art_not_declared"}
	refused, err := f.run.Call(ctx, again)
	if err != nil {
		t.Fatal(err)
	}
	if refused.ToolCallID != ran.ToolCallID || refused.Status.Succeeded() {
		t.Fatalf("second call %s (%s), want the same id %s refused", refused.ToolCallID, refused.Status, ran.ToolCallID)
	}
	if len(f.run.CallDecisions(ran.ToolCallID)) == 0 {
		t.Error("a later refusal of the same call before policy ran erased the executed call's decisions")
	}
}

// TestCallDecisionsAreTheCallersOwn: editing every member of the
// decisions CallDecisions returned (the allow behind its pointer
// included) changes nothing it returns next.
func TestCallDecisionsAreTheCallersOwn(t *testing.T) {
	t.Parallel()
	f := newFixture(t, lowValue, func(fx *fixture, _ *runcontext.RunContext, _ *runcontext.InvokeRequest, _ map[string]gateway.Capability) {
		fx.editPack = func(p *pack.Pack) {
			no := false
			dsl := &p.PolicyLayer.PolicyBundles[0].PolicyDSL
			dsl.Rules = append(dsl.Rules, pack.Rule{RuleID: "R_TOOL_REFUND_CAP", If: json.RawMessage(`{">":[{"var":["tool.args.amount_inr",0]},1000]}`),
				Then: &pack.Effect{Allow: &no, Reason: "refunds above 1000 INR go through the refunds desk"}, Rationale: "Large refunds are settled by the refunds desk."})
		}
	})
	res, err := f.run.Call(ctx, refundCall(1200))
	if err != nil {
		t.Fatal(err)
	}
	ds := f.run.CallDecisions(res.ToolCallID)
	allows := 0
	for _, d := range ds {
		if d.Allow != nil {
			allows++
		}
	}
	if allows == 0 {
		t.Fatalf("no decision of the call has an allow to edit: %+v", ds)
	}
	want := mustJSON(t, ds)
	deepcheck.Vandalize(reflect.ValueOf(ds))
	if got := mustJSON(t, f.run.CallDecisions(res.ToolCallID)); got != want {
		t.Errorf("editing the decisions CallDecisions returned changed what it returns next:\n%s\n%s", want, got)
	}
}
