package contextos_test

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace/noop"
	"go.uber.org/goleak"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/gateway/gatewaytest"
	"github.com/contextos/contextos/replay"

	"github.com/contextos/contextos/contextostest"
	"github.com/contextos/contextos/decision"
)

func TestHighValueRefundPausesThenDecides(t *testing.T) {
	h := harness(t, contextostest.NewPlanner(lookupPlan(), refundPlan(4200)), nil)
	req, rc := refundRequest(t, 4200, true)
	res := h.Invoke(req, rc)
	contextostest.AssertPending(t, res, "GATE_FINANCE_APPROVAL")
	if res.Record.Awaiting == nil || res.Record.Awaiting.ApproverRole != "finance_lead" {
		t.Fatalf("deferred record awaits %+v", res.Record.Awaiting)
	}
	contextostest.AssertCalls(t, h.Adapter("adp_payments"), "issue_refund", 0)
	done := h.Approve(res, contextostest.Approver{UserID: "user_finance_lead_77", Role: "finance_lead"})
	contextostest.AssertStatus(t, done, decision.Decided)
	contextostest.AssertOutcome(t, done, "approved")
	contextostest.AssertCalls(t, h.Adapter("adp_payments"), "issue_refund", 1)
	if len(done.Record.Approvals) != 1 || done.Record.Approvals[0].Approver != "user_finance_lead_77" {
		t.Errorf("approvals = %+v", done.Record.Approvals)
	}
	contextostest.AssertReplayEqual(t, h.Replay(done))
}

func TestLowValueRefundDecidedWithoutGate(t *testing.T) {
	h := harness(t, contextostest.NewPlanner(lookupPlan(), refundPlan(1200)), nil)
	req, rc := refundRequest(t, 1200, true)
	res := h.Invoke(req, rc)
	contextostest.AssertStatus(t, res, decision.Decided)
	contextostest.AssertOutcome(t, res, "approved")
	contextostest.AssertCalls(t, h.Adapter("adp_payments"), "issue_refund", 1)
	if len(res.Record.Approvals) != 0 || len(res.Record.ControlsActive.ApprovalGatesActive) != 0 {
		t.Errorf("a 1200 refund has approvals %+v, gates %v", res.Record.Approvals, res.Record.ControlsActive.ApprovalGatesActive)
	}
	rec := res.Record
	switch {
	case rec.TraceID != req.Trace.TraceID, rec.Lineage.PackVersion != "ctxpack.support@1.0.0", rec.Lineage.PackContentHash == "",
		rec.Lineage.CompiledContextHash != res.Compiled.Hash(), rec.Lineage.ToolTranscriptChainHash == "",
		len(rec.PolicyDecisions) == 0, rec.BudgetUsage.ToolCalls != 3, rec.BudgetUsage.Tokens != 1600:
		t.Errorf("record lacks what it must carry: %+v", rec)
	}
	if err := h.Decisions.Verify(context.Background()); err != nil {
		t.Errorf("decision chain: %v", err)
	}
	contextostest.AssertReplayEqual(t, h.Replay(res))
}

func TestRefundWithoutIdentityIsRefused(t *testing.T) {
	planner := contextostest.NewPlanner(lookupPlan(), refundPlan(1200), deniedPlan())
	h := harness(t, planner, nil)
	req, rc := refundRequest(t, 1200, false)
	res := h.Invoke(req, rc)
	contextostest.AssertStatus(t, res, decision.Decided)
	contextostest.AssertOutcome(t, res, "denied")
	contextostest.AssertCalls(t, h.Adapter("adp_payments"), "issue_refund", 0)
	if slices.Contains(res.Compiled.ContextLedger.Tools, "adp_payments.issue_refund") {
		t.Error("the refund tool is surfaced although policy denies the refund")
	}
	reqs := planner.Requests()
	if len(reqs) != 3 || !strings.Contains(reqs[2].ReplanReason, "not in the tool manifest") {
		t.Errorf("the planner was not told why its refund plan was refused: %d turns", len(reqs))
	}
	contextostest.AssertReplayEqual(t, h.Replay(res))
}

