package contextos_test

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/contextostest"
	"github.com/contextos/contextos/decision"
	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/gateway/gatewaytest"
)

// Defects an independent hostile review of issue 13 found; each test
// failed before its fix.

type verdictCritic struct {
	verify, score contextos.CriticVerdict
	verifyErr     func(in *contextos.CriticInput) error
}

func (c verdictCritic) Verify(_ context.Context, in *contextos.CriticInput) (contextos.Judgement, error) {
	if c.verifyErr != nil {
		if err := c.verifyErr(in); err != nil {
			return contextos.Judgement{}, err
		}
	}
	return contextos.Judgement{Verdict: c.verify, Reason: "host"}, nil
}

func (c verdictCritic) Score(context.Context, *contextos.CriticInput) (contextos.Judgement, error) {
	return contextos.Judgement{Verdict: c.score, Reason: "host"}, nil
}

// A host critic's escalate or retry at verify is obeyed, never ignored.
func TestHostCriticVerifyVerdictsAreObeyed(t *testing.T) {
	for _, v := range []contextos.CriticVerdict{contextos.VerdictEscalate, contextos.VerdictRetry} {
		h := harness(t, contextostest.NewPlanner(lookupPlan(), refundPlan(1200)).RepeatLast(),
			&contextostest.Options{Runtime: contextos.Options{Critic: verdictCritic{verify: v, score: contextos.VerdictAccept}}})
		req, rc := refundRequest(t, 1200, true)
		res := h.Invoke(req, rc)
		contextostest.AssertStatus(t, res, decision.Escalated)
		contextostest.AssertCalls(t, h.Adapter("adp_payments"), "issue_refund", 0)
	}
}

// A plan the critic failed to verify is not executed on resume.
func TestAPlanNotVerifiedIsNotRunOnResume(t *testing.T) {
	var failed atomic.Bool
	c := verdictCritic{verify: contextos.VerdictOK, score: contextos.VerdictAccept, verifyErr: func(in *contextos.CriticInput) error {
		if len(in.Plan.Steps) > 0 && in.Plan.Steps[0].CapabilityID == "adp_payments.issue_refund" && !failed.Swap(true) {
			return errors.New("critic timeout")
		}
		return nil
	}}
	planner := contextostest.NewPlanner(lookupPlan(), refundPlan(1200), deniedPlan())
	h := bareHarness(t, planner, &contextostest.Options{Runtime: contextos.Options{Critic: rejectRefunds{c}}})
	scriptDefaults(h, "")
	req, rc := refundRequest(t, 1200, true)
	res := h.Invoke(req, rc)
	contextostest.AssertStatus(t, res, decision.Escalated)
	done, err := h.Runtime.Resume(context.Background(), res.RunID, contextos.ResumeInput{})
	if err != nil {
		t.Fatal(err)
	}
	contextostest.AssertCalls(t, h.Adapter("adp_payments"), "issue_refund", 0)
	contextostest.AssertOutcome(t, done, "denied")
}

// rejectRefunds fails its first verify of a refund, then rejects refunds.
type rejectRefunds struct{ verdictCritic }

func (c rejectRefunds) Verify(ctx context.Context, in *contextos.CriticInput) (contextos.Judgement, error) {
	j, err := c.verdictCritic.Verify(ctx, in)
	if err != nil {
		return j, err
	}
	if len(in.Plan.Steps) > 0 && in.Plan.Steps[0].CapabilityID == "adp_payments.issue_refund" {
		return contextos.Judgement{Verdict: contextos.VerdictReplan, Reason: "no refunds today"}, nil
	}
	return j, nil
}

