package policy

import (
	"encoding/json"
	"testing"

	"github.com/contextos/contextos/runcontext"
	"github.com/google/go-cmp/cmp"
)

// NewDocument puts the run's request, user, agent, tenant, session,
// intent and safety mode where rules read them; lookup resolves dotted
// paths (numeric segments index arrays) and finds nothing past a leaf;
// WithTool adds the tool member to a copy only.
func TestDocument(t *testing.T) {
	t.Parallel()
	days := 400
	in := runcontext.Input{Intent: "support.refund", Message: "refund my order", Channel: "chat",
		Context: map[string]any{"refund_amount": 4200.0, "signals": []any{"fraud"}}}
	rc := &runcontext.RunContext{TenantID: "tenant_acme_prod", SessionID: "sess_42f1", SafetyMode: runcontext.Destructive,
		User: runcontext.UserClaims{UserID: "usr_1", Role: "support_agent", TenureDays: &days,
			Claims:     map[string]json.RawMessage{"region": json.RawMessage(`"in"`)},
			Delegation: &runcontext.Delegation{AuthType: runcontext.AuthOAuth2, Scopes: []string{"orders.read", "payments.refund"}, Subject: "usr_1"}},
		Agent: runcontext.AgentIdentity{AgentURN: "urn:agent:support", WorkloadIdentity: "spiffe://acme/support", Role: "support_ops"}}
	d := NewDocument(in, rc)
	want := Document{
		"request": map[string]any{"intent": "support.refund", "message": "refund my order", "channel": "chat",
			"context": map[string]any{"refund_amount": 4200.0, "signals": []any{"fraud"}}},
		"user": map[string]any{"user_id": "usr_1", "role": "support_agent", "tenure_days": 400.0, "region": "in",
			"delegation": map[string]any{"auth_type": "oauth2", "scopes": []any{"orders.read", "payments.refund"}, "subject": "usr_1"}},
		"agent":       map[string]any{"agent_urn": "urn:agent:support", "workload_identity": "spiffe://acme/support", "role": "support_ops"},
		"tenant_id":   "tenant_acme_prod",
		"session_id":  "sess_42f1",
		"intent":      "support.refund",
		"safety_mode": "destructive",
	}
	if diff := cmp.Diff(want, d); diff != "" {
		t.Fatalf("NewDocument (-want +got):\n%s", diff)
	}
	td := d.WithTool("adp_payments.issue_refund", map[string]any{"amount_inr": 4200}, runcontext.Destructive)
	type found struct {
		V  any
		OK bool
	}
	for _, c := range []struct {
		doc  Document
		path string
		want found
	}{
		{d, "request.context.refund_amount", found{4200.0, true}},
		{d, "user.role", found{"support_agent", true}},
		{d, "user.delegation.scopes.1", found{"payments.refund", true}},
		{d, "request.context.nope", found{}},
		{d, "user.delegation.scopes.9", found{}},
		{d, "user.delegation.scopes.x", found{}},
		{d, "intent.x", found{}},
		{d, "tool", found{}}, // WithTool leaves the original alone
		{td, "tool.args.amount_inr", found{4200.0, true}},
		{td, "tool.capability_id", found{"adp_payments.issue_refund", true}},
		{td, "tool.approval_mode", found{"destructive", true}},
		{td, "intent", found{"support.refund", true}},
	} {
		t.Run(c.path, func(t *testing.T) {
			t.Parallel()
			v, ok := c.doc.lookup(c.path)
			if diff := cmp.Diff(c.want, found{v, ok}); diff != "" {
				t.Errorf("lookup(%s) (-want +got):\n%s", c.path, diff)
			}
		})
	}
	if v, ok := d.lookup(""); !ok || v == nil {
		t.Errorf("lookup of the empty path = %v, %v; want the whole document", v, ok)
	}
}

func TestDocumentSignals(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		doc  Document
		want []string
	}{
		{"none", Document{"request": map[string]any{"context": map[string]any{}}}, nil},
		{"strings kept, others ignored", Document{"request": map[string]any{"context": map[string]any{"signals": []any{"fraud", 3.0, "abuse", nil}}}}, []string{"fraud", "abuse"}},
		{"not a list", Document{"request": map[string]any{"context": map[string]any{"signals": "fraud"}}}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			if diff := cmp.Diff(c.want, c.doc.signals()); diff != "" {
				t.Errorf("signals (-want +got):\n%s", diff)
			}
		})
	}
}