func TestMustRefuseSignalRejectsBeforePlanning(t *testing.T) {
	planner := contextostest.NewPlanner(lookupPlan())
	h := harness(t, planner, nil)
	req, rc := refundRequest(t, 1200, true)
	req.Input.Context["signals"] = []any{"refund_without_identity"}
	res := h.Invoke(req, rc)
	contextostest.AssertStatus(t, res, decision.Rejected)
	if len(planner.Requests()) != 0 || len(h.Transcript.Results()) != 0 {
		t.Errorf("a refused run planned (%d) or called tools (%d)", len(planner.Requests()), len(h.Transcript.Results()))
	}
	contextostest.AssertReplayEqual(t, h.Replay(res))
}

func TestMustEscalateSignalFromToolEscalates(t *testing.T) {
	h := bareHarness(t, contextostest.NewPlanner(lookupPlan(), refundPlan(1200)), nil)
	scriptDefaults(h, "adp_orders")
	h.Adapter("adp_orders").On("lookup").Return(&gateway.Outcome{Output: map[string]any{"order_id": "ord_881"}, Signals: []string{"fraud_signal_high"}})
	req, rc := refundRequest(t, 1200, true)
	res := h.Invoke(req, rc)
	contextostest.AssertStatus(t, res, decision.Escalated)
	contextostest.AssertCalls(t, h.Adapter("adp_payments"), "issue_refund", 0)
	if !strings.Contains(res.Record.Rationale.Summary, "fraud_signal_high") {
		t.Errorf("rationale = %q", res.Record.Rationale.Summary)
	}
	contextostest.AssertReplayEqual(t, h.Replay(res))
}

func TestUnsurfacedToolEscalatesAfterMaxReplans(t *testing.T) {
	planner := contextostest.NewPlanner(&contextos.Plan{Steps: []contextos.Step{{CapabilityID: "adp_crm.delete_customer", Args: map[string]any{"customer_id": "cus_77"}}}}).RepeatLast()
	h := harness(t, planner, nil)
	req, rc := refundRequest(t, 1200, true)
	res := h.Invoke(req, rc)
	contextostest.AssertStatus(t, res, decision.Escalated)
	if n := len(planner.Requests()); n != rc.RunBudget.MaxReplanAttempts+1 {
		t.Errorf("planner asked %d times, want %d", n, rc.RunBudget.MaxReplanAttempts+1)
	}
	if len(h.Transcript.Results()) != 0 {
		t.Error("an unsurfaced tool reached the gateway")
	}
	if !strings.Contains(res.Record.Rationale.Summary, "replans exhausted") {
		t.Errorf("rationale = %q", res.Record.Rationale.Summary)
	}
	contextostest.AssertReplayEqual(t, h.Replay(res))
}

func TestWallClockHardStopEscalatesWithResumableCheckpoint(t *testing.T) {
	var ticks atomic.Int64
	now := func() time.Time { return contextostest.FixedTime().Add(time.Duration(ticks.Add(1)) * 4 * time.Second) }
	// The clock moves 4 s at every reading (the run's, and the runtime's
	// own when it saves the run's claim); the checkpoint store counts
	// leases on a clock of its own, so its readings do not move it.
	cps := contextos.NewInMemoryCheckpoints()
	cps.Now = contextostest.FixedTime
	h := harness(t, contextostest.NewPlanner(lookupPlan(), refundPlan(1200)), &contextostest.Options{Now: now, Runtime: contextos.Options{Checkpoints: cps}})
	req, rc := refundRequest(t, 1200, true)
	rc.RunBudget.WallClockMS = 14_000
	res := h.Invoke(req, rc)
	contextostest.AssertStatus(t, res, decision.Escalated)
	if !strings.Contains(res.Record.Rationale.Summary, "wall_clock") {
		t.Errorf("rationale = %q", res.Record.Rationale.Summary)
	}
	cp, err := loadState(context.Background(), cps, res.RunID)
	if err != nil || cp.Terminal || cp.Stopped == "" {
		t.Fatalf("checkpoint = %+v, %v", cp, err)
	}
	contextostest.AssertReplayEqual(t, h.Replay(res))

	// An operator extends the budget; the run goes on from its checkpoint
	// and the escalated record is closed.
	budget := rc.RunBudget
	budget.WallClockMS = 600_000
	done, err := h.Runtime.Resume(context.Background(), res.RunID, contextos.ResumeInput{Budget: &budget})
	if err != nil {
		t.Fatal(err)
	}
	contextostest.AssertStatus(t, done, decision.Decided)
	contextostest.AssertCalls(t, h.Adapter("adp_orders"), "lookup", 1)
	recs, _ := h.Decisions.List(context.Background(), decision.Filter{RunID: res.RunID})
	if last := recs[len(recs)-1]; last.Status != decision.Closed || last.Closes != res.Record.RecordID {
		t.Errorf("records = %v", statuses(recs))
	}
	contextostest.AssertReplayEqual(t, h.Replay(done))
}