// NaN in shapes the boundary did not walk (a pointer, a json.Number that is
// no number) is refused where it enters: the run ends with a record.
func TestNonFiniteValuesInAnyShapeAreRefusedAtTheBoundary(t *testing.T) {
	nan := math.NaN()
	t.Run("adapter output", func(t *testing.T) {
		h := bareHarness(t, contextostest.NewPlanner(lookupPlan(), refundPlan(1200), approvedAgain()).RepeatLast(), nil)
		scriptDefaults(h, "adp_payments")
		h.Adapter("adp_payments").On("issue_refund").Return(&gateway.Outcome{Output: map[string]any{"p": &nan, "rows": []map[string]any{{"x": nan}}}, Mutations: []string{"refund:t"}})
		req, rc := refundRequest(t, 1200, true)
		res, err := h.Runtime.Invoke(context.Background(), req, rc)
		if err != nil {
			t.Fatalf("Invoke: %v", err)
		}
		assertNotDecidedOnFailedWrite(t, res)
		if res.Status == decision.Decided {
			t.Errorf("DECIDED on a refund whose output was refused")
		}
	})
	t.Run("planner outputs", func(t *testing.T) {
		final := approvedAgain()
		final.Decision.Outputs["refund_amount_inr"] = json.Number("NaN")
		plans := []*contextos.Plan{lookupPlan(), refundPlan(1200), final}
		plans[1].Decision = nil
		h := harness(t, contextos.PlannerFunc(func(_ context.Context, req *contextos.PlanRequest) (*contextos.Plan, error) {
			return plans[min(req.Turn, len(plans)-1)], nil
		}), nil)
		req, rc := refundRequest(t, 1200, true)
		res, err := h.Runtime.Invoke(context.Background(), req, rc)
		if err != nil {
			t.Fatalf("Invoke: %v", err)
		}
		contextostest.AssertStatus(t, res, decision.Escalated)
		if !strings.Contains(res.Record.Rationale.Summary, "invalid_plan") {
			t.Errorf("rationale %q", res.Record.Rationale.Summary)
		}
	})
}

// A host critic that rejects a plan proposing a decision the pack does not
// have still ends the run with a record.
func TestRejectingAnUnknownDecisionStillRecords(t *testing.T) {
	bad := refundPlan(1200)
	bad.Decision.DecisionKey = "no.such.key"
	h := harness(t, contextostest.NewPlanner(lookupPlan(), bad), &contextostest.Options{Runtime: contextos.Options{
		Critic: rejectDecisions{}}})
	req, rc := refundRequest(t, 1200, true)
	res, err := h.Runtime.Invoke(context.Background(), req, rc)
	if err != nil {
		t.Fatalf("Invoke: %v", err)
	}
	contextostest.AssertStatus(t, res, decision.Rejected)
	if !strings.Contains(res.Record.Rationale.Summary, "no.such.key") {
		t.Errorf("rationale %q", res.Record.Rationale.Summary)
	}
}

// rejectDecisions rejects every plan that proposes a decision.
type rejectDecisions struct{}

func (rejectDecisions) Verify(_ context.Context, in *contextos.CriticInput) (contextos.Judgement, error) {
	if in.Plan.Decision != nil {
		return contextos.Judgement{Verdict: contextos.VerdictReject, Reason: "host"}, nil
	}
	return contextos.Judgement{Verdict: contextos.VerdictOK}, nil
}

func (rejectDecisions) Score(context.Context, *contextos.CriticInput) (contextos.Judgement, error) {
	return contextos.Judgement{Verdict: contextos.VerdictAccept}, nil
}

// A Stream consumer that panics stops the run, which ends with its record;
// the consumer's own panic value reaches it.
func TestStreamConsumerPanicEndsTheRunWithARecord(t *testing.T) {
	h := harness(t, contextostest.NewPlanner(lookupPlan(), refundPlan(1200)), nil)
	req, rc := refundRequest(t, 1200, true)
	var got any
	func() {
		defer func() { got = recover() }()
		for e := range h.Runtime.Stream(context.Background(), req, rc) {
			if e.Kind == contextos.EventToolResult && e.Result.CapabilityID == "adp_payments.issue_refund" {
				panic("consumer bug")
			}
		}
	}()
	if got != "consumer bug" {
		t.Fatalf("the consumer's panic became %v", got)
	}
	recs, err := h.Decisions.List(context.Background(), decision.Filter{})
	if err != nil || len(recs) != 1 {
		t.Fatalf("records %v (%v)", recs, err)
	}
	cp, err := loadState(context.Background(), h.Checkpoints, recs[0].RunID)
	if err != nil || cp.Active {
		t.Errorf("the run is still claimed: %+v (%v)", cp, err)
	}
}

// flakyDecisions fails its first Append.
type flakyDecisions struct {
	*decision.MemoryStore
	failed atomic.Bool
}

