package gateway_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/gateway/gatewaytest"
	"github.com/contextos/contextos/pack"
	"github.com/contextos/contextos/policy"
	"github.com/contextos/contextos/runcontext"
)

func TestReadOnlyLookupRuns(t *testing.T) {
	f := newFixture(t)
	res, err := f.run.Call(ctx, lookupCall())
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != gateway.StatusOK || res.Output["status"] != "delivered" || res.PolicyDecisionID == nil || res.Metadata.Attempts != 1 {
		t.Fatalf("lookup = %+v", res)
	}
	if f.orders.CallCount("lookup") != 1 {
		t.Error("adapter not called once")
	}
	call := f.orders.Calls()[0]
	if call.IdempotencyKey != "" || call.Envelope.IdempotencyKey != nil || call.Trace.TraceID != f.rc.TraceID || call.Envelope.ApprovalModeEffective != runcontext.ReadOnly {
		t.Errorf("read-only call envelope = %+v", call.Envelope)
	}
	// The adapter gets the run's W3C trace context (parsed once per run) to
	// propagate.
	if call.Trace.Traceparent() != f.rc.TraceContext.TraceParent || call.Trace.SpanID != f.req.Trace.SpanID {
		t.Errorf("adapter trace = %+v, want the run's %+v", call.Trace, *f.rc.TraceContext)
	}
	if got := len(f.recorder.Entries()); got != 2 {
		t.Errorf("transcript has %d entries, want call + result", got)
	}
	if _, err := gateway.VerifyTranscript(f.recorder.Entries()); err != nil {
		t.Errorf("transcript chain: %v", err)
	}
	if f.run.ChainState().Hash == gateway.GenesisHash {
		t.Error("chain hash did not advance")
	}
}

// The refund for 4200 pauses on the finance gate; an approval by a
// finance_lead resumes it exactly once; wrong role, expired approval,
// approval for other arguments and a reused approval are refused.
func TestRefundApprovalFlow(t *testing.T) {
	f := newFixture(t)
	paused, err := f.run.Call(ctx, refundCall(4200))
	if err != nil {
		t.Fatal(err)
	}
	if paused.Status != gateway.StatusPaused || paused.Error.Code != gateway.CodeApprovalPending || paused.Approval == nil {
		t.Fatalf("refund = %+v", paused)
	}
	a := paused.Approval
	if a.GateID != "GATE_FINANCE_APPROVAL" || a.ApproverRole != "finance_lead" || a.TTLSeconds != 7200 || !strings.HasPrefix(a.ActionDigest, "sha256:") || !strings.HasPrefix(a.EvidenceSnapshotHash, "sha256:") || a.IdempotencyKey == "" {
		t.Errorf("approval request = %+v", a)
	}
	if f.payments.CallCount("issue_refund") != 0 {
		t.Fatal("a paused call reached the adapter")
	}
	refusals := []struct {
		name     string
		req      gateway.CallRequest
		approval *gateway.Approval
		code     string
	}{
		{"wrong role", refundCall(4200), approvalFor(paused, "support_lead", f.now, "apr_1"), gateway.CodeApprovalDenied},
		{"expired", refundCall(4200), approvalFor(paused, "finance_lead", f.now.Add(-3*time.Hour), "apr_2"), gateway.CodeApprovalTimeout},
		{"decided in the future", refundCall(4200), approvalFor(paused, "finance_lead", f.now.Add(time.Hour), "apr_3"), gateway.CodeApprovalTimeout},
		{"other arguments", refundCall(4300), approvalFor(paused, "finance_lead", f.now, "apr_4"), gateway.CodeApprovalDenied},
		{"denied by approver", refundCall(4200), func() *gateway.Approval {
			a := approvalFor(paused, "finance_lead", f.now, "apr_5")
			a.Denied = true
			return a
		}(), gateway.CodeApprovalDenied},
	}
	for _, r := range refusals {
		req := r.req
		req.Approval = r.approval
		res, err := f.run.Call(ctx, req)
		if err != nil || res.Status != gateway.StatusBlocked || res.Error.Code != r.code || res.Error.Retryable {
			t.Errorf("%s: %+v %v", r.name, res, err)
		}
	}
	if f.payments.CallCount("issue_refund") != 0 {
		t.Fatal("a refused approval reached the adapter")
	}
	req := refundCall(4200)
	req.Approval = approvalFor(paused, "finance_lead", f.now.Add(-time.Minute), "apr_ok")
	done, err := f.run.Call(ctx, req)
	if err != nil || done.Status != gateway.StatusCompleted || done.Metadata.Approver != "user_finance_lead_77" || done.Metadata.ApprovalEvidenceSnapshotHash != a.EvidenceSnapshotHash {
		t.Fatalf("approved refund = %+v, %v", done, err)
	}
	if len(done.Mutations) != 1 || done.Mutations[0] != "refund:txn_q9" {
		t.Errorf("mutations = %v", done.Mutations)
	}
	// The transcript's result carries the approval as the returned one does.
	results := f.recorder.Results()
	if rec := results[len(results)-1]; rec.ToolCallID != done.ToolCallID || rec.Metadata.Approver != done.Metadata.Approver ||
		rec.Metadata.ApprovalGateID != "GATE_FINANCE_APPROVAL" || rec.Metadata.ApprovedAt == "" || rec.Metadata.ApprovalEvidenceSnapshotHash != a.EvidenceSnapshotHash {
		t.Errorf("recorded result metadata = %+v", rec.Metadata)
	}
	call := f.payments.Calls()[0]
	if call.IdempotencyKey != a.IdempotencyKey || call.Envelope.Args["idempotency_key"] != a.IdempotencyKey || call.Delegation == nil || call.Delegation.TokenRef != "tok_user_7a" {
		t.Errorf("adapter call = %+v (key %s)", call, a.IdempotencyKey)
	}
	// The same approval presented again for the same action (a takeover
	// going on with the call) answers with the call's result; the side
	// effect never repeats. For another action it is refused.
	again, _ := f.run.Call(ctx, req)
	if again.Status != gateway.StatusCompleted || !again.Metadata.Duplicate || again.ToolCallID != done.ToolCallID {
		t.Errorf("the approval again for its action = %+v", again)
	}
	other := refundCall(4100)
	other.Approval = req.Approval
	if refused, _ := f.run.Call(ctx, other); refused.Status != gateway.StatusBlocked || refused.Error.Code != gateway.CodeApprovalDenied {
		t.Errorf("the approval for another action = %+v", refused)
	}
	if n := f.payments.CallCount("issue_refund"); n != 1 {
		t.Errorf("issue_refund ran %d times, want exactly once", n)
	}
}