func statuses(recs []*decision.Record) []decision.Status {
	var out []decision.Status
	for _, r := range recs {
		out = append(out, r.Status)
	}
	return out
}

func TestCancelStopsPromptlyWithoutLeaks(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	started := make(chan struct{})
	planner := contextostest.NewPlanner().ThenFunc(func(req *contextos.PlanRequest) (*contextos.Plan, error) {
		return lookupPlan(), nil
	})
	h := harness(t, contextos.PlannerFunc(func(ctx context.Context, req *contextos.PlanRequest) (*contextos.Plan, error) {
		if req.Turn == 0 {
			return planner.Plan(ctx, req)
		}
		close(started)
		<-ctx.Done()
		return nil, ctx.Err()
	}), nil)
	req, rc := refundRequest(t, 1200, true)
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-started; cancel() }()
	res, err := h.Runtime.Invoke(ctx, req, rc)
	if err != nil {
		t.Fatal(err)
	}
	contextostest.AssertStatus(t, res, decision.Escalated)
	if !strings.Contains(res.Record.Rationale.Summary, "canceled") {
		t.Errorf("rationale = %q", res.Record.Rationale.Summary)
	}
}

func TestHostCriticCanOnlyTighten(t *testing.T) {
	unsurfaced := &contextos.Plan{Steps: []contextos.Step{{CapabilityID: "adp_crm.delete_customer", Args: map[string]any{"customer_id": "cus_77"}}}}
	for _, tc := range []struct {
		name    string
		planner *contextostest.Planner
		critic  critic
		want    decision.Status
	}{
		// The host critic passes every plan; the built-in critic's replans
		// still stand, so the unsurfaced tool never runs.
		{"looser verdict ignored", contextostest.NewPlanner(unsurfaced).RepeatLast(), critic{verify: contextos.VerdictOK}, decision.Escalated},
		{"stricter verdict wins", contextostest.NewPlanner(lookupPlan(), refundPlan(1200)), critic{score: contextos.VerdictEscalate}, decision.Escalated},
		{"reject at verify", contextostest.NewPlanner(lookupPlan(), refundPlan(1200)), critic{verify: contextos.VerdictReject}, decision.Rejected},
		{"agreeing critic", contextostest.NewPlanner(lookupPlan(), refundPlan(1200)), critic{score: contextos.VerdictAccept}, decision.Decided},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.critic
			h := harness(t, tc.planner, &contextostest.Options{Runtime: contextos.Options{Critic: &c}})
			req, rc := refundRequest(t, 1200, true)
			contextostest.AssertStatus(t, h.Invoke(req, rc), tc.want)
			for _, r := range h.Transcript.Results() {
				if r.CapabilityID == "adp_crm.delete_customer" {
					t.Error("the host critic's looser verdict let an unsurfaced tool reach the gateway")
				}
			}
		})
	}
}

type critic struct{ verify, score contextos.CriticVerdict }

func (c *critic) Verify(context.Context, *contextos.CriticInput) (contextos.Judgement, error) {
	return contextos.Judgement{Verdict: cmp.Or(c.verify, contextos.VerdictOK), Reason: "host verify"}, nil
}

func (c *critic) Score(_ context.Context, in *contextos.CriticInput) (contextos.Judgement, error) {
	if in.Plan.Decision == nil {
		return contextos.Judgement{Verdict: contextos.VerdictAccept}, nil
	}
	return contextos.Judgement{Verdict: cmp.Or(c.score, contextos.VerdictAccept), Reason: "host score"}, nil
}