func (f *flakyDecisions) Append(ctx context.Context, r *decision.Record) (*decision.Record, error) {
	if !f.failed.Swap(true) {
		return nil, errors.New("db down")
	}
	return f.MemoryStore.Append(ctx, r)
}

// A decision store that fails after the refund leaves the run resumable,
// and the resume ends it with its record without refunding again.
func TestDecisionStoreFailureLeavesTheRunResumable(t *testing.T) {
	store := &flakyDecisions{MemoryStore: decision.NewMemoryStore()}
	// No replay here: a store failure is not an input a packet records, so
	// the resumed run's packet does not replay equal (a known gap).
	h := bareHarness(t, contextostest.NewPlanner(lookupPlan(), refundPlan(1200), approvedAgain()), &contextostest.Options{Runtime: contextos.Options{Decisions: store}})
	scriptDefaults(h, "")
	req, rc := refundRequest(t, 1200, true)
	if _, err := h.Runtime.Invoke(context.Background(), req, rc); err == nil {
		t.Fatal("the failed record store was not reported")
	}
	assertResumesWithoutRefundingAgain(t, h, rc.RunID)
}

// A cancellation between a plan and its first write stops the run before
// the write, reported as a cancellation, and replays equal.
func TestCancellationBeforeAWriteStopsBeforeIt(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := verdictCritic{verify: contextos.VerdictOK, score: contextos.VerdictAccept, verifyErr: func(in *contextos.CriticInput) error {
		if len(in.Plan.Steps) > 0 && in.Plan.Steps[0].CapabilityID == "adp_payments.issue_refund" {
			cancel()
		}
		return nil
	}}
	h := harness(t, contextostest.NewPlanner(lookupPlan(), refundPlan(1200)), &contextostest.Options{Runtime: contextos.Options{Critic: c}})
	req, rc := refundRequest(t, 1200, true)
	res, err := h.Runtime.Invoke(ctx, req, rc)
	if err != nil {
		t.Fatal(err)
	}
	contextostest.AssertStatus(t, res, decision.Escalated)
	if !strings.HasPrefix(res.Record.Rationale.Summary, "canceled") {
		t.Errorf("rationale %q", res.Record.Rationale.Summary)
	}
	contextostest.AssertCalls(t, h.Adapter("adp_payments"), "issue_refund", 0)
}

// A planner's or critic's error text (which may carry a secret) reaches the
// log, never the record.
func TestPlannerAndCriticErrorsDoNotReachTheRecord(t *testing.T) {
	const secret = "api_key=sk-live-SECRET123"
	for _, opts := range []struct {
		planner contextos.Planner
		critic  contextos.Critic
	}{
		{planner: contextos.PlannerFunc(func(context.Context, *contextos.PlanRequest) (*contextos.Plan, error) {
			return nil, errors.New("upstream 401: " + secret)
		})},
		{planner: contextostest.NewPlanner(lookupPlan()), critic: verdictCritic{verifyErr: func(*contextos.CriticInput) error { return errors.New(secret) }}},
	} {
		h := harness(t, opts.planner, &contextostest.Options{Runtime: contextos.Options{Critic: opts.critic}})
		req, rc := refundRequest(t, 1200, true)
		res := h.Invoke(req, rc)
		b, _ := json.Marshal(res.Record)
		if strings.Contains(string(b), "SECRET123") {
			t.Errorf("the record carries the error text: %s", res.Record.Rationale.Summary)
		}
	}
}

// Approvers are compared as people are: blank, padded or differently cased
// names of the requesting user are refused.
func TestApproverNamesAreNormalized(t *testing.T) {
	for _, approver := range []string{" ", "usr_771 ", "USR_771"} {
		h := harness(t, contextostest.NewPlanner(lookupPlan(), refundPlan(4200), approvedAgain()).RepeatLast(), nil)
		req, rc := refundRequest(t, 4200, true)
		res := h.Invoke(req, rc)
		a := contextostest.Approval(res.Pending, contextostest.Approver{UserID: approver, Role: "finance_lead"}, contextostest.FixedTime())
		done, err := h.Runtime.Resume(context.Background(), res.RunID, contextos.ResumeInput{Approvals: []gateway.Approval{a}})
		if err != nil {
			t.Fatal(err)
		}
		if done.Status == decision.Decided {
			t.Errorf("approver %q: DECIDED", approver)
		}
		contextostest.AssertCalls(t, h.Adapter("adp_payments"), "issue_refund", 0)
	}
}

