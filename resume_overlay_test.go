package contextos_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/contextostest"
	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/gateway/gatewaytest"
	"github.com/contextos/contextos/pack"
)

// A paused run pins the packs section of its context ledger (pack refs,
// content hashes, the overlay applied) in its checkpoint: a replica
// resuming it under another environment overlay, or none, is refused
// with ErrLedgerMismatch (and ErrNotResumable) before any tool call, and
// one under the run's own overlay resumes it.
func TestResumeUnderAnotherOverlayIsRefused(t *testing.T) {
	prod := &pack.Overlay{OverlayID: "ov_prod", Base: "ctxpack.support@1.0.0", Environment: "prod",
		EndpointRefs: map[string]string{"adp_payments": "internal://payments-prod"}}
	staging := &pack.Overlay{OverlayID: "ov_staging", Base: "ctxpack.support@1.0.0", Environment: "staging",
		EndpointRefs: map[string]string{"adp_payments": "internal://payments-staging"}}
	cases := []struct {
		name     string
		overlays []*pack.Overlay
		wantErr  error
	}{
		{"another overlay", []*pack.Overlay{staging}, contextos.ErrLedgerMismatch},
		{"no overlay", nil, contextos.ErrLedgerMismatch},
		{"the run's overlay", []*pack.Overlay{prod}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			gw := gateway.Options{Idempotency: gateway.NewMemoryIdempotency(), Approvals: gateway.NewMemoryApprovalLog()}
			tr := &gatewaytest.Recorder{}
			planner := contextostest.NewPlanner(lookupPlan(), refundPlan(4200))
			h := harness(t, planner, &contextostest.Options{Runtime: contextos.Options{Gateway: gw, Transcripts: tr, Overlays: []*pack.Overlay{prod}}})
			req, rc := refundRequest(t, 4200, true)
			paused := h.Invoke(req, rc)
			contextostest.AssertPending(t, paused, "GATE_FINANCE_APPROVAL")
			regs := []gateway.Registration{
				{AdapterID: "adp_orders", Adapter: h.Adapter("adp_orders"), Capabilities: map[string]gateway.Capability{"lookup": {}}},
				{AdapterID: "adp_policy", Adapter: h.Adapter("adp_policy"), Capabilities: map[string]gateway.Capability{"eval": {}}},
				{AdapterID: "adp_payments", Adapter: h.Adapter("adp_payments"), Capabilities: map[string]gateway.Capability{"issue_refund": {Scopes: []string{"payments.refund"}}}},
			}
			rt2, err := contextos.New(planner, h.Registry, h.Keys, &contextos.Options{
				Adapters: regs, Gateway: gw, Transcripts: tr, Evidence: evidence(t), Ontologies: []string{"ont.support@1.0.0"}, Overlays: tc.overlays,
				Checkpoints: h.Checkpoints, Decisions: h.Decisions, Replays: h.Replays, Now: func() time.Time { return contextostest.FixedTime() },
				Identity: contextos.IdentityOptions{AllowUnclaimed: true}})
			if err != nil {
				t.Fatal(err)
			}
			approval := contextostest.Approval(paused.Pending, contextostest.Approver{UserID: "user_finance_lead_77", Role: "finance_lead"}, contextostest.FixedTime())
			_, err = rt2.Resume(context.Background(), paused.RunID, contextos.ResumeInput{Approvals: []gateway.Approval{approval}})
			if tc.wantErr == nil {
				if err != nil {
					t.Fatalf("Resume under the run's overlay: %v", err)
				}
				contextostest.AssertCalls(t, h.Adapter("adp_payments"), "issue_refund", 1)
				return
			}
			if !errors.Is(err, tc.wantErr) || !errors.Is(err, contextos.ErrNotResumable) {
				t.Fatalf("Resume = %v, want %v and ErrNotResumable", err, tc.wantErr)
			}
			contextostest.AssertCalls(t, h.Adapter("adp_payments"), "issue_refund", 0)
		})
	}
}