// Each refusal happens before the adapter and carries the seed's code.
func TestRefusalsNeverCallTheAdapter(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		opt    fixtureOption
		req    gateway.CallRequest
		before int // calls made first to use up a budget
		status gateway.Status
		code   string
		in     string
	}{
		{"unsurfaced capability", nil, gateway.CallRequest{CapabilityID: "adp_crm.profile", Args: map[string]any{}}, 0, gateway.StatusRejected, gateway.CodeUnsupportedTool, "not in the compiled tool manifest"},
		{"read_only run", func(_ *fixture, rc *runcontext.RunContext, _ *runcontext.InvokeRequest, _ map[string]gateway.Capability) {
			rc.SafetyMode = runcontext.ReadOnly
		}, refundCall(1200), 0, gateway.StatusRejected, gateway.CodeUnsupportedTool, "adp_payments.issue_refund is not in the compiled tool manifest"},
		{"amount above constraint", nil, refundCall(60000), 0, gateway.StatusRejected, gateway.CodeInvalidInput, "/amount_inr: 60000 is above the maximum 50000"},
		{"schema violation", nil, gateway.CallRequest{CapabilityID: "adp_payments.issue_refund", Args: map[string]any{"order_id": "881", "amount_inr": 100, "currency": "USD"}}, 0, gateway.StatusRejected, gateway.CodeInvalidInput, "/currency"},
		{"missing delegation", func(f *fixture, rc *runcontext.RunContext, req *runcontext.InvokeRequest, caps map[string]gateway.Capability) {
			lowValue(f, rc, req, caps)
			rc.User.Delegation = nil
		}, refundCall(1200), 0, gateway.StatusBlocked, gateway.CodePermissionDenied, "needs a user delegation"},
		{"delegation lacks scope", func(f *fixture, rc *runcontext.RunContext, req *runcontext.InvokeRequest, caps map[string]gateway.Capability) {
			lowValue(f, rc, req, caps)
			rc.User.Delegation.Scopes = []string{"orders.read"}
		}, refundCall(1200), 0, gateway.StatusBlocked, gateway.CodePermissionDenied, "lacks scopes [payments.refund]"},
		{"tool-call budget exhausted", func(_ *fixture, rc *runcontext.RunContext, _ *runcontext.InvokeRequest, _ map[string]gateway.Capability) {
			rc.RunBudget.MaxToolCalls = 1
		}, lookupCall(), 1, gateway.StatusBlocked, gateway.CodeRuntimePolicyInvalid, "tool-call budget exhausted"},
		{"identity not verified blocks writes", func(_ *fixture, _ *runcontext.RunContext, req *runcontext.InvokeRequest, _ map[string]gateway.Capability) {
			req.Input.Context["identity_verified"] = false
		}, refundCall(1200), 0, gateway.StatusRejected, gateway.CodeUnsupportedTool, "not in the compiled tool manifest"},
		{"undeclared attachment", nil, gateway.CallRequest{CapabilityID: "adp_orders.lookup", Args: map[string]any{"order_id": "ord_881"}, Attachments: []string{"art_other"}}, 0, gateway.StatusRejected, gateway.CodePermissionDenied, "not one of this tenant's request attachments"},
		{"payload too large", func(_ *fixture, rc *runcontext.RunContext, _ *runcontext.InvokeRequest, _ map[string]gateway.Capability) {
			rc.RunBudget.MaxPayloadBytes = 10
		}, lookupCall(), 0, gateway.StatusRejected, gateway.CodeInvalidInput, "max_payload_bytes"},
		{"malformed request", nil, gateway.CallRequest{CapabilityID: "noadapter", Args: map[string]any{}}, 0, gateway.StatusRejected, gateway.CodeInvalidInput, "adapter_id.capability"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var opts []fixtureOption
			if tc.opt != nil {
				opts = append(opts, tc.opt)
			}
			f := newFixture(t, opts...)
			for i := 0; i < tc.before; i++ {
				f.run.Call(ctx, lookupCall())
			}
			before := f.orders.CallCount("lookup") + f.payments.CallCount("issue_refund")
			res, err := f.run.Call(ctx, tc.req)
			if err != nil {
				t.Fatal(err)
			}
			if res.Status != tc.status || res.Error == nil || res.Error.Code != tc.code || res.Error.Reason != gateway.ReasonFor(tc.code) || !strings.Contains(res.Error.Message, tc.in) {
				t.Errorf("result = %s %+v, want %s %s containing %q", res.Status, res.Error, tc.status, tc.code, tc.in)
			}
			if after := f.orders.CallCount("lookup") + f.payments.CallCount("issue_refund"); after != before {
				t.Error("a refused call reached an adapter")
			}
			if res.Metadata.ToolCode != tc.code || res.Metadata.Retryable == nil || *res.Metadata.Retryable {
				t.Errorf("deterministic metadata = %+v", res.Metadata)
			}
			last := f.recorder.Results()
			if len(last) == 0 || last[len(last)-1].ToolCallID != res.ToolCallID || last[len(last)-1].Status != tc.status {
				t.Error("the refusal is not in the transcript")
			}
		})
	}
	// The schema error speaks JSON pointers a model can act on.
	f := newFixture(t)
	res, _ := f.run.Call(ctx, gateway.CallRequest{CapabilityID: "adp_payments.issue_refund", Args: map[string]any{"order_id": "881", "amount_inr": "lots", "currency": "INR"}})
	errs, _ := res.Error.Details["errors"].([]any)
	if len(errs) != 2 {
		t.Errorf("details.errors = %v", res.Error.Details)
	}
}