func TestConsolidationFiltersMemoryProposals(t *testing.T) {
	plan := refundPlan(1200)
	plan.Memory = []contextos.MemoryProposal{
		{WriteClass: "decision_outcome", Content: "Refund of ord_881 approved.", Confidence: 0.9, SubjectIDs: []string{"order:ord_881"}},
		{WriteClass: "decision_outcome", Content: "Customer phone +91…", Confidence: 0.9, PII: true},
		{WriteClass: "not_a_class", Content: "x", Confidence: 0.9},
	}
	mem := contextos.NewInMemoryMemory()
	h := harness(t, contextostest.NewPlanner(lookupPlan(), plan), &contextostest.Options{Runtime: contextos.Options{Memory: mem}})
	req, rc := refundRequest(t, 1200, true)
	contextostest.AssertStatus(t, h.Invoke(req, rc), decision.Decided)
	got := mem.Proposals()
	if len(got) != 1 || got[0].Content != "Refund of ord_881 approved." || got[0].RunID != rc.RunID {
		t.Errorf("proposals = %+v", got)
	}
}

func TestResumeOnSecondRuntimeRepeatsNoSideEffect(t *testing.T) {
	gw := gateway.Options{Idempotency: gateway.NewMemoryIdempotency(), Approvals: gateway.NewMemoryApprovalLog()}
	tr := &gatewaytest.Recorder{}
	planner := contextostest.NewPlanner(lookupPlan(), refundPlan(4200))
	h := harness(t, planner, &contextostest.Options{Runtime: contextos.Options{Gateway: gw, Transcripts: tr}})
	req, rc := refundRequest(t, 4200, true)
	paused := h.Invoke(req, rc)
	contextostest.AssertPending(t, paused, "GATE_FINANCE_APPROVAL")

	// A second runtime (another replica) sharing every store and the
	// same downstream systems.
	regs := []gateway.Registration{
		{AdapterID: "adp_orders", Adapter: h.Adapter("adp_orders"), Capabilities: map[string]gateway.Capability{"lookup": {}}},
		{AdapterID: "adp_policy", Adapter: h.Adapter("adp_policy"), Capabilities: map[string]gateway.Capability{"eval": {}}},
		{AdapterID: "adp_payments", Adapter: h.Adapter("adp_payments"), Capabilities: map[string]gateway.Capability{"issue_refund": {Scopes: []string{"payments.refund"}}}},
	}
	rt2, err := contextos.New(planner, h.Registry, h.Keys, &contextos.Options{
		Adapters: regs, Gateway: gw, Transcripts: tr, Evidence: evidence(t), Ontologies: []string{"ont.support@1.0.0"}, ReplaySampleRate: 1,
		Checkpoints: h.Checkpoints, Decisions: h.Decisions, Replays: h.Replays, Now: func() time.Time { return contextostest.FixedTime() },
		Identity: contextos.IdentityOptions{AllowUnclaimed: true}})
	if err != nil {
		t.Fatal(err)
	}
	approval := contextostest.Approval(paused.Pending, contextostest.Approver{UserID: "user_finance_lead_77", Role: "finance_lead"}, contextostest.FixedTime())
	done, err := rt2.Resume(context.Background(), paused.RunID, contextos.ResumeInput{Approvals: []gateway.Approval{approval}})
	if err != nil {
		t.Fatal(err)
	}
	contextostest.AssertStatus(t, done, decision.Decided)
	// The first replica retries the same resume: the run is over.
	if _, err := h.Runtime.Resume(context.Background(), paused.RunID, contextos.ResumeInput{Approvals: []gateway.Approval{approval}}); !errors.Is(err, contextos.ErrNotResumable) {
		t.Errorf("second resume = %v, want ErrNotResumable", err)
	}
	contextostest.AssertCalls(t, h.Adapter("adp_payments"), "issue_refund", 1)
	contextostest.AssertCalls(t, h.Adapter("adp_orders"), "lookup", 1)
	recs, _ := h.Decisions.List(context.Background(), decision.Filter{RunID: paused.RunID})
	if got := statuses(recs); !slices.Equal(got, []decision.Status{decision.Deferred, decision.Decided, decision.Closed}) {
		t.Errorf("records = %v", got)
	}
	if err := h.Decisions.Verify(context.Background()); err != nil {
		t.Error(err)
	}
	contextostest.AssertReplayEqual(t, h.Replay(done))
}

