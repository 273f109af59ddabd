package contextos_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/contextostest"
	"github.com/contextos/contextos/decision"
	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/pack"
	"github.com/contextos/contextos/runcontext"
)

// cardNumber is a Luhn-valid test card number.
const cardNumber = "4111111111111111"

// cardPlanner looks the order up, then refunds the request's amount with
// a card number among the arguments (as a string and as a JSON number).
func cardPlanner() contextos.Planner {
	return contextos.PlannerFunc(func(_ context.Context, r *contextos.PlanRequest) (*contextos.Plan, error) {
		if r.Turn == 0 {
			return lookupPlan(), nil
		}
		amount, _ := r.Request.Input.Context["refund_amount"].(int)
		p := refundPlan(amount)
		p.Steps[0].Args["note"] = "refund to card " + cardNumber
		p.Steps[0].Args["card"] = float64(4111111111111111)
		return p, nil
	})
}

// requestFor is the refund request with its own request id (so its own
// run) and amount.
func requestFor(t *testing.T, id string, amount int) (*runcontext.InvokeRequest, *runcontext.RunContext) {
	req, rc := refundRequest(t, amount, true)
	req.RequestID = id
	rc.RunID = "run_" + strings.TrimPrefix(id, "req_")
	return req, rc
}

// PendingApprovals lists a paused run (its gate, role, capability, call
// and redacted arguments) and neither a run that completed without a
// pause nor one that was resumed to its end.
func TestPendingApprovals(t *testing.T) {
	ctx := context.Background()
	h := bareHarness(t, cardPlanner(), nil)
	scriptDefaults(h, "")
	approver := contextostest.Approver{UserID: "user_finance_lead_77", Role: "finance_lead"}

	paused := h.Invoke(requestFor(t, "req_pending_a", 4200))
	contextostest.AssertPending(t, paused, "GATE_FINANCE_APPROVAL")
	small := h.Invoke(requestFor(t, "req_pending_b", 1200))
	if small.Status != decision.Decided {
		t.Fatalf("1200 refund ended %s, want DECIDED", small.Status)
	}
	resumed := h.Invoke(requestFor(t, "req_pending_c", 4200))
	contextostest.AssertPending(t, resumed, "GATE_FINANCE_APPROVAL")

	list, err := h.Runtime.PendingApprovals(ctx, h.Checkpoints)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || list[0].RunID > list[1].RunID {
		t.Fatalf("pending = %+v, want the two paused runs in run id order (same requested_at)", list)
	}
	h.Approve(resumed, approver)

	list, err = h.Runtime.PendingApprovals(ctx, h.Checkpoints)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 {
		t.Fatalf("pending after a resume = %+v, want only %s", list, paused.RunID)
	}
	p := list[0]
	want := contextos.PendingApproval{RunID: paused.RunID, TenantID: paused.Record.TenantID, GateID: "GATE_FINANCE_APPROVAL", ApproverRole: "finance_lead",
		CapabilityID: "adp_payments.issue_refund", ToolCallID: paused.Pending.ToolCallID, ActionDigest: paused.Pending.ActionDigest,
		TTLSeconds: paused.Pending.TTLSeconds, RequestedAt: paused.Pending.RequestedAt, RecordID: paused.Record.RecordID}
	got := p
	got.Args = nil
	if !jsonEqual(t, got, want) {
		t.Errorf("pending = %+v\nwant      %+v", got, want)
	}
	if p.TenantID == "" || p.ToolCallID == "" || p.ActionDigest == "" {
		t.Errorf("pending approval lacks its tenant, call or digest: %+v", p)
	}
	if p.Args["order_id"] != "ord_881" || p.Args["card"] != gateway.Redacted || !strings.Contains(p.Args["note"].(string), gateway.Redacted) {
		t.Errorf("args = %v, want the order id kept and the card redacted", p.Args)
	}
	b, _ := json.Marshal(list)
	if strings.Contains(string(b), cardNumber) || strings.Contains(string(b), "4.111111111111111e") {
		t.Errorf("the listing holds the card number: %s", b)
	}
	// The listed approval resumes the run.
	a := gateway.Approval{ApprovalID: "apr_listed", GateID: p.GateID, ActionDigest: p.ActionDigest, Approver: approver.UserID, ApproverRole: approver.Role, DecidedAt: contextostest.FixedTime()}
	res, err := h.Runtime.Resume(ctx, p.RunID, contextos.ResumeInput{Approvals: []gateway.Approval{a}})
	if err != nil || res.Status != decision.Decided {
		t.Fatalf("resume with the listed digest: %v, %v", res, err)
	}
	if list, err := h.Runtime.PendingApprovals(ctx, h.Checkpoints); err != nil || len(list) != 0 {
		t.Errorf("pending after every resume = %+v, %v; want none", list, err)
	}
}

