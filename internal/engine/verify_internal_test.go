package engine

import (
	"reflect"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/internal/deepcheck"
	"github.com/contextos/contextos/policy"
)

// TestVerifyWriteEditsNothingItIsTold: the runtime's evidence check is
// asked with the call's decisions as the gateway holds them, with no
// copy (gatewayhook.VerifyWriteShared), and the gateway keeps the error
// it returns without copying its details. It must leave every decision
// it is told as it was, and return a new error, sharing nothing with
// the one before, each time.
func TestVerifyWriteEditsNothingItIsTold(t *testing.T) {
	t.Parallel()
	r := refundRun(t)
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