func TestResumeRefusesBadInput(t *testing.T) {
	h := harness(t, contextostest.NewPlanner(lookupPlan(), refundPlan(4200)), nil)
	req, rc := refundRequest(t, 4200, true)
	paused := h.Invoke(req, rc)
	ctx := context.Background()
	if _, err := h.Runtime.Resume(ctx, "run_unknown", contextos.ResumeInput{}); !errors.Is(err, contextos.ErrNotFound) {
		t.Errorf("unknown run: %v", err)
	}
	if _, err := h.Runtime.Resume(ctx, paused.RunID, contextos.ResumeInput{}); !errors.Is(err, contextos.ErrResumeInput) {
		t.Errorf("no approval: %v", err)
	}
	// A wrong role is checked by the gateway: the run pauses again.
	again, err := h.Runtime.Resume(ctx, paused.RunID, contextos.ResumeInput{Approvals: []gateway.Approval{
		contextostest.Approval(paused.Pending, contextostest.Approver{UserID: "usr_771", Role: "support_agent"}, contextostest.FixedTime())}})
	if err != nil {
		t.Fatal(err)
	}
	if again.Status == decision.Decided {
		t.Fatalf("a support agent approved a finance gate: %s", again.Status)
	}
	contextostest.AssertCalls(t, h.Adapter("adp_payments"), "issue_refund", 0)
}

// failingCheckpoints refuses every save.
type failingCheckpoints struct{ contextos.InMemoryCheckpoints }

func (*failingCheckpoints) Save(context.Context, *contextos.Checkpoint) error {
	return errors.New("disk full")
}

func TestPauseIsNotReportedWithoutItsCheckpoint(t *testing.T) {
	h := harness(t, contextostest.NewPlanner(lookupPlan(), refundPlan(4200)), &contextostest.Options{Runtime: contextos.Options{Checkpoints: &failingCheckpoints{}}})
	req, rc := refundRequest(t, 4200, true)
	res, err := h.Runtime.Invoke(context.Background(), req, rc)
	if err == nil || !strings.Contains(err.Error(), "disk full") || res != nil {
		t.Fatalf("Invoke = %+v, %v; want the checkpoint failure", res, err)
	}
	if recs, _ := h.Decisions.List(context.Background(), decision.Filter{}); len(recs) != 0 {
		t.Errorf("a DEFERRED record was stored without its checkpoint: %v", statuses(recs))
	}
	contextostest.AssertCalls(t, h.Adapter("adp_payments"), "issue_refund", 0)
}

func TestNewRefusesBadOptions(t *testing.T) {
	h := harness(t, contextostest.NewPlanner(), nil)
	for name, tc := range map[string]struct {
		opts  *contextos.Options
		field string // the field the error names
	}{
		"sample rate": {&contextos.Options{ReplaySampleRate: 2}, "ReplaySampleRate"},
		// The runtime gives the gateway its clock, tracer provider and
		// transcript: set on the gateway's options they are refused,
		// not silently overwritten.
		"gateway transcript": {&contextos.Options{Gateway: gateway.Options{Transcript: writeOnly{}}}, "Gateway.Transcript"},
		"gateway clock":      {&contextos.Options{Gateway: gateway.Options{Now: time.Now}}, "Gateway.Now"},
		"gateway tracer":     {&contextos.Options{Gateway: gateway.Options{TracerProvider: noop.NewTracerProvider()}}, "Gateway.TracerProvider"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, err := contextos.New(contextostest.NewPlanner(), h.Registry, h.Keys, tc.opts)
			if !errors.Is(err, contextos.ErrConfig) || !strings.Contains(err.Error(), tc.field) {
				t.Errorf("New = %v, want ErrConfig naming %s", err, tc.field)
			}
		})
	}
	if _, err := contextos.New(nil, h.Registry, h.Keys, nil); !errors.Is(err, contextos.ErrConfig) {
		t.Errorf("nil planner: %v", err)
	}
}

type writeOnly struct{}

func (writeOnly) Append(context.Context, gateway.TranscriptEntry) error { return nil }

func TestInvokeRefusesUnpinnedAndUnknownPacks(t *testing.T) {
	h := harness(t, contextostest.NewPlanner(lookupPlan()), nil)
	for _, ref := range []string{"ctxpack.support", "ctxpack.support@1.0", "ctxpack.support@2.0.0"} {
		req, rc := refundRequest(t, 1200, true)
		req.ContextPackRefs = []string{ref}
		if res, err := h.Runtime.Invoke(context.Background(), req, rc); err == nil {
			t.Errorf("%s: ran (%s)", ref, res.Status)
		}
	}
	if len(h.Transcript.Results()) != 0 {
		t.Error("a refused pack reached a tool")
	}
}

