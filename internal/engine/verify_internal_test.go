package engine

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/contextos/contextos/compiler"
	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/internal/deepcheck"
	"github.com/contextos/contextos/internal/fixture"
	"github.com/contextos/contextos/pack"
	"github.com/contextos/contextos/policy"
	"github.com/contextos/contextos/runcontext"
)

// TestVerifyWriteEditsNothingItIsTold: the runtime's evidence check is
// asked with the call's decisions as the gateway holds them, with no
// copy (gatewayhook.VerifyWriteShared), and the gateway keeps the error
// it returns without copying its details. It must leave every decision
// it is told as it was, and return a new error, sharing nothing with
// the one before, each time.
func TestVerifyWriteEditsNothingItIsTold(t *testing.T) {
	t.Parallel()
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
	r := &run{prepared: prepared, cc: cc, req: req, cp: &checkpointState{}}
	// A decision with every member set, and one of a rule bound to the
	// run's decision that requires what the run does not hold.
	var filled policy.Decision
	deepcheck.Fill(reflect.ValueOf(&filled).Elem())
	allow := true
	ds := []policy.Decision{filled, {BundleID: "POLICY_RETURNS_V4", RuleID: "R_X", Outcome: policy.Allow, Allow: &allow, Requires: []string{"order_lookup"},
		Raise: []string{"GATE_FINANCE_APPROVAL"}, DecisionBinding: r.primaryDecision()}}
	want := make([]policy.Decision, len(ds))
	for i, d := range ds {
		want[i] = d.Clone()
	}
	var errs []*gateway.ToolError
	for range 2 {
		te := r.verifyWrite(&gateway.WriteCall{CapabilityID: "adp_payments.issue_refund", ToolCallID: "tool_1", Decisions: ds})
		if te == nil || !strings.HasPrefix(te.Message, "missing_evidence: ") {
			t.Fatalf("verifyWrite = %+v; the test needs a write it blocks", te)
		}
		errs = append(errs, te)
	}
	if diff := cmp.Diff(want, ds); diff != "" {
		t.Errorf("verifyWrite changed the decisions it was told (-before +after):\n%s", diff)
	}
	if s := deepcheck.Shared("error", reflect.ValueOf(errs[0]), reflect.ValueOf(errs[1])); s != "" {
		t.Errorf("two errors verifyWrite returned share %s", s)
	}
}