func jsonEqual(t *testing.T, a, b any) bool {
	t.Helper()
	x, err1 := json.Marshal(a)
	y, err2 := json.Marshal(b)
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	return string(x) == string(y)
}

// The runs to look at are a typed argument (a store that lists its runs,
// or a RunList), not a capability the runtime's store may lack; none is
// ErrConfig.
func TestPendingApprovalsNeedsTheRuns(t *testing.T) {
	h := bareHarness(t, cardPlanner(), nil)
	if _, err := h.Runtime.PendingApprovals(context.Background(), nil); !errors.Is(err, contextos.ErrConfig) {
		t.Errorf("err = %v, want ErrConfig", err)
	}
	if list, err := h.Runtime.PendingApprovals(context.Background(), contextos.RunList{}); err != nil || len(list) != 0 {
		t.Errorf("an empty RunList = %v, %v; want none", list, err)
	}
}

// The run's active rules apply, a host's among them; a runtime that does
// not know a rule the run's record names refuses the listing; when the
// record is not stored, every rule the runtime knows applies.
func TestPendingApprovalsRedactsByTheRunsRules(t *testing.T) {
	ctx := context.Background()
	orderRule, err := gateway.RegexpRedactor(`ord_[0-9]+`)
	if err != nil {
		t.Fatal(err)
	}
	doc := readTestdata(t, "ctxpack.support-1.0.0.json")
	doc = []byte(strings.Replace(string(doc), `"redaction_rules": ["pan", "credit_card"]`, `"redaction_rules": ["pan", "credit_card", "order_ref"]`, 1))
	var opts contextostest.Options
	opts.Runtime.Gateway.Redactors = map[string]gateway.Redactor{"order_ref": orderRule}
	opts.Runtime.Evidence = evidence(t)
	opts.Scopes = map[string][]string{"adp_payments.issue_refund": {"payments.refund"}}
	h := contextostest.New(t, cardPlanner(), [][]byte{doc}, &opts)
	scriptDefaults(h, "")
	paused := h.Invoke(requestFor(t, "req_rules", 4200))
	contextostest.AssertPending(t, paused, "GATE_FINANCE_APPROVAL")
	if !strings.Contains(strings.Join(paused.Record.ControlsActive.RedactionRulesActive, ","), "order_ref") {
		t.Fatalf("the run's rules are %v", paused.Record.ControlsActive.RedactionRulesActive)
	}

	other := func(rules map[string]gateway.Redactor, decisions decision.Store) *contextos.Runtime {
		rt, err := contextos.New(cardPlanner(), pack.NewMemoryRegistry(nil), runcontext.NewStaticKeys(nil),
			&contextos.Options{Checkpoints: h.Checkpoints, Decisions: decisions, Gateway: gateway.Options{Redactors: rules}})
		if err != nil {
			t.Fatal(err)
		}
		return rt
	}
	for _, tc := range []struct {
		name      string
		rt        *contextos.Runtime
		wantOrder any    // the order_id argument listed
		wantErr   string // "" for none
	}{
		{"the run's runtime", h.Runtime, gateway.Redacted, ""},
		{"a runtime without the rule", other(nil, h.Decisions), nil, `"order_ref"`},
		{"no record, the rule known", other(map[string]gateway.Redactor{"order_ref": orderRule}, decision.NewMemoryStore()), gateway.Redacted, ""},
		{"no record, the rule unknown", other(nil, decision.NewMemoryStore()), "ord_881", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			list, err := tc.rt.PendingApprovals(ctx, h.Checkpoints)
			if tc.wantErr != "" {
				if !errors.Is(err, contextos.ErrConfig) || !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("err = %v, want ErrConfig naming %s", err, tc.wantErr)
				}
				return
			}
			if err != nil || len(list) != 1 {
				t.Fatalf("pending = %+v, %v", list, err)
			}
			if list[0].Args["order_id"] != tc.wantOrder || list[0].Args["card"] != gateway.Redacted {
				t.Errorf("args = %v, want order_id %v and the card redacted", list[0].Args, tc.wantOrder)
			}
		})
	}
}