func TestToolCallBudgetIsAHardStopAndResumable(t *testing.T) {
	h := harness(t, contextostest.NewPlanner(lookupPlan(), refundPlan(1200)), nil)
	req, rc := refundRequest(t, 1200, true)
	rc.RunBudget.MaxToolCalls = 2
	res := h.Invoke(req, rc)
	contextostest.AssertStatus(t, res, decision.Escalated)
	if !strings.Contains(res.Record.Rationale.Summary, "budget_exceeded: tool_calls") {
		t.Errorf("rationale = %q", res.Record.Rationale.Summary)
	}
	contextostest.AssertCalls(t, h.Adapter("adp_payments"), "issue_refund", 0)
	budget := rc.RunBudget
	budget.MaxToolCalls = 8
	done, err := h.Runtime.Resume(context.Background(), res.RunID, contextos.ResumeInput{Budget: &budget})
	if err != nil {
		t.Fatal(err)
	}
	contextostest.AssertStatus(t, done, decision.Decided)
	contextostest.AssertCalls(t, h.Adapter("adp_payments"), "issue_refund", 1)
	contextostest.AssertCalls(t, h.Adapter("adp_orders"), "lookup", 1)
}

func TestTimeSpentPausedIsNotChargedToTheWallClock(t *testing.T) {
	var now atomic.Int64
	now.Store(contextostest.FixedTime().UnixNano())
	clock := func() time.Time { return time.Unix(0, now.Load()).UTC() }
	h := harness(t, contextostest.NewPlanner(lookupPlan(), refundPlan(4200)), &contextostest.Options{Now: clock})
	req, rc := refundRequest(t, 4200, true)
	paused := h.Invoke(req, rc)
	contextostest.AssertPending(t, paused, "GATE_FINANCE_APPROVAL")
	now.Add(int64(110 * time.Minute)) // the finance lead answers within the request's two-hour TTL
	a := contextostest.Approval(paused.Pending, contextostest.Approver{UserID: "user_finance_lead_77", Role: "finance_lead"}, clock())
	done, err := h.Runtime.Resume(context.Background(), paused.RunID, contextos.ResumeInput{Approvals: []gateway.Approval{a}})
	if err != nil {
		t.Fatal(err)
	}
	contextostest.AssertStatus(t, done, decision.Decided)
	if done.Record.BudgetUsage.WallClockMS > rc.RunBudget.WallClockMS {
		t.Errorf("wall clock charged %d ms, over the %d ms budget", done.Record.BudgetUsage.WallClockMS, rc.RunBudget.WallClockMS)
	}
}

func TestConcurrentResumesContinueTheRunOnce(t *testing.T) {
	h := harness(t, contextostest.NewPlanner(lookupPlan(), refundPlan(4200)), nil)
	req, rc := refundRequest(t, 4200, true)
	paused := h.Invoke(req, rc)
	a := contextostest.Approval(paused.Pending, contextostest.Approver{UserID: "user_finance_lead_77", Role: "finance_lead"}, contextostest.FixedTime())
	var wg sync.WaitGroup
	results := make([]error, 8)
	for i := range results {
		wg.Go(func() {
			_, results[i] = h.Runtime.Resume(context.Background(), paused.RunID, contextos.ResumeInput{Approvals: []gateway.Approval{a}})
		})
	}
	wg.Wait()
	ok := 0
	for _, err := range results {
		switch {
		case err == nil:
			ok++
		case errors.Is(err, contextos.ErrCheckpointConflict), errors.Is(err, contextos.ErrNotResumable):
		default:
			t.Errorf("resume: %v", err)
		}
	}
	if ok != 1 {
		t.Errorf("%d resumes continued the run, want exactly 1", ok)
	}
	contextostest.AssertCalls(t, h.Adapter("adp_payments"), "issue_refund", 1)
	recs, _ := h.Decisions.List(context.Background(), decision.Filter{RunID: paused.RunID})
	if got := statuses(recs); !slices.Equal(got, []decision.Status{decision.Deferred, decision.Decided, decision.Closed}) {
		t.Errorf("records = %v", got)
	}
}