// 100 concurrent identical write calls execute the adapter once; all get
// the result.
func TestConcurrentIdenticalWritesExecuteOnce(t *testing.T) {
	g := newFixture(t, lowValue, func(fx *fixture, _ *runcontext.RunContext, _ *runcontext.InvokeRequest, _ map[string]gateway.Capability) {
		fx.payments = gatewaytest.NewScriptedAdapter()
		fx.payments.On("issue_refund").ReturnOutput(map[string]any{"transaction_id": "txn_1"}, "refund:txn_1").Delay(20 * time.Millisecond)
	})
	var wg sync.WaitGroup
	results := make(chan *gateway.ToolResultEnvelope, 100)
	for i := 0; i < 100; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := g.run.Call(ctx, refundCall(1200))
			if err != nil {
				t.Error(err)
			}
			results <- res
		}()
	}
	wg.Wait()
	close(results)
	dups := 0
	for r := range results {
		if r.Status != gateway.StatusCompleted || r.Output["transaction_id"] != "txn_1" {
			t.Fatalf("a caller got %+v", r)
		}
		if r.Metadata.Duplicate {
			dups++
		}
	}
	if n := g.payments.CallCount("issue_refund"); n != 1 {
		t.Errorf("adapter executed %d times, want 1", n)
	}
	if dups != 99 {
		t.Errorf("%d results marked duplicate, want 99", dups)
	}
}

