package gateway_test

import (
	"context"
	"testing"

	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/runcontext"
)

// TestHostEditingRegisteredScopesAfterNewLiftsNoScopeCheck: the scopes a
// registration says a capability needs are the gateway's from New on. A
// host that edits the Scopes slice it registered (a shared config value,
// say) after New does not let a delegation without the scope call the
// capability.
func TestHostEditingRegisteredScopesAfterNewLiftsNoScopeCheck(t *testing.T) {
	t.Parallel()
	scopes := []string{"payments.refund.unlimited"} // the delegation lacks it
	f := newFixture(t, lowValue, func(_ *fixture, _ *runcontext.RunContext, _ *runcontext.InvokeRequest, caps map[string]gateway.Capability) {
		c := caps["adp_payments.issue_refund"]
		c.Scopes = scopes
		caps["adp_payments.issue_refund"] = c
	})
	scopes[0] = "payments.refund" // the host edits its own slice after New
	res, err := f.run.Call(context.Background(), refundCall(1200))
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != gateway.StatusBlocked || f.payments.CallCount("issue_refund") != 0 {
		t.Fatalf("refund = %s with %d adapter calls: editing the registration's Scopes after New lifted the scope check", res.Status, f.payments.CallCount("issue_refund"))
	}
}

// TestCallerEditingItsRunConfigAfterNewRunLiftsNoCheck: a Run enforces the
// run context and request its RunConfig handed over, as they were at
// NewRun. A caller that edits them afterwards (it keeps its pointers)
// does not change what the run's calls are checked against: a delegation
// that lacked the refund scope at NewRun still lacks it.
func TestCallerEditingItsRunConfigAfterNewRunLiftsNoCheck(t *testing.T) {
	t.Parallel()
	f := newFixture(t, lowValue, func(_ *fixture, rc *runcontext.RunContext, _ *runcontext.InvokeRequest, _ map[string]gateway.Capability) {
		rc.User.Delegation.Scopes = []string{"orders.read"}
	})
	f.rc.User.Delegation.Scopes = append(f.rc.User.Delegation.Scopes, "payments.refund") // after NewRun
	res, err := f.run.Call(context.Background(), refundCall(1200))
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != gateway.StatusBlocked || f.payments.CallCount("issue_refund") != 0 {
		t.Fatalf("refund = %s with %d adapter calls: editing the run context after NewRun lifted the scope check", res.Status, f.payments.CallCount("issue_refund"))
	}
}
