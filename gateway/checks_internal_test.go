package gateway

import (
	"context"
	"encoding/json"
	"github.com/contextos/contextos/internal/fixture"
	"os"
	"regexp"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/contextos/contextos/compiler"
	"github.com/contextos/contextos/internal/canon"
	"github.com/contextos/contextos/pack"
	"github.com/contextos/contextos/policy"
	"github.com/contextos/contextos/runcontext"
)

// checkRun binds a run of the support pack fixture (testdata) to a
// gateway whose adapters answer ok, registering only the capabilities
// in caps (nil: all three). A 1200 refund leaves the finance gate
// inactive; the fixture's 4200 one activates it.
func checkRun(t *testing.T, refund float64, caps []string) *Run {
	t.Helper()
	read := func(n string) []byte { return fixture.Read(t, n) }
	p, err := pack.Decode(read("ctxpack.support-1.0.0.json"))
	if err != nil {
		t.Fatal(err)
	}
	req, err := runcontext.DecodeInvokeRequest(read("invoke.support-refund.json"))
	if err != nil {
		t.Fatal(err)
	}
	req.Input.Context["refund_amount"] = refund
	rc, err := runcontext.DecodeRunContext(read("run-context.support.json"))
	if err != nil {
		t.Fatal(err)
	}
	var ev compiler.StaticEvidence
	if err := json.Unmarshal(read("evidence.support.json"), &ev); err != nil {
		t.Fatal(err)
	}
	ok := AdapterFunc(func(context.Context, *Call) (*Outcome, error) { return &Outcome{Output: map[string]any{}}, nil })
	all := map[string]Capability{
		"adp_orders.lookup":         {ArgsSchema: json.RawMessage(`{"type":"object","required":["order_id"],"properties":{"order_id":{"type":"string"}}}`), Scopes: []string{"orders.read"}},
		"adp_policy.eval":           {},
		"adp_payments.issue_refund": {ArgsSchema: json.RawMessage(`{"type":"object","properties":{"idempotency_key":{"type":"string"}}}`), Scopes: []string{"payments.refund"}, CostCents: 0.31},
	}
	if caps == nil {
		caps = []string{"adp_orders.lookup", "adp_policy.eval", "adp_payments.issue_refund"}
	}
	var regs []Registration
	for _, id := range caps {
		adapter, name, _ := splitCapability(id)
		regs = append(regs, Registration{AdapterID: adapter, Adapter: ok, Capabilities: map[string]Capability{name: all[id]}})
	}
	g, err := New(regs, nil)
	if err != nil {
		t.Fatal(err)
	}
	prepared, err := compiler.Prepare([]compiler.Input{{Ref: pack.MustParseRef("ctxpack.support@1.0.0"), Pack: p}}, &compiler.Options{Ontologies: []string{"ont.support@1.0.0"}, Evidence: ev})
	if err != nil {
		t.Fatal(err)
	}
	cc, err := prepared.Compile(context.Background(), req, rc)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 5, 4, 9, 31, 0, 0, time.UTC)
	r, err := g.NewRun(RunConfig{Prepared: prepared, Compiled: cc, Request: req, RunContext: rc, Meter: runcontext.NewMeter(rc.RunBudget, now)},
		&RunOptions{Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// checkNamed returns the check of that name and the checks before it.
func checkNamed(t *testing.T, name string) (check, []check) {
	t.Helper()
	for i, c := range checks {
		if c.name == name {
			return c, checks[:i]
		}
	}
	t.Fatalf("no check %q", name)
	return check{}, nil
}

// Each check, on its own: a call the checks before it let through is
// ended by this one (with the status and code a user sees) or let through
// with what it settles for the checks after it.
func TestChecks(t *testing.T) {
	t.Parallel()
	lookup := CallRequest{CapabilityID: "adp_orders.lookup", Step: StepID{Index: 1}, Args: map[string]any{"order_id": "ord_881"}}
	refund := CallRequest{CapabilityID: "adp_payments.issue_refund", Step: StepID{Index: 3}, Args: map[string]any{"order_id": "ord_881", "amount_inr": 1200.0, "currency": "INR"}}
	with := func(req CallRequest, edit func(*CallRequest)) CallRequest {
		req.Args = map[string]any{}
		for k, v := range refund.Args {
			req.Args[k] = v
		}
		if req.CapabilityID == lookup.CapabilityID {
			req.Args = map[string]any{"order_id": "ord_881"}
		}
		edit(&req)
		return req
	}
	type want struct {
		Status Status
		Code   string
	}
	cases := []struct {
		name   string
		check  string
		refund float64  // the request's refund amount (1200 unless set)
		caps   []string // the registered capabilities (nil: all)
		req    CallRequest
		edit   func(r *Run, c *callRecord) // before the check runs
		want   want                        // zero: the call goes on
		after  func(t *testing.T, c *callRecord)
	}{
		{name: "surfaced capability goes on", check: "surfaced", req: lookup},
		{name: "unsurfaced capability", check: "surfaced", req: with(lookup, func(q *CallRequest) { q.CapabilityID = "adp_orders.delete" }), want: want{StatusRejected, CodeUnsupportedTool}},
		{name: "registered capability goes on", check: "registered", req: lookup},
		{name: "surfaced but not registered", check: "registered", caps: []string{"adp_orders.lookup"}, req: refund, want: want{StatusRejected, CodeUnsupportedTool}},
		{name: "read-only call gets no key", check: "idempotency_key", req: lookup, after: func(t *testing.T, c *callRecord) {
			if c.write || c.key != "" || c.env.IdempotencyKey != nil {
				t.Errorf("read-only call: write %v, key %q, envelope key %v", c.write, c.key, c.env.IdempotencyKey)
			}
		}},
		{name: "write gets its key, in args too", check: "idempotency_key", req: refund, after: func(t *testing.T, c *callRecord) {
			if !c.write || c.key == "" || c.env.IdempotencyKey == nil || *c.env.IdempotencyKey != c.key || c.env.Args[keyArg] != c.key {
				t.Errorf("write: write %v, key %q, envelope key %v, args %v", c.write, c.key, c.env.IdempotencyKey, c.env.Args)
			}
			// The cached encoding (the payload size, the transcript digest)
			// is the args' with the key injected.
			if want, err := canon.JSON(c.env.Args); err != nil || string(c.argsJSON()) != string(want) {
				t.Errorf("cached args %s, want %s (%v)", c.argsJSON(), want, err)
			}
		}},
		{name: "undeclared attachment", check: "attachments", req: with(lookup, func(q *CallRequest) { q.Attachments = []string{"art_nope"} }), want: want{StatusRejected, CodePermissionDenied}},
		{name: "no attachments goes on", check: "attachments", req: lookup},
		{name: "chain crosses tenants", check: "tenant", req: lookup, edit: func(_ *Run, c *callRecord) {
			c.env.PrincipalChain = []runcontext.Principal{{Kind: "user", ID: "u", TenantID: "tenant_other"}}
		}, want: want{StatusRejected, CodePermissionDenied}},
		{name: "one tenant goes on", check: "tenant", req: lookup},
		{name: "args fail the schema", check: "args", req: with(lookup, func(q *CallRequest) { q.Args["order_id"] = 881.0 }), want: want{StatusRejected, CodeInvalidInput}},
		{name: "args pass", check: "args", req: lookup},
		{name: "args over max_payload_bytes", check: "payload", req: lookup, edit: func(r *Run, _ *callRecord) { r.rc.RunBudget.MaxPayloadBytes = 8 }, want: want{StatusRejected, CodeInvalidInput}},
		{name: "args within max_payload_bytes", check: "payload", req: lookup, edit: func(r *Run, _ *callRecord) { r.rc.RunBudget.MaxPayloadBytes = 1 << 10 }},
		{name: "must_refuse blocks a read", check: "policy", req: lookup, edit: func(r *Run, _ *callRecord) {
			r.usesTool, r.base = false, &policy.Evaluation{Verdict: policy.VerdictRefuse}
		}, want: want{StatusBlocked, CodePermissionDenied}},
		{name: "must_escalate blocks a write", check: "policy", req: refund, edit: func(r *Run, _ *callRecord) {
			r.usesTool, r.base = false, &policy.Evaluation{Verdict: policy.VerdictEscalate}
		}, want: want{StatusBlocked, CodePermissionDenied}},
		{name: "policy binds a decision", check: "policy", req: lookup, after: func(t *testing.T, c *callRecord) {
			if c.env.PolicyDecisionID == nil || *c.env.PolicyDecisionID == "" {
				t.Error("the call is bound to no policy decision")
			}
		}},
		{name: "mode above the safety mode", check: "safety_mode", req: refund, edit: func(r *Run, _ *callRecord) { r.rc.SafetyMode = runcontext.ReadOnly }, want: want{StatusBlocked, CodePermissionDenied}},
		{name: "mode within the safety mode", check: "safety_mode", req: refund},
		{name: "no delegation", check: "delegation", req: refund, edit: func(r *Run, _ *callRecord) { r.rc.User.Delegation = nil }, want: want{StatusBlocked, CodePermissionDenied}},
		{name: "no token_ref", check: "delegation", req: refund, edit: func(r *Run, _ *callRecord) { r.rc.User.Delegation.TokenRef = " " }, want: want{StatusBlocked, CodePermissionDenied}},
		{name: "missing scope", check: "delegation", req: refund, edit: func(r *Run, _ *callRecord) { r.rc.User.Delegation.Scopes = []string{"orders.read"} }, want: want{StatusBlocked, CodePermissionDenied}},
		{name: "delegation settled", check: "delegation", req: refund, after: func(t *testing.T, c *callRecord) {
			if c.delegation == nil {
				t.Error("a delegated call settled no delegation")
			}
		}},
		{name: "tool calls spent", check: "budget", req: lookup, edit: func(r *Run, _ *callRecord) {
			r.meter = runcontext.NewMeter(runcontext.RunBudget{MaxToolCalls: 1, MaxCostCents: 100}, time.Time{})
			if err := r.meter.ChargeToolCall(); err != nil {
				t.Fatal(err)
			}
		}, want: want{StatusBlocked, CodeRuntimePolicyInvalid}},
		{name: "cost spent", check: "budget", req: refund, edit: func(r *Run, _ *callRecord) {
			r.meter = runcontext.NewMeter(runcontext.RunBudget{MaxToolCalls: 5, MaxCostCents: 0.1}, time.Time{})
		}, want: want{StatusBlocked, CodeRuntimePolicyInvalid}},
		{name: "budget left", check: "budget", req: refund},
		{name: "active gate pauses", check: "approval", refund: 4200, req: refund, want: want{StatusPaused, CodeApprovalPending}},
		{name: "approval for another gate", check: "approval", refund: 4200, req: with(refund, func(q *CallRequest) {
			q.Approval = &Approval{ApprovalID: "apr_1", GateID: "other", Approver: "boss", ApproverRole: "finance_lead", DecidedAt: time.Date(2026, 5, 4, 9, 30, 0, 0, time.UTC)}
		}), want: want{StatusBlocked, CodeApprovalDenied}},
		{name: "inactive gate goes on", check: "approval", req: refund},
	}
	for _, tc := range cases {
		t.Run(tc.check+"/"+tc.name, func(t *testing.T) {
			t.Parallel()
			amount := tc.refund
			if amount == 0 {
				amount = 1200
			}
			r := checkRun(t, amount, tc.caps)
			c, res := r.envelope(tc.req)
			if res != nil {
				t.Fatalf("envelope refused the call: %+v", res.env.Error)
			}
			this, before := checkNamed(t, tc.check)
			for _, b := range before {
				if res, err := b.run(r, context.Background(), c); res != nil || err != nil {
					t.Fatalf("check %s, before %s, ended the call: %v %v", b.name, tc.check, res.env.Error, err)
				}
			}
			if tc.edit != nil {
				tc.edit(r, c)
			}
			res, err := this.run(r, context.Background(), c)
			if err != nil {
				t.Fatal(err)
			}
			var got want
			if res != nil {
				got.Status = res.env.Status
				if res.env.Error != nil {
					got.Code = res.env.Error.Code
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("check %s (-want +got):\n%s", tc.check, diff)
			}
			if tc.after != nil {
				tc.after(t, c)
			}
		})
	}
}

// The table names every check once, and the package doc lists them in
// its order.
func TestChecksTable(t *testing.T) {
	t.Parallel()
	var names []string
	seen := map[string]bool{}
	for _, c := range checks {
		if seen[c.name] || c.run == nil {
			t.Errorf("check %q is listed twice or has no function", c.name)
		}
		seen[c.name] = true
		names = append(names, c.name)
	}
	doc, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	var documented []string
	for _, m := range regexp.MustCompile(`(?m)^//  ?\d+\. ([a-z_]+) —`).FindAllSubmatch(doc, -1) {
		documented = append(documented, string(m[1]))
	}
	if diff := cmp.Diff(documented, names); diff != "" {
		t.Errorf("check order (-package doc +table):\n%s", diff)
	}
}

// StepID keys derived ids by Turn*1000+Index, as the flat step number of
// runs recorded before it did; out-of-range steps are refused.
func TestStepID(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		step StepID
		key  int
		ok   bool
	}{
		{StepID{}, 0, true},
		{StepID{Turn: 0, Index: 3}, 3, true},
		{StepID{Turn: 2, Index: 5}, 2005, true},
		{StepID{Turn: 1, Index: 999}, 1999, true},
		{StepID{Turn: 1, Index: 1000}, 0, false},
		{StepID{Turn: 0, Index: -1}, 0, false},
		{StepID{Turn: -1, Index: 0}, 0, false},
	} {
		key, ok := c.step.key()
		if key != c.key || ok != c.ok {
			t.Errorf("%+v.key() = %d, %v; want %d, %v", c.step, key, ok, c.key, c.ok)
		}
	}
	r := checkRun(t, 1200, nil)
	c, res := r.envelope(CallRequest{CapabilityID: "adp_orders.lookup", Step: StepID{Turn: 1, Index: 1000}, Args: map[string]any{"order_id": "ord_881"}})
	if res == nil || res.env.Status != StatusRejected || res.env.Error.Code != CodeInvalidInput || res.env.Error.Details["field"] != "step" {
		t.Fatalf("step 1000 = %+v", res)
	}
	// Its id is not the id of the step its flat number would collide with.
	other, _ := r.envelope(CallRequest{CapabilityID: "adp_orders.lookup", Step: StepID{Turn: 2, Index: 0}, Args: map[string]any{"order_id": "ord_881"}})
	if c.env.ToolCallID == other.env.ToolCallID {
		t.Errorf("step {1 1000} has the id of step {2 0}: %s", c.env.ToolCallID)
	}
}