func TestRetriesAndTimeouts(t *testing.T) {
	t.Run("retryable twice then success", func(t *testing.T) {
		f := newFixture(t, lowValue, func(fx *fixture, _ *runcontext.RunContext, _ *runcontext.InvokeRequest, _ map[string]gateway.Capability) {
			fx.payments = gatewaytest.NewScriptedAdapter()
			fx.payments.On("issue_refund").FailRetryable("gateway busy").FailRetryable("gateway busy").ReturnOutput(map[string]any{"transaction_id": "t"}, "refund:t")
		})
		res, _ := f.run.Call(ctx, refundCall(1200))
		calls := f.payments.Calls()
		if res.Status != gateway.StatusCompleted || len(calls) != 3 || res.Metadata.Attempts != 3 || res.Metadata.Retries != 2 {
			t.Fatalf("res %s, %d calls, metadata %+v", res.Status, len(calls), res.Metadata)
		}
		for i, c := range calls {
			if c.IdempotencyKey != calls[0].IdempotencyKey || c.Attempt != i+1 {
				t.Errorf("attempt %d: key %s attempt %d", i, c.IdempotencyKey, c.Attempt)
			}
		}
	})
	t.Run("non-retryable once", func(t *testing.T) {
		f := newFixture(t, lowValue, func(fx *fixture, _ *runcontext.RunContext, _ *runcontext.InvokeRequest, _ map[string]gateway.Capability) {
			fx.payments = gatewaytest.NewScriptedAdapter()
			fx.payments.On("issue_refund").Fail("card network declined; raw backend said: 4111111111111111")
		})
		res, _ := f.run.Call(ctx, refundCall(1200))
		if res.Status != gateway.StatusFailed || f.payments.CallCount("issue_refund") != 1 || res.Error.Code != gateway.CodeExecutionFailed {
			t.Errorf("res %+v, calls %d", res, f.payments.CallCount("issue_refund"))
		}
		if strings.Contains(res.Error.Message, "4111111111111111") {
			t.Error("card number from the adapter's error reached the result")
		}
		// The same write again returns the recorded result; the adapter is not called.
		again, _ := f.run.Call(ctx, refundCall(1200))
		if !again.Metadata.Duplicate || f.payments.CallCount("issue_refund") != 1 {
			t.Errorf("retrying a failed write re-executed it")
		}
	})
	// The timeouts below run in a synctest bubble: time is virtual and
	// moves only when every goroutine of the test is blocked, so the
	// bounds are exact and hold on a loaded machine under -race.
	t.Run("adapter ignoring its context times out", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			release := make(chan struct{})
			defer close(release)
			const timeout, grace = 50 * time.Millisecond, 50 * time.Millisecond // grace: the gateway's default
			f := newFixture(t, func(fx *fixture, _ *runcontext.RunContext, _ *runcontext.InvokeRequest, caps map[string]gateway.Capability) {
				fx.orders = gatewaytest.NewScriptedAdapter()
				fx.orders.On("lookup").ReturnOutput(nil).IgnoreContext(release)
				c := caps["adp_orders.lookup"]
				c.Timeout, c.MaxAttempts = timeout, 1
				caps["adp_orders.lookup"] = c
				fx.opts.Now = time.Now
			})
			start := time.Now()
			res, _ := f.run.Call(ctx, lookupCall())
			elapsed := time.Since(start)
			if res.Status != gateway.StatusFailed || res.Error.Code != gateway.CodeTimeout || !res.Error.Retryable {
				t.Errorf("res = %+v", res)
			}
			if elapsed != timeout+grace {
				t.Errorf("returned after %v, want the timeout %v plus the grace %v", elapsed, timeout, grace)
			}
		})
	})
	t.Run("an abandoned attempt keeps its own call", func(t *testing.T) {
		// An adapter that ignores its context is still running when the
		// next attempt starts: what it reads of its call must not change
		// under it.
		synctest.Test(t, func(t *testing.T) {
			f := newFixture(t)
			release, seen := make(chan struct{}), make(chan int, 2)
			run := ordersRun(t, f, gateway.AdapterFunc(func(_ context.Context, c *gateway.Call) (*gateway.Outcome, error) {
				<-release
				seen <- c.Attempt
				return &gateway.Outcome{Output: map[string]any{}}, nil
			}), gateway.Capability{ArgsSchema: lookupSchema, Timeout: 20 * time.Millisecond, MaxAttempts: 2},
				&gateway.Options{Grace: 10 * time.Millisecond, Sleep: func(context.Context, time.Duration) error { return nil }})
			res, _ := run.Call(ctx, lookupCall())
			close(release)
			if res.Status != gateway.StatusFailed || res.Error.Code != gateway.CodeTimeout || res.Metadata.Attempts != 2 {
				t.Fatalf("res = %s %+v %+v", res.Status, res.Error, res.Metadata)
			}
			got := []int{<-seen, <-seen}
			slices.Sort(got)
			if got[0] != 1 || got[1] != 2 {
				t.Errorf("the abandoned attempts saw attempts %v, want 1 and 2", got)
			}
		})
	})
	t.Run("context-honouring adapter times out on the caller's goroutine", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			const timeout = 30 * time.Millisecond
			f := newFixture(t, func(fx *fixture, _ *runcontext.RunContext, _ *runcontext.InvokeRequest, caps map[string]gateway.Capability) {
				fx.orders = gatewaytest.NewScriptedAdapter()
				fx.orders.On("lookup").ReturnOutput(nil).Delay(5 * time.Second)
				c := caps["adp_orders.lookup"]
				c.Timeout, c.MaxAttempts, c.HonorsContext = timeout, 1, true
				caps["adp_orders.lookup"] = c
			})
			start := time.Now()
			res, _ := f.run.Call(ctx, lookupCall())
			if res.Status != gateway.StatusFailed || res.Error.Code != gateway.CodeTimeout {
				t.Errorf("res = %+v", res)
			}
			if elapsed := time.Since(start); elapsed != timeout {
				t.Errorf("returned after %v, want the timeout %v (no grace: the adapter honours its context)", elapsed, timeout)
			}
		})
	})
	t.Run("adapter panic", func(t *testing.T) {
		f := newFixture(t, func(fx *fixture, _ *runcontext.RunContext, _ *runcontext.InvokeRequest, _ map[string]gateway.Capability) {
			fx.orders = gatewaytest.NewScriptedAdapter()
			fx.orders.On("lookup").Panic()
		})
		res, _ := f.run.Call(ctx, lookupCall())
		if res.Status != gateway.StatusFailed || res.Error.Code != gateway.CodeExecutionFailed {
			t.Errorf("res = %+v", res)
		}
	})
	t.Run("write without mutations", func(t *testing.T) {
		f := newFixture(t, lowValue, func(fx *fixture, _ *runcontext.RunContext, _ *runcontext.InvokeRequest, _ map[string]gateway.Capability) {
			fx.payments = gatewaytest.NewScriptedAdapter()
			fx.payments.On("issue_refund").ReturnOutput(map[string]any{"ok": true})
		})
		res, _ := f.run.Call(ctx, refundCall(1200))
		if res.Status != gateway.StatusError || !strings.Contains(res.Error.Message, "mutations") {
			t.Errorf("res = %+v", res)
		}
	})
}

