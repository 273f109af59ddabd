package engine

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/contextos/contextos/compiler"
	"github.com/contextos/contextos/decision"
	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/internal/fixture"
	"github.com/contextos/contextos/pack"
	"github.com/contextos/contextos/policy"
	"github.com/contextos/contextos/runcontext"
)

// refundRun is a run of the support pack's refund request, compiled,
// with no results yet.
func refundRun(t *testing.T) *run {
	t.Helper()
	p, err := pack.Decode(fixture.Read(t, "ctxpack.support-1.0.0.json"))
	if err != nil {
		t.Fatal(err)
	}
	req, err := runcontext.DecodeInvokeRequest(fixture.Read(t, "invoke.support-refund.json"))
	if err != nil {
		t.Fatal(err)
	}
	rc, err := runcontext.DecodeRunContext(fixture.Read(t, "run-context.support.json"))
	if err != nil {
		t.Fatal(err)
	}
	var ev compiler.StaticEvidence
	if err := json.Unmarshal(fixture.Read(t, "evidence.support.json"), &ev); err != nil {
		t.Fatal(err)
	}
	prepared, err := compiler.Prepare([]compiler.Input{{Ref: pack.MustParseRef("ctxpack.support@1.0.0"), Pack: p}}, &compiler.Options{Ontologies: []string{"ont.support@1.0.0"}, Evidence: ev})
	if err != nil {
		t.Fatal(err)
	}
	cc, err := prepared.Compile(context.Background(), req, rc)
	if err != nil {
		t.Fatal(err)
	}
	return &run{prepared: prepared, cc: cc, req: req, cp: &checkpointState{}}
}

// fresh is the run's facts built anew (no memo), as run.facts built them
// before it kept them.
func fresh(r *run) any {
	f := runFacts(r.prepared.Pack(), r.cc, r.req, r.cp.Results, nil)
	if p := r.cp.Pending; p != nil {
		addHeldGate(f, p.GateID, p.ApproverRole, false)
	}
	return f
}

// TestRunFactsKeptOnlyForTheirInputs: a run's facts are kept (factsMemo)
// and shared by the calls made with the same inputs; whatever the run
// does after, they are what building them anew gives: a result added, a
// call held at a gate, a new compile, and a write check (which applies
// the call's own rules to its own copy) each give the facts of the run as
// it is then.
func TestRunFactsKeptOnlyForTheirInputs(t *testing.T) {
	t.Parallel()
	r := refundRun(t)
	check := func(when string) {
		t.Helper()
		if got, want := any(r.facts()), fresh(r); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: run.facts = %+v, built anew %+v", when, got, want)
		}
	}
	check("no result")
	if kept := r.facts(); r.facts() != kept {
		t.Error("the facts of the same inputs were built twice")
	}
	// A write check with a rule of the call's own.
	allow := true
	own := []policy.Decision{{BundleID: "POLICY_OWN", RuleID: "R_OWN", Outcome: policy.Allow, Allow: &allow, Requires: []string{"order_lookup"}, DecisionBinding: r.primaryDecision()}}
	r.verifyWrite(&gateway.WriteCall{CapabilityID: "adp_payments.issue_refund", ToolCallID: "tool_1", Decisions: own})
	check("after a write check with rules of its own")
	// Results added one by one, in one backing array (the same first
	// element, a longer list).
	r.cp.Results = make([]StepResult, 0, 4)
	for i, id := range []string{"tool_1", "tool_2"} {
		r.facts()
		pd := "pd_" + id
		r.cp.Results = append(r.cp.Results, StepResult{Index: i, Result: &gateway.ToolResultEnvelope{CapabilityID: "crm.lookup_order", ToolCallID: id, Status: gateway.StatusOK, PolicyDecisionID: &pd},
			PolicyDecisions: []policy.Decision{{BundleID: "POLICY_B", RuleID: "R_" + id, Outcome: policy.Allow, Allow: &allow}}})
		check("after result " + id)
	}
	// A call held at a gate.
	r.cp.Pending = &gateway.ApprovalRequest{GateID: "GATE_X", ApproverRole: "finance"}
	check("with a pending call")
	r.cp.Pending = nil
	check("with the pending call gone")
	// A new compile.
	cc, err := r.prepared.Compile(context.Background(), r.req, runcontextOf(t))
	if err != nil {
		t.Fatal(err)
	}
	r.facts()
	cc.Manifests.EvidenceManifest = nil
	r.cc = cc
	check("after a new compile")
}

func runcontextOf(t *testing.T) *runcontext.RunContext {
	t.Helper()
	rc, err := runcontext.DecodeRunContext(fixture.Read(t, "run-context.support.json"))
	if err != nil {
		t.Fatal(err)
	}
	return rc
}

// TestRunFactsPolicyRefListsAreTheirOwn: the run decisions' policy refs
// are made once per compiled context (factsMemo.refs) and copied into
// each facts' list: a caller appending to or editing one facts' list
// changes neither the next facts built nor the refs kept.
func TestRunFactsPolicyRefListsAreTheirOwn(t *testing.T) {
	t.Parallel()
	r := refundRun(t)
	first := r.facts()
	if len(first.PolicyRefs) == 0 {
		t.Fatal("the refund run's facts list no policy refs")
	}
	want := append([]string(nil), first.PolicyRefs...)
	_ = append(first.PolicyRefs[:1], "appended")
	first.PolicyRefs[0] = "edited"
	allow := true
	pd := "pd_tool_1"
	r.cp.Results = append(r.cp.Results, StepResult{Result: &gateway.ToolResultEnvelope{CapabilityID: "crm.lookup_order", ToolCallID: "tool_1", Status: gateway.StatusOK, PolicyDecisionID: &pd},
		PolicyDecisions: []policy.Decision{{BundleID: "POLICY_B", RuleID: "R_1", Outcome: policy.Allow, Allow: &allow}}})
	second := r.facts()
	if second == first {
		t.Fatal("facts of other inputs were not built again")
	}
	if got := second.PolicyRefs[:len(want)]; !reflect.DeepEqual(got, want) {
		t.Fatalf("next facts list %v, want %v first", got, want)
	}
	if !reflect.DeepEqual(r.factsMemo.refs, want) {
		t.Fatalf("kept refs %v, want %v", r.factsMemo.refs, want)
	}
	if got := fresh(r).(*decision.Facts).PolicyRefs; !reflect.DeepEqual(got, second.PolicyRefs) {
		t.Fatalf("facts list %v, built anew %v", second.PolicyRefs, got)
	}
}