// frozenApprovals holds the first use of an approval until released: the
// runtime using it is frozen there, as a process that stopped (or was
// killed) after claiming the run.
type frozenApprovals struct {
	*gateway.MemoryApprovalLog
	entered, release chan struct{}
	once             atomic.Bool
}

func (l *frozenApprovals) ConsumeAction(ctx context.Context, id, action string) error {
	if !l.once.Swap(true) {
		close(l.entered)
		<-l.release
	}
	return l.MemoryApprovalLog.ConsumeAction(ctx, id, action)
}

// A runtime that resumed a run with an approval and then stopped (frozen
// right after claiming the run) holds it until its claim's lease lapses;
// then a takeover continues it with the approval the run was resumed
// with, and ends it once. When the frozen runtime comes back, its next
// save is refused and it stops without recording anything. The
// taken-over run's packet says where the takeover began and replays
// equal, and Capture of it works.
func TestTakeoverContinuesARunWhoseRuntimeDied(t *testing.T) {
	ctx := context.Background()
	clock := newFakeClock()
	approvals := &frozenApprovals{MemoryApprovalLog: gateway.NewMemoryApprovalLog(), entered: make(chan struct{}), release: make(chan struct{})}
	var o contextostest.Options
	o.Now = clock.Now
	o.Runtime.Gateway.Approvals = approvals
	h := harness(t, contextostest.NewPlanner(lookupPlan(), refundPlan(4200)), &o)
	req, rc := refundRequest(t, 4200, true)
	paused := h.Invoke(req, rc)
	a := contextostest.Approval(paused.Pending, contextostest.Approver{UserID: "user_finance_lead_77", Role: "finance_lead"}, clock.Now())
	frozen := make(chan error, 1)
	go func() {
		_, err := h.Runtime.Resume(ctx, paused.RunID, contextos.ResumeInput{Approvals: []gateway.Approval{a}})
		frozen <- err
	}()
	<-approvals.entered
	// The frozen runtime holds the run: a resume, or a takeover within
	// its lease, is refused before doing anything.
	if _, err := h.Runtime.Resume(ctx, paused.RunID, contextos.ResumeInput{Approvals: []gateway.Approval{a}}); !errors.Is(err, contextos.ErrNotResumable) {
		t.Fatalf("resume of a claimed run = %v, want ErrNotResumable", err)
	}
	clock.Advance(contextos.DefaultHeartbeatTTL - time.Second)
	if _, err := h.Runtime.Resume(ctx, paused.RunID, contextos.ResumeInput{Takeover: true}); !errors.Is(err, contextos.ErrLeaseHeld) {
		t.Fatalf("takeover within the lease = %v, want ErrLeaseHeld", err)
	}
	clock.Advance(time.Second)
	// The takeover goes on with the approval the run was resumed with.
	done, err := h.Runtime.Resume(ctx, paused.RunID, contextos.ResumeInput{Takeover: true})
	if err != nil {
		t.Fatal(err)
	}
	contextostest.AssertStatus(t, done, decision.Decided)
	close(approvals.release)
	if err := <-frozen; !errors.Is(err, contextos.ErrRunInProgress) {
		t.Errorf("the frozen runtime, back after the takeover = %v, want ErrRunInProgress", err)
	}
	contextostest.AssertCalls(t, h.Adapter("adp_payments"), "issue_refund", 1)
	recs := listRecords(t, h.Decisions, paused.RunID)
	if got := statuses(recs); !slices.Equal(got, []decision.Status{decision.Deferred, decision.Decided, decision.Closed}) {
		t.Errorf("records = %v, want the pause, one decision and its closing", got)
	}
	p, err := h.Replays.Get(ctx, done.ReplayPacketID)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(p.Resumes); n != 2 || p.Resumes[0].Takeover != nil || p.Resumes[1].Takeover == nil || len(p.Resumes[1].Approvals) != 1 {
		t.Errorf("packet resumes = %+v, want the resume and then the takeover, with its approval", p.Resumes)
	}
	contextostest.AssertReplayEqual(t, h.Replay(done))
	captured, err := h.Runtime.Capture(ctx, paused.RunID, replay.SourceOperatorCorrection)
	if err != nil {
		t.Fatalf("Capture of the taken-over run: %v", err)
	}
	report, err := h.Runtime.Replay(ctx, captured)
	if err != nil {
		t.Fatal(err)
	}
	contextostest.AssertReplayEqual(t, report)
}