func TestTranscriptFailureNeverRunsTheCall(t *testing.T) {
	f := newFixture(t)
	f.recorder.Err = errors.New("disk full")
	res, err := f.run.Call(ctx, lookupCall())
	if !errors.Is(err, gateway.ErrTranscript) || res.Status != gateway.StatusFailed || f.orders.CallCount("lookup") != 0 {
		t.Errorf("res %+v err %v calls %d", res, err, f.orders.CallCount("lookup"))
	}
}

func TestNewErrors(t *testing.T) {
	for name, regs := range map[string][]gateway.Registration{
		"no adapter":   {{AdapterID: "a"}},
		"duplicate id": {{AdapterID: "a", Adapter: gatewaytest.NewScriptedAdapter()}, {AdapterID: "a", Adapter: gatewaytest.NewScriptedAdapter()}},
		"bad schema":   {{AdapterID: "a", Adapter: gatewaytest.NewScriptedAdapter(), Capabilities: map[string]gateway.Capability{"x": {ArgsSchema: []byte(`{"type": 7}`)}}}},
	} {
		if _, err := gateway.New(regs, nil); !errors.Is(err, gateway.ErrConfig) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// Calls bound to the run's policy evaluation share its decision id; with a
// rule that reads the call (tool.args), each call is evaluated on its own:
// a deny blocks the write before its adapter runs, bound to the rule's
// decision, and calls it allows are bound to their own evaluation.
func TestPerCallPolicy(t *testing.T) {
	t.Run("run-level policy", func(t *testing.T) {
		f := newFixture(t)
		a, err := f.run.Call(ctx, lookupCall())
		if err != nil {
			t.Fatal(err)
		}
		second := lookupCall()
		second.Step = gateway.StepID{Index: 2}
		b, err := f.run.Call(ctx, second)
		if err != nil {
			t.Fatal(err)
		}
		if a.PolicyDecisionID == nil || b.PolicyDecisionID == nil || *a.PolicyDecisionID != *b.PolicyDecisionID || a.ToolCallID == b.ToolCallID {
			t.Errorf("two lookups bound to %v and %v, want the run's one decision", a.PolicyDecisionID, b.PolicyDecisionID)
		}
		if a.PolicyDecisionID == b.PolicyDecisionID {
			t.Error("two results share one *string: a change to one would change the other")
		}
	})
	t.Run("per-call policy", func(t *testing.T) {
		f := newFixture(t, lowValue, func(fx *fixture, _ *runcontext.RunContext, _ *runcontext.InvokeRequest, _ map[string]gateway.Capability) {
			fx.editPack = func(p *pack.Pack) {
				no := false
				dsl := &p.PolicyLayer.PolicyBundles[0].PolicyDSL
				dsl.Rules = append(dsl.Rules, pack.Rule{RuleID: "R_TOOL_REFUND_CAP", If: json.RawMessage(`{">":[{"var":["tool.args.amount_inr",0]},1000]}`),
					Then: &pack.Effect{Allow: &no, Reason: "refunds above 1000 INR go through the refunds desk"}, Rationale: "Large refunds are settled by the refunds desk."})
			}
		})
		lookup, err := f.run.Call(ctx, lookupCall())
		if err != nil || lookup.Status != gateway.StatusOK {
			t.Fatal(lookup, err)
		}
		small := refundCall(800)
		small.Step = gateway.StepID{Index: 4}
		ok, err := f.run.Call(ctx, small)
		if err != nil || ok.Status != gateway.StatusCompleted {
			t.Fatal(ok, err)
		}
		big, err := f.run.Call(ctx, refundCall(1200))
		if err != nil {
			t.Fatal(err)
		}
		if big.Status != gateway.StatusBlocked || big.Error.Code != gateway.CodePermissionDenied || !strings.Contains(big.Error.Message, "R_TOOL_REFUND_CAP") {
			t.Fatalf("refund above the cap = %s %+v, want blocked by R_TOOL_REFUND_CAP", big.Status, big.Error)
		}
		if n := f.payments.CallCount("issue_refund"); n != 1 {
			t.Errorf("the payments adapter ran %d times, want once (the allowed refund)", n)
		}
		var denyID string
		for _, d := range f.run.Policy().Decisions {
			if d.RuleID == "R_TOOL_REFUND_CAP" && d.Outcome == policy.Deny {
				t.Error("the run-level evaluation, which has no call, denied on the rule that reads the call")
			}
		}
		res, err := f.prepared.Engine().Evaluate(policy.Input{RunID: f.rc.RunID, Data: policy.NewDocument(f.req.Input, f.rc).WithTool("adp_payments.issue_refund", refundCall(1200).Args, runcontext.Destructive)})
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range res.Decisions {
			if d.RuleID == "R_TOOL_REFUND_CAP" {
				denyID = d.PolicyDecisionID
			}
		}
		if big.PolicyDecisionID == nil || *big.PolicyDecisionID != denyID {
			t.Errorf("blocked refund bound to %v, want the deny decision %s", big.PolicyDecisionID, denyID)
		}
		ids := map[string]bool{}
		for _, r := range []*gateway.ToolResultEnvelope{lookup, ok, big} {
			if r.PolicyDecisionID == nil {
				t.Fatalf("%s has no policy decision", r.CapabilityID)
			}
			ids[*r.PolicyDecisionID] = true
		}
		if len(ids) != 3 {
			t.Errorf("three calls evaluated on their own share decision ids: %v", ids)
		}
	})
}
