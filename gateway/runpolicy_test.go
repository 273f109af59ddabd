package gateway_test

import (
	"reflect"
	"testing"
	"time"

	"github.com/contextos/contextos/compiler"
	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/gateway/gatewaytest"
	"github.com/contextos/contextos/internal/compilehook"
	"github.com/contextos/contextos/internal/deepcheck"
	"github.com/contextos/contextos/internal/gatewayhook"
	"github.com/contextos/contextos/policy"
	"github.com/contextos/contextos/runcontext"
)

// TestRunGivenTheCompilesPolicyIsARunThatEvaluatesIt: a run given the
// compile's policy evaluation (gatewayhook.WithPolicy, from
// compilehook.CompileWithPolicy) is the run NewRun builds when it evaluates
// the policy itself: the same evaluation, equal to a fresh one, and the
// same calls make the same transcript, entry for entry (call and result
// envelopes, their policy decision ids, statuses and hashes).
func TestRunGivenTheCompilesPolicyIsARunThatEvaluatesIt(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		amount float64
		edit   fixtureOption
	}{
		{"low value", 1200, lowValue},
		{"high value, the finance gate active", 4200, nil},
		{"identity not verified", 1200, func(_ *fixture, _ *runcontext.RunContext, req *runcontext.InvokeRequest, _ map[string]gateway.Capability) {
			req.Input.Context["refund_amount"] = 1200
			req.Input.Context["identity_verified"] = false
		}},
		{"read only", 1200, func(_ *fixture, rc *runcontext.RunContext, req *runcontext.InvokeRequest, _ map[string]gateway.Capability) {
			req.Input.Context["refund_amount"] = 1200
			rc.SafetyMode = runcontext.ReadOnly
		}},
		// Each call evaluated again, over the run's document.
		{"a rule over the call's arguments, under it", 800, func(f *fixture, rc *runcontext.RunContext, req *runcontext.InvokeRequest, caps map[string]gateway.Capability) {
			lowValue(f, rc, req, caps)
			editPack(ruleOverArgs)(f, rc, req, caps)
		}},
		{"a rule over the call's arguments, over it", 4200, func(f *fixture, rc *runcontext.RunContext, req *runcontext.InvokeRequest, caps map[string]gateway.Capability) {
			lowValue(f, rc, req, caps)
			editPack(ruleOverArgs)(f, rc, req, caps)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var opts []fixtureOption
			if tc.edit != nil {
				opts = append(opts, tc.edit)
			}
			f := newFixture(t, opts...)
			if tc.amount == 800 && !f.prepared.Engine().UsesTool() {
				t.Fatal("the policy does not read the tool call")
			}
			c, given, err := compilehook.CompileWithPolicy(f.prepared, ctx, f.req, f.rc)
			if err != nil {
				t.Fatal(err)
			}
			cc := c.(*compiler.CompiledContext)
			if cc.Hash() != f.cc.Hash() || cc.ContextLedger.LedgerHash != f.cc.ContextLedger.LedgerHash {
				t.Fatalf("CompileWithPolicy compiled %s (ledger %s), Compile %s (ledger %s)", cc.Hash(), cc.ContextLedger.LedgerHash, f.cc.Hash(), f.cc.ContextLedger.LedgerHash)
			}
			fresh, err := f.prepared.Engine().Evaluate(policy.Input{RunID: f.rc.RunID, Data: policy.NewDocument(f.req.Input, f.rc)})
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(given, fresh) {
				t.Fatalf("the compile's evaluation\n%+v\nis not a fresh one\n%+v", given, fresh)
			}
			transcript := func(p *policy.Evaluation) ([]gateway.TranscriptEntry, *policy.Evaluation) {
				rec := &gatewaytest.Recorder{}
				o := f.opts
				o.Transcript = rec
				gw, err := gateway.New([]gateway.Registration{
					{AdapterID: "adp_orders", Adapter: f.orders, Capabilities: map[string]gateway.Capability{"lookup": {ArgsSchema: lookupSchema, Scopes: []string{"orders.read"}, Timeout: time.Minute}}},
					{AdapterID: "adp_policy", Adapter: f.policyAd, Capabilities: map[string]gateway.Capability{"eval": {Timeout: time.Minute}}},
					{AdapterID: "adp_payments", Adapter: f.payments, Capabilities: map[string]gateway.Capability{"issue_refund": {ArgsSchema: refundSchema, Scopes: []string{"payments.refund"}, Timeout: time.Minute, CostCents: 0.31}}},
				}, &o)
				if err != nil {
					t.Fatal(err)
				}
				cfg := gateway.RunConfig{Prepared: f.prepared, Compiled: cc, Request: f.req, RunContext: f.rc, Meter: runcontext.NewMeter(f.rc.RunBudget, f.now)}
				if p != nil {
					gatewayhook.WithPolicy(&cfg, p)
				}
				run, err := gw.NewRun(cfg, nil)
				if err != nil {
					t.Fatal(err)
				}
				for _, c := range []gateway.CallRequest{lookupCall(), {CapabilityID: "adp_policy.eval", Step: gateway.StepID{Index: 2}, Args: map[string]any{"order_id": "ord_881"}}, refundCall(tc.amount)} {
					if _, err := run.Call(ctx, c); err != nil {
						t.Fatal(err)
					}
				}
				return rec.Entries(), run.Policy()
			}
			evaluated, evaluatedPolicy := transcript(nil)
			handed, handedPolicy := transcript(given)
			if handedPolicy == given {
				t.Error("Run.Policy returned the run's own evaluation, not a copy")
			}
			if !reflect.DeepEqual(evaluatedPolicy, handedPolicy) {
				t.Errorf("run policy: evaluated\n%+v\ngiven\n%+v", evaluatedPolicy, handedPolicy)
			}
			if len(evaluated) < 5 || !reflect.DeepEqual(evaluated, handed) { // three results, two or three calls
				t.Errorf("transcript of the run that evaluates (%d entries)\n%+v\nof the run given the compile's evaluation (%d)\n%+v", len(evaluated), evaluated, len(handed), handed)
			}
		})
	}
}