// A planner turn's usage is charged whole, even the part over the budget.
func TestPlannerOverspendIsCharged(t *testing.T) {
	p := lookupPlan()
	p.Usage = contextos.PlanUsage{Tokens: 50000, CostCents: 40}
	h := harness(t, contextos.PlannerFunc(func(context.Context, *contextos.PlanRequest) (*contextos.Plan, error) { return p, nil }), nil)
	req, rc := refundRequest(t, 1200, true)
	res := h.Invoke(req, rc)
	contextostest.AssertStatus(t, res, decision.Escalated)
	if u := res.Record.BudgetUsage; u.Tokens != 50000 || u.CostUSDCents != 40 {
		t.Errorf("recorded usage %+v, want what the planner spent", u)
	}
}

// failingSink refuses the result entry of the refund once.
type failingSink struct {
	*gatewaytest.Recorder
	failed atomic.Bool
}

func (s *failingSink) Append(ctx context.Context, e gateway.TranscriptEntry) error {
	if e.Result != nil && e.Result.CapabilityID == "adp_payments.issue_refund" && !s.failed.Swap(true) {
		return errors.New("disk full")
	}
	return s.Recorder.Append(ctx, e)
}

// A transcript sink that fails after the refund ran: the run stops
// ESCALATED with a stored record and a resumable checkpoint, and the
// resume does not refund again.
func TestTranscriptFailureAfterAWriteIsRecorded(t *testing.T) {
	sink := &failingSink{Recorder: &gatewaytest.Recorder{}}
	h := bareHarness(t, contextostest.NewPlanner(lookupPlan(), refundPlan(1200), approvedAgain()),
		&contextostest.Options{Runtime: contextos.Options{Transcripts: sink}})
	scriptDefaults(h, "")
	req, rc := refundRequest(t, 1200, true)
	res, err := h.Runtime.Invoke(context.Background(), req, rc)
	if err != nil {
		t.Fatalf("Invoke: %v", err)
	}
	contextostest.AssertStatus(t, res, decision.Escalated)
	if !strings.Contains(res.Record.Rationale.Summary, "transcript_unavailable") || strings.Contains(res.Record.Rationale.Summary, "disk full") {
		t.Errorf("rationale %q", res.Record.Rationale.Summary)
	}
	assertResumesWithoutRefundingAgain(t, h, res.RunID)
}

// lostAnswerDecisions stores every append and answers the first with an
// error, as a store whose commit's answer was lost does; with getFails,
// its Get fails too.
type lostAnswerDecisions struct {
	*decision.MemoryStore
	getFails bool
	forge    bool // Get answers the stored record's hash on another body
	failed   atomic.Bool
	deadline atomic.Pointer[time.Time] // the failed append's
}

func (f *lostAnswerDecisions) Append(ctx context.Context, r *decision.Record) (*decision.Record, error) {
	stored, err := f.MemoryStore.Append(ctx, r)
	if err == nil && !f.failed.Swap(true) {
		if d, ok := ctx.Deadline(); ok {
			f.deadline.Store(&d)
		}
		return nil, errors.New("connection reset after commit")
	}
	return stored, err
}

func (f *lostAnswerDecisions) Get(ctx context.Context, id string) (*decision.Record, error) {
	if f.getFails {
		return nil, errors.New("db down")
	}
	// The append may have failed because its context ran out: the lookup
	// must not run on what is left of it.
	if d, ok := ctx.Deadline(); f.deadline.Load() != nil && (!ok || !d.After(*f.deadline.Load())) {
		return nil, errors.New("the lookup ran on the failed append's context")
	}
	got, err := f.MemoryStore.Get(ctx, id)
	if err == nil && f.forge {
		got.Outcome = "denied"
	}
	return got, err
}

