package contextos_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/contextostest"
	"github.com/contextos/contextos/decision"
	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/pack"
	"github.com/contextos/contextos/replay"
)

// A pack's lifecycle state is seen at once by a live runtime, however long
// its ttl_seconds (a day for the support pack; the harness's clock does not
// move): revoked after a run paused at a gate, the pack refuses the resume
// with a *pack.StateError and a new run, and the paused run still replays;
// deprecated, it refuses a new run only and the paused run finishes.
func TestLifecycleStateSeenAtOnce(t *testing.T) {
	tests := []struct {
		state  pack.State
		resume bool // the paused run may finish
	}{
		{pack.StateRevoked, false},
		{pack.StateDeprecated, true},
	}
	for _, tc := range tests {
		t.Run(string(tc.state), func(t *testing.T) {
			ctx := context.Background()
			h := harness(t, contextostest.NewPlanner(lookupPlan(), refundPlan(4200)), nil)
			req, rc := refundRequest(t, 4200, true)
			paused := h.Invoke(req, rc)
			contextostest.AssertPending(t, paused, "GATE_FINANCE_APPROVAL")

			ref := pack.MustParseRef("ctxpack.support@1.0.0")
			if _, err := h.Registry.SetState(ctx, ref, tc.state, "refund threshold bug"); err != nil {
				t.Fatal(err)
			}
			approval := contextostest.Approval(paused.Pending, contextostest.Approver{UserID: "user_finance_lead_77", Role: "finance_lead"}, contextostest.FixedTime())
			done, err := h.Runtime.Resume(ctx, paused.RunID, contextos.ResumeInput{Approvals: []gateway.Approval{approval}})
			if tc.resume {
				if err != nil {
					t.Fatalf("resume under a %s pack = %v", tc.state, err)
				}
				contextostest.AssertStatus(t, done, decision.Decided)
				contextostest.AssertCalls(t, h.Adapter("adp_payments"), "issue_refund", 1)
			} else {
				var se *pack.StateError
				if !errors.As(err, &se) || !errors.Is(err, pack.ErrNotUsable) || se.State != tc.state || se.Use != pack.UseResume || se.Reason != "refund threshold bug" {
					t.Fatalf("resume under a %s pack = %v, %v; want a *pack.StateError for resume", tc.state, done, err)
				}
				contextostest.AssertCalls(t, h.Adapter("adp_payments"), "issue_refund", 0)
				// The refused resume left the run paused, as it was.
				cp, err := loadState(ctx, h.Checkpoints, paused.RunID)
				if err != nil || cp.Pending == nil || cp.Active || cp.Terminal {
					t.Errorf("checkpoint after the refused resume = %+v, %v; want the pause kept", cp, err)
				}
			}
			// The paused run is captured and replays: the pack resolves
			// for replay and audit whatever its state.
			p, err := h.Runtime.Capture(ctx, paused.RunID, replay.SourceOperatorCorrection)
			if err != nil {
				t.Fatalf("Capture under a %s pack = %v", tc.state, err)
			}
			if rep, err := h.Runtime.Replay(ctx, p); err != nil || rep.Status != replay.ReplayEqual {
				t.Errorf("replay under a %s pack = %+v, %v", tc.state, rep, err)
			}
			// A new run on the pack is refused.
			req2, rc2 := refundRequest(t, 1200, true)
			req2.RequestID, rc2.RunID = "req_after_"+string(tc.state), "run_after_"+string(tc.state)
			_, err = h.Runtime.Invoke(ctx, req2, rc2)
			var se *pack.StateError
			if !errors.As(err, &se) || se.State != tc.state || se.Use != pack.UseExecute {
				t.Errorf("new run on a %s pack = %v; want a *pack.StateError for execute", tc.state, err)
			}
		})
	}
}

// countingReads counts a registry's reads.
type countingReads struct {
	*pack.MemoryRegistry
	gets, stats atomic.Int32
}

func (c *countingReads) Get(ctx context.Context, ref pack.Ref) (pack.Entry, error) {
	c.gets.Add(1)
	return c.MemoryRegistry.Get(ctx, ref)
}

func (c *countingReads) Stat(ctx context.Context, ref pack.Ref) (pack.Entry, error) {
	c.stats.Add(1)
	return c.MemoryRegistry.Stat(ctx, ref)
}

// Seeing the state at once costs one registry read per run and per
// resume (the document, cached for its ttl_seconds, is fetched once).
func TestLifecycleStateReadOncePerRun(t *testing.T) {
	ctx := context.Background()
	planner := contextostest.NewPlanner(lookupPlan(), refundPlan(4200), lookupPlan(), refundPlan(1200))
	h := harness(t, planner, nil)
	reg := &countingReads{MemoryRegistry: h.Registry}
	rt, err := contextos.New(planner, reg, h.Keys, &contextos.Options{
		Adapters: []gateway.Registration{
			{AdapterID: "adp_orders", Adapter: h.Adapter("adp_orders"), Capabilities: map[string]gateway.Capability{"lookup": {}}},
			{AdapterID: "adp_policy", Adapter: h.Adapter("adp_policy"), Capabilities: map[string]gateway.Capability{"eval": {}}},
			{AdapterID: "adp_payments", Adapter: h.Adapter("adp_payments"), Capabilities: map[string]gateway.Capability{"issue_refund": {Scopes: []string{"payments.refund"}}}},
		}, Evidence: evidence(t), Ontologies: []string{"ont.support@1.0.0"},
		Checkpoints: h.Checkpoints, Decisions: h.Decisions, Replays: h.Replays, Now: contextostest.FixedTime,
		Identity: contextos.IdentityOptions{AllowUnclaimed: true}})
	if err != nil {
		t.Fatal(err)
	}
	reads := func() int32 { return reg.gets.Load() + reg.stats.Load() }
	req, rc := refundRequest(t, 4200, true)
	paused, err := rt.Invoke(ctx, req, rc)
	if err != nil || paused.Pending == nil {
		t.Fatalf("Invoke = %+v, %v", paused, err)
	}
	if reg.gets.Load() != 1 || reg.stats.Load() != 0 {
		t.Fatalf("first run: %d Get, %d Stat; want the document fetched once", reg.gets.Load(), reg.stats.Load())
	}
	before := reads()
	approval := contextostest.Approval(paused.Pending, contextostest.Approver{UserID: "user_finance_lead_77", Role: "finance_lead"}, contextostest.FixedTime())
	if _, err := rt.Resume(ctx, paused.RunID, contextos.ResumeInput{Approvals: []gateway.Approval{approval}}); err != nil {
		t.Fatal(err)
	}
	if n := reads() - before; n != 1 || reg.gets.Load() != 1 {
		t.Errorf("the resume read the registry %d times (%d Get in all); want one state read", n, reg.gets.Load())
	}
	before = reads()
	req2, rc2 := refundRequest(t, 1200, true)
	req2.RequestID, rc2.RunID = "req_second", "run_second"
	if _, err := rt.Invoke(ctx, req2, rc2); err != nil {
		t.Fatal(err)
	}
	if n := reads() - before; n != 1 {
		t.Errorf("the second run read the registry %d times; want one state read", n)
	}
}