// TestRunEnforcesTheEvaluationItIsGiven: a run handed an evaluation
// enforces that evaluation, not one of its own: the 1200 refund that the
// low-value evaluation lets through is blocked when the evaluation handed
// over has a must_refuse guardrail raised.
func TestRunEnforcesTheEvaluationItIsGiven(t *testing.T) {
	t.Parallel()
	for _, refused := range []bool{false, true} {
		f := newFixture(t, lowValue)
		c, given, err := compilehook.CompileWithPolicy(f.prepared, ctx, f.req, f.rc)
		if err != nil {
			t.Fatal(err)
		}
		if given.Verdict != policy.VerdictAllow {
			t.Fatalf("the low-value evaluation's verdict is %s, want allow", given.Verdict)
		}
		if refused {
			given.Verdict, given.Raised.MustRefuse = policy.VerdictRefuse, []string{"handed_over"}
		}
		cfg := gateway.RunConfig{Prepared: f.prepared, Compiled: c.(*compiler.CompiledContext), Request: f.req, RunContext: f.rc, Meter: runcontext.NewMeter(f.rc.RunBudget, f.now)}
		gatewayhook.WithPolicy(&cfg, given)
		run, err := f.gw.NewRun(cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		res, err := run.Call(ctx, refundCall(1200))
		if err != nil {
			t.Fatal(err)
		}
		if got := res.Status == gateway.StatusBlocked; got != refused {
			t.Errorf("must_refuse raised in the evaluation handed over: %v; the refund is %s", refused, res.Status)
		}
	}
}

// TestRunPolicyIsTheCallersOwn: editing what Run.Policy returns changes
// neither what it returns next nor what the run enforces: the finance
// gate still holds a 4200 refund.
func TestRunPolicyIsTheCallersOwn(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	p := f.run.Policy()
	if len(p.ActiveGates()) == 0 || len(p.Decisions) == 0 {
		t.Fatalf("the high-value evaluation has no active gate or no decision: %+v", p)
	}
	want := mustJSON(t, p)
	deepcheck.Vandalize(reflect.ValueOf(p))
	for i := range p.Gates {
		p.Gates[i].Active = false
	}
	if got := mustJSON(t, f.run.Policy()); got != want {
		t.Errorf("editing what Run.Policy returned changed what it returns next:\n%s\n%s", want, got)
	}
	if _, err := f.run.Call(ctx, lookupCall()); err != nil {
		t.Fatal(err)
	}
	res, err := f.run.Call(ctx, refundCall(4200))
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != gateway.StatusPaused {
		t.Errorf("after the returned policy's gates were switched off, the 4200 refund is %s, want paused", res.Status)
	}
}