// A run being resumed (its claim saved, its paused call running) is not
// listed: another approval could not continue it.
func TestPendingApprovalsOmitsARunBeingResumed(t *testing.T) {
	ctx := context.Background()
	h := bareHarness(t, cardPlanner(), nil)
	scriptDefaults(h, "adp_payments")
	started, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	h.Adapter("adp_payments").On("issue_refund").When(func(map[string]any) bool {
		once.Do(func() { close(started) })
		return true
	}).ReturnOutput(map[string]any{"transaction_id": "txn_q9"}, "refund:txn_q9").IgnoreContext(release)
	paused := h.Invoke(requestFor(t, "req_resuming", 4200))
	contextostest.AssertPending(t, paused, "GATE_FINANCE_APPROVAL")
	if list, err := h.Runtime.PendingApprovals(ctx, h.Checkpoints); err != nil || len(list) != 1 {
		t.Fatalf("pending before the resume = %+v, %v", list, err)
	}
	done := make(chan error, 1)
	go func() {
		a := contextostest.Approval(paused.Pending, contextostest.Approver{UserID: "user_finance_lead_77", Role: "finance_lead"}, contextostest.FixedTime())
		_, err := h.Runtime.Resume(ctx, paused.RunID, contextos.ResumeInput{Approvals: []gateway.Approval{a}})
		done <- err
	}()
	<-started
	list, err := h.Runtime.PendingApprovals(ctx, h.Checkpoints)
	close(release)
	if err != nil || len(list) != 0 {
		t.Errorf("pending while the run is resumed = %+v, %v; want none", list, err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// Given run ids (a RunList), PendingApprovals looks at those runs only:
// the store need not list its runs, an unknown id is skipped, and other
// runs are left out.
func TestPendingApprovalsOfNamedRuns(t *testing.T) {
	ctx := context.Background()
	var opts contextostest.Options
	// A checkpoint store that cannot list its runs.
	opts.Runtime.Checkpoints = struct{ contextos.CheckpointStore }{contextos.NewInMemoryCheckpoints()}
	h := bareHarness(t, cardPlanner(), &opts)
	scriptDefaults(h, "")
	a := h.Invoke(requestFor(t, "req_named_a", 4200))
	b := h.Invoke(requestFor(t, "req_named_b", 4200))
	contextostest.AssertPending(t, a, "GATE_FINANCE_APPROVAL")
	contextostest.AssertPending(t, b, "GATE_FINANCE_APPROVAL")
	list, err := h.Runtime.PendingApprovals(ctx, contextos.RunList{b.RunID, "run_unknown"})
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].RunID != b.RunID {
		t.Fatalf("PendingApprovals(%s) = %+v, want that run only", b.RunID, list)
	}
}

// countingCheckpoints is an in-memory store (with its pending index) that
// counts the checkpoints loaded.
type countingCheckpoints struct {
	*contextos.InMemoryCheckpoints
	mu    sync.Mutex
	loads int
}

func (c *countingCheckpoints) Load(ctx context.Context, runID string) (*contextos.Checkpoint, error) {
	c.mu.Lock()
	c.loads++
	c.mu.Unlock()
	return c.InMemoryCheckpoints.Load(ctx, runID)
}

func (c *countingCheckpoints) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.loads
	c.loads = 0
	return n
}

// With a store that keeps the pending index, PendingApprovals reads the
// checkpoints of the paused runs only, and of one tenant's only when
// asked for one tenant; a store without it is read run by run, with the
// same answer.
func TestPendingApprovalsReadsTheIndex(t *testing.T) {
	ctx := context.Background()
	store := &countingCheckpoints{InMemoryCheckpoints: contextos.NewInMemoryCheckpoints()}
	var opts contextostest.Options
	opts.Runtime.Checkpoints = store
	h := bareHarness(t, cardPlanner(), &opts)
	scriptDefaults(h, "")
	paused := h.Invoke(requestFor(t, "req_index_paused", 4200))
	contextostest.AssertPending(t, paused, "GATE_FINANCE_APPROVAL")
	for _, id := range []string{"req_index_a", "req_index_b", "req_index_c"} {
		if res := h.Invoke(requestFor(t, id, 1200)); res.Status != decision.Decided {
			t.Fatalf("%s ended %s, want DECIDED", id, res.Status)
		}
	}
	_, rc := requestFor(t, "req_index_paused", 4200)
	tenant := rc.TenantID
	unindexed := struct {
		contextos.ListingCheckpointStore
	}{store}
	for _, tc := range []struct {
		name      string
		list      func() ([]contextos.PendingApproval, error)
		want      []string
		wantLoads int
	}{
		{"index, every tenant", func() ([]contextos.PendingApproval, error) { return h.Runtime.PendingApprovals(ctx, store) }, []string{paused.RunID}, 1},
		{"index, the run's tenant", func() ([]contextos.PendingApproval, error) { return h.Runtime.PendingApprovalsOf(ctx, store, tenant) }, []string{paused.RunID}, 1},
		{"index, another tenant", func() ([]contextos.PendingApproval, error) {
			return h.Runtime.PendingApprovalsOf(ctx, store, "tenant_other")
		}, nil, 0},
		{"no index, every tenant", func() ([]contextos.PendingApproval, error) { return h.Runtime.PendingApprovals(ctx, unindexed) }, []string{paused.RunID}, 4},
		{"no index, the run's tenant", func() ([]contextos.PendingApproval, error) {
			return h.Runtime.PendingApprovalsOf(ctx, unindexed, tenant)
		}, []string{paused.RunID}, 4},
		{"no index, another tenant", func() ([]contextos.PendingApproval, error) {
			return h.Runtime.PendingApprovalsOf(ctx, unindexed, "tenant_other")
		}, nil, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store.count()
			list, err := tc.list()
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, p := range list {
				got = append(got, p.RunID)
			}
			if strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Errorf("listed %v, want %v", got, tc.want)
			}
			if n := store.count(); n != tc.wantLoads {
				t.Errorf("%d checkpoints loaded, want %d", n, tc.wantLoads)
			}
		})
	}
	if _, err := h.Runtime.PendingApprovalsOf(ctx, store, ""); !errors.Is(err, contextos.ErrConfig) {
		t.Errorf("PendingApprovalsOf without a tenant = %v, want ErrConfig", err)
	}
	// Approved and resumed to its end, the run leaves the index.
	h.Approve(paused, contextostest.Approver{UserID: "user_finance_lead_77", Role: "finance_lead"})
	if ids, err := store.PendingRunIDs(ctx, ""); err != nil || len(ids) != 0 {
		t.Errorf("index after the resume = %v, %v; want empty", ids, err)
	}
}