// A record the decision store stored but answered with an error is the
// run's record: the run ends with it (not "record not stored", which a
// resume could never end, its record id taken). When the store cannot
// say, the run is left resumable as for any store failure.
func TestRecordStoredDespiteAnErrorIsTheRunsRecord(t *testing.T) {
	t.Run("found", func(t *testing.T) {
		store := &lostAnswerDecisions{MemoryStore: decision.NewMemoryStore()}
		h := harness(t, contextostest.NewPlanner(lookupPlan(), refundPlan(1200)), &contextostest.Options{Runtime: contextos.Options{Decisions: store}})
		req, rc := refundRequest(t, 1200, true)
		res, err := h.Runtime.Invoke(context.Background(), req, rc)
		if err != nil {
			t.Fatalf("Invoke = %v", err)
		}
		contextostest.AssertStatus(t, res, decision.Decided)
		recs, err := store.List(context.Background(), decision.Filter{})
		if err != nil || len(recs) != 1 || recs[0].RecordHash != res.Record.RecordHash {
			t.Fatalf("stored %d records (%v); want the result's one", len(recs), err)
		}
		if err := store.Verify(context.Background()); err != nil {
			t.Error(err)
		}
		cp, err := loadState(context.Background(), h.Checkpoints, rc.RunID)
		if err != nil || !cp.Terminal || cp.Active || cp.Stopped != "" {
			t.Errorf("checkpoint %+v (%v); want the run ended", cp, err)
		}
	})
	t.Run("store cannot say", func(t *testing.T) {
		store := &lostAnswerDecisions{MemoryStore: decision.NewMemoryStore(), getFails: true}
		h := bareHarness(t, contextostest.NewPlanner(lookupPlan(), refundPlan(1200)), &contextostest.Options{Runtime: contextos.Options{Decisions: store}})
		scriptDefaults(h, "")
		req, rc := refundRequest(t, 1200, true)
		if _, err := h.Runtime.Invoke(context.Background(), req, rc); err == nil {
			t.Fatal("the failed append was not reported")
		}
		cp, err := loadState(context.Background(), h.Checkpoints, rc.RunID)
		if err != nil || cp.Terminal || cp.Active || !strings.HasPrefix(cp.Stopped, "record_not_stored") {
			t.Errorf("checkpoint %+v (%v); want the run resumable, not recorded", cp, err)
		}
	})
	t.Run("forged body", func(t *testing.T) {
		// The store answers the record's hash on another outcome: the
		// run does not take the store's word for what it decided.
		store := &lostAnswerDecisions{MemoryStore: decision.NewMemoryStore(), forge: true}
		h := bareHarness(t, contextostest.NewPlanner(lookupPlan(), refundPlan(1200)), &contextostest.Options{Runtime: contextos.Options{Decisions: store}})
		scriptDefaults(h, "")
		req, rc := refundRequest(t, 1200, true)
		if res, err := h.Runtime.Invoke(context.Background(), req, rc); err == nil {
			t.Fatalf("a forged record was taken as the run's: %s %s", res.Status, res.Record.Outcome)
		}
	})
	t.Run("another record under the id", func(t *testing.T) {
		// A store answering with an error after storing something else
		// under the record's id: that is not the run's record.
		store := &lostAnswerDecisions{MemoryStore: decision.NewMemoryStore()}
		store.failed.Store(true)
		h := bareHarness(t, contextostest.NewPlanner(lookupPlan(), refundPlan(1200)), &contextostest.Options{Runtime: contextos.Options{Decisions: store}})
		scriptDefaults(h, "")
		req, rc := refundRequest(t, 1200, true)
		first, err := h.Runtime.Invoke(context.Background(), req, rc)
		if err != nil {
			t.Fatal(err)
		}
		// The same run id again on a fresh runtime over the same store,
		// with another amount: its record id is taken by the first.
		h2 := bareHarness(t, contextostest.NewPlanner(lookupPlan(), refundPlan(900)), &contextostest.Options{Runtime: contextos.Options{Decisions: store}})
		scriptDefaults(h2, "")
		req2, rc2 := refundRequest(t, 900, true)
		rc2.RunID = rc.RunID
		if res, err := h2.Runtime.Invoke(context.Background(), req2, rc2); err == nil {
			t.Fatalf("a run whose record id holds another record ended with %+v (first %s)", res.Record, first.Record.RecordHash)
		}
	})
}
