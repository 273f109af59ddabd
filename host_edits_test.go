package contextos_test

import (
	"context"
	"testing"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/contextostest"
	"github.com/contextos/contextos/decision"
	"github.com/contextos/contextos/pack"
)

// TestHostEditingCapabilityScopesAfterNewLiftsNoScopeCheck: the scopes a
// host's registration says a capability needs are the gateway's from New
// on. A host that edits the Scopes slice it registered (a shared config
// value, say) after New does not change which delegations the gateway
// lets call the capability: a refund needing a scope the user lacks stays
// blocked.
//
// The gateway's live check holds through gateway.New's own copy of the
// scopes; a replay builds its runtime from the runtime's registrations,
// which New copies too (internal/engine/ownoptions.go), so the packet
// replays equal.
func TestHostEditingCapabilityScopesAfterNewLiftsNoScopeCheck(t *testing.T) {
	t.Parallel()
	scopes := []string{"payments.refund.unlimited"} // the user's delegation lacks it
	h := harness(t, contextostest.NewPlanner(lookupPlan(), refundPlan(1200)),
		&contextostest.Options{Scopes: map[string][]string{"adp_payments.issue_refund": scopes}})
	scopes[0] = "payments.refund" // the host edits its own slice after New
	req, rc := refundRequest(t, 1200, true)
	res := h.Invoke(req, rc)
	if n := h.Adapter("adp_payments").CallCount("issue_refund"); n != 0 {
		t.Fatalf("issue_refund ran %d times (run %s): editing the registration's Scopes after New lifted the gateway's scope check", n, res.Status)
	}
	if h.ReplayAll() == 0 {
		t.Fatal("the run captured no replay packet: the replay half of the test proves nothing")
	}
}

// TestHostEditingItsOverlayAfterNewLiftsNoControl: the environment
// overlays of a runtime's Options are its own from New on. An overlay
// that caps refunds at INR 1000 holds a refund of 1200 whether or not the
// host edits the overlay it handed to New (its cap, or its list of
// permissions) before the runtime's first run.
//
// The runtime reads its overlays at every compiler.Prepare (the first run
// of a pack version, and again whenever the prepared cache is cleared)
// and at every replay: New keeps its own copy of them
// (internal/engine/ownoptions.go).
func TestHostEditingItsOverlayAfterNewLiftsNoControl(t *testing.T) {
	t.Parallel()
	for _, edit := range []string{"none", "cap raised", "permissions dropped"} {
		t.Run(edit, func(t *testing.T) {
			t.Parallel()
			ov := &pack.Overlay{OverlayID: "ov_prod_cap", Base: "ctxpack.support@1.0.0", Environment: "prod",
				Permissions: []pack.Permission{{PermissionID: "p_issue_refund", AdapterID: "adp_payments", Capability: "issue_refund", Allow: true,
					RequiresApprovalGate: "GATE_FINANCE_APPROVAL",
					ArgConstraints:       map[string]map[string]any{"amount_inr": {"min": 1, "max": 1000}, "idempotency_key": {"required": true}}}}}
			ontologies := []string{"ont.support@1.0.0"}
			h := harness(t, contextostest.NewPlanner(lookupPlan(), refundPlan(1200)),
				&contextostest.Options{Runtime: contextos.Options{Overlays: []*pack.Overlay{ov}, Ontologies: ontologies}})
			switch edit {
			case "cap raised":
				ov.Permissions[0].ArgConstraints["amount_inr"]["max"] = 50000
			case "permissions dropped":
				ov.Permissions = nil
			}
			req, rc := refundRequest(t, 1200, true)
			res := h.Invoke(req, rc)
			if n := h.Adapter("adp_payments").CallCount("issue_refund"); n != 0 {
				t.Fatalf("issue_refund of 1200 ran %d times (run %s) under an overlay capping refunds at 1000: editing the overlay after New lifted its cap", n, res.Status)
			}
			if h.ReplayAll() == 0 {
				t.Fatal("the run captured no replay packet: the replay half of the test proves nothing")
			}
		})
	}
}

// rewritingStore is a decision store whose Append stores the record it is
// handed and returns another: a DECIDED approval.
type rewritingStore struct{ *decision.MemoryStore }

func (s rewritingStore) Append(ctx context.Context, r *decision.Record) (*decision.Record, error) {
	out, err := s.MemoryStore.Append(ctx, r)
	if err != nil {
		return nil, err
	}
	c := *out
	c.Status, c.Outcome = decision.Decided, "approved"
	return &c, nil
}

// TestDecisionStoreHandingBackAnotherRecordChangesNotTheRun: the record a
// decision store's Append hands back is checked, as the one a failed
// Append's lookup finds is: a store that stores the run's record and
// hands back another (another status, outcome, or id) changes neither the
// run's status, its Result's record, its checkpoint nor its replay packet.
// The runtime checks another store's answer against the run's own record
// sealed after the predecessor the answer names; a mismatch is a failed
// append, whose lookup finds the record the store did keep, and the run
// goes on with its own sealed copy (internal/engine/guard.go). Before,
// the Result's record of a denied refund said approved (a paused run's
// said DECIDED, approved), and the decision event, the replay packet and
// a terminal run's reported status were built from the store's rewrite.
func TestDecisionStoreHandingBackAnotherRecordChangesNotTheRun(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		plans       []*contextos.Plan
		amount      int
		wantStatus  decision.Status
		wantOutcome string
	}{
		{"a refund paused at the finance gate", []*contextos.Plan{lookupPlan(), refundPlan(4200)}, 4200, decision.Deferred, ""},
		{"a refund the planner denies", []*contextos.Plan{deniedPlan()}, 1200, decision.Decided, "denied"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			store := rewritingStore{decision.NewMemoryStore()}
			h := bareHarness(t, contextostest.NewPlanner(tc.plans...), &contextostest.Options{Runtime: contextos.Options{Decisions: store}})
			scriptDefaults(h, "")
			req, rc := refundRequest(t, tc.amount, true)
			res, err := h.Runtime.Invoke(context.Background(), req, rc)
			if err != nil {
				t.Fatalf("Invoke: %v (the store kept the run's record: the run goes on with it)", err)
			}
			if res.Status != tc.wantStatus || res.Record.Status != tc.wantStatus || res.Record.Outcome != tc.wantOutcome {
				t.Fatalf("the run is %s, its record %s %q, want %s %q: the decision store's rewrite of the record it handed back was taken",
					res.Status, res.Record.Status, res.Record.Outcome, tc.wantStatus, tc.wantOutcome)
			}
		})
	}
}
