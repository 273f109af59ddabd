package policy_test

import (
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/contextos/contextos/internal/fixture"
	"github.com/contextos/contextos/pack"
	"github.com/contextos/contextos/policy"
	"github.com/contextos/contextos/runcontext"
)

func load(t testing.TB) (*pack.Pack, *runcontext.InvokeRequest, *runcontext.RunContext) {
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
	rc, err := runcontext.DecodeRunContext(read("run-context.support.json"))
	if err != nil {
		t.Fatal(err)
	}
	return p, req, rc
}

func evaluate(t *testing.T, edit func(req *runcontext.InvokeRequest, rc *runcontext.RunContext)) (*policy.Evaluation, error) {
	t.Helper()
	p, req, rc := load(t)
	if edit != nil {
		edit(req, rc)
	}
	e, err := policy.Prepare(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	return e.Evaluate(policy.Input{RunID: rc.RunID, Data: policy.NewDocument(req.Input, rc)})
}

func TestCanonicalScenario(t *testing.T) {
	res, err := evaluate(t, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Verdict != policy.VerdictAllow {
		t.Errorf("Verdict = %s", res.Verdict)
	}
	wantManifest := []policy.ManifestEntry{{BundleID: "POLICY_RETURNS_V4", RuleIDs: []string{"R_REFUND_REQUIRES_IDV", "R_HIGH_VALUE_REQUIRES_APPROVAL"}}}
	if diff := cmp.Diff(wantManifest, res.Manifest); diff != "" {
		t.Errorf("manifest (-want +got):\n%s", diff)
	}
	if got := res.ActiveGates(); !slices.Equal(got, []string{"GATE_FINANCE_APPROVAL"}) {
		t.Errorf("active gates = %v", got)
	}
	g := res.Gates[0]
	if g.ApproverRole != "finance_lead" || g.TTLSeconds != 7200 || !slices.Equal(g.ActivatedBy, []string{"when", "R_HIGH_VALUE_REQUIRES_APPROVAL"}) {
		t.Errorf("gate = %+v", g)
	}
	hv := res.Decisions[1]
	if hv.Outcome != policy.Allow || hv.ApprovalMode != runcontext.Destructive || hv.RequiresApprovalGate != "GATE_FINANCE_APPROVAL" || hv.Branch != "then" || hv.Rationale == "" || hv.DecisionBinding != "support.refund.execute" {
		t.Errorf("high-value decision = %+v", hv)
	}
	for _, d := range res.Decisions {
		if len(d.PolicyDecisionID) != len("pol_")+16 || d.PolicyDecisionID[:4] != "pol_" {
			t.Errorf("policy decision id %q", d.PolicyDecisionID)
		}
	}
}

func TestIdentityNotVerifiedDenies(t *testing.T) {
	res, err := evaluate(t, func(req *runcontext.InvokeRequest, _ *runcontext.RunContext) {
		req.Input.Context["identity_verified"] = false
	})
	if err != nil {
		t.Fatal(err)
	}
	d := res.Decisions[0]
	if d.RuleID != "R_REFUND_REQUIRES_IDV" || d.Outcome != policy.Deny || d.Reason != "Identity not verified; refund path blocked." || d.Branch != "else" {
		t.Errorf("decision = %+v", d)
	}
	denies := 0
	for _, d := range res.Decisions {
		if d.Outcome == policy.Deny {
			denies++
		}
	}
	if res.Verdict != policy.VerdictDeny || denies != 1 {
		t.Errorf("deny must beat allow: verdict %s", res.Verdict)
	}
}

func TestApprovalGateThreshold(t *testing.T) {
	low, err := evaluate(t, func(req *runcontext.InvokeRequest, _ *runcontext.RunContext) {
		req.Input.Context["refund_amount"] = 1200
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(low.ActiveGates()) != 0 || low.Decisions[1].Outcome != policy.NotApplicable {
		t.Errorf("refund 1200: gates %v, decision %+v", low.ActiveGates(), low.Decisions[1])
	}
	// A different role does not trip the rule, but the gate's own condition still does.
	other, err := evaluate(t, func(_ *runcontext.InvokeRequest, rc *runcontext.RunContext) { rc.User.Role = "supervisor" })
	if err != nil {
		t.Fatal(err)
	}
	if other.Decisions[1].Outcome != policy.NotApplicable || !slices.Equal(other.Gates[0].ActivatedBy, []string{"when"}) {
		t.Errorf("supervisor: %+v %+v", other.Decisions[1], other.Gates[0])
	}
}

func TestGuardrails(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		signals []any
		extra   []string
		verdict policy.Verdict
		identOK bool
	}{
		{"escalate beats allow", []any{"fraud_signal_high"}, nil, policy.VerdictEscalate, true},
		{"escalate beats deny", []any{"fraud_signal_high"}, nil, policy.VerdictEscalate, false},
		{"refuse beats everything", []any{"fraud_signal_high"}, []string{"refund_without_identity"}, policy.VerdictRefuse, true},
		{"unknown labels are ignored", []any{"sunny"}, []string{"x"}, policy.VerdictAllow, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p, req, rc := load(t)
			req.Input.Context["signals"] = tc.signals
			req.Input.Context["identity_verified"] = tc.identOK
			e, _ := policy.Prepare(p, nil)
			res, err := e.Evaluate(policy.Input{RunID: rc.RunID, Data: policy.NewDocument(req.Input, rc), Signals: tc.extra})
			if err != nil {
				t.Fatal(err)
			}
			if res.Verdict != tc.verdict {
				t.Errorf("Verdict = %s, want %s (raised %+v)", res.Verdict, tc.verdict, res.Raised)
			}
		})
	}
	// A rule outcome can raise a label.
	p, req, rc := load(t)
	p.PolicyLayer.PolicyBundles[0].PolicyDSL.Rules[0].Else.Raise = []string{"refund_without_identity"}
	req.Input.Context["identity_verified"] = false
	e, _ := policy.Prepare(p, nil)
	res, _ := e.Evaluate(policy.Input{RunID: rc.RunID, Data: policy.NewDocument(req.Input, rc)})
	if res.Verdict != policy.VerdictRefuse || !slices.Equal(res.Raised.MustRefuse, []string{"refund_without_identity"}) {
		t.Errorf("rule-raised label: %+v", res)
	}
}

func TestFailsClosed(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		edit func(req *runcontext.InvokeRequest, rc *runcontext.RunContext)
		kind string
		rule string
		path string
	}{
		{"missing variable", func(req *runcontext.InvokeRequest, _ *runcontext.RunContext) {
			delete(req.Input.Context, "identity_verified")
		},
			policy.KindMissingVariable, "R_REFUND_REQUIRES_IDV", "request.context.identity_verified"},
		{"missing role", func(_ *runcontext.InvokeRequest, rc *runcontext.RunContext) { rc.User.Role = "" },
			policy.KindMissingVariable, "R_HIGH_VALUE_REQUIRES_APPROVAL", "user.role"},
		{"type error", func(req *runcontext.InvokeRequest, _ *runcontext.RunContext) {
			req.Input.Context["refund_amount"] = "4200 INR"
		},
			policy.KindTypeError, "R_HIGH_VALUE_REQUIRES_APPROVAL", "request.context.refund_amount"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := evaluate(t, tc.edit)
			var ee *policy.Error
			if !errors.As(err, &ee) || !errors.Is(err, policy.ErrEvaluation) {
				t.Fatalf("Evaluate = %v, want *Error", err)
			}
			if ee.Kind != tc.kind || ee.RuleID != tc.rule || ee.BundleID != "POLICY_RETURNS_V4" || ee.Path != tc.path {
				t.Errorf("Error = %+v", ee)
			}
		})
	}
	// The gate's own expression fails closed too, naming the gate.
	p, req, rc := load(t)
	p.PolicyLayer.PolicyBundles[0].PolicyDSL.Rules = nil
	delete(req.Input.Context, "refund_amount")
	e, _ := policy.Prepare(p, nil)
	_, err := e.Evaluate(policy.Input{RunID: rc.RunID, Data: policy.NewDocument(req.Input, rc)})
	var ee *policy.Error
	if !errors.As(err, &ee) || ee.GateID != "GATE_FINANCE_APPROVAL" {
		t.Errorf("gate evaluation: %v", err)
	}
	// An unsupported operator or language never prepares.
	p, _, _ = load(t)
	p.PolicyLayer.PolicyBundles[0].PolicyDSL.Rules[1].If = []byte(`{"set":["a",1]}`)
	var pe *policy.Error
	if _, err := policy.Prepare(p, nil); !errors.As(err, &pe) || !errors.Is(err, policy.ErrPrepare) || pe.RuleID != "R_HIGH_VALUE_REQUIRES_APPROVAL" {
		t.Errorf("Prepare(unsupported) = %v", err)
	}
	p, _, _ = load(t)
	p.PolicyLayer.PolicyBundles[0].PolicyDSL.Language = "rego"
	if _, err := policy.Prepare(p, nil); !errors.Is(err, policy.ErrPrepare) {
		t.Errorf("Prepare(rego) = %v", err)
	}
}

// Policy decision ids depend on run, bundle, rule and the data read, and
// nothing else.
func TestDecisionIDsDeterministic(t *testing.T) {
	p, req, rc := load(t)
	e, _ := policy.Prepare(p, nil)
	eval := func(runID string, edit func()) []string {
		if edit != nil {
			edit()
		}
		res, err := e.Evaluate(policy.Input{RunID: runID, Data: policy.NewDocument(req.Input, rc)})
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, d := range res.Decisions {
			ids = append(ids, d.PolicyDecisionID)
		}
		return ids
	}
	a := eval(rc.RunID, nil)
	b := eval(rc.RunID, nil)
	other := eval("run_other", nil)
	msg := eval(rc.RunID, func() { req.Input.Message = "something else entirely" }) // not read by any rule
	amount := eval(rc.RunID, func() { req.Input.Context["refund_amount"] = 5000 })  // read by rule 1 only
	if !slices.Equal(a, b) || !slices.Equal(a, msg) {
		t.Errorf("ids not reproducible: %v %v %v", a, b, msg)
	}
	if other[0] == a[0] || other[1] == a[1] {
		t.Error("run id does not seed the ids")
	}
	if amount[0] != a[0] || amount[1] == a[1] {
		t.Errorf("data digest not per rule: %v vs %v", amount, a)
	}
}

func TestConcurrentSafe(t *testing.T) {
	p, req, rc := load(t)
	e, _ := policy.Prepare(p, nil)
	doc := policy.NewDocument(req.Input, rc)
	want, _ := e.Evaluate(policy.Input{RunID: rc.RunID, Data: doc})
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 50; j++ {
				got, err := e.Evaluate(policy.Input{RunID: rc.RunID, Data: doc})
				if err != nil || !cmp.Equal(got, want) {
					t.Errorf("concurrent evaluation differs: %v", err)
					return
				}
			}
		}()
	}
	wg.Wait()
}

// TestOptionsBudget: the evaluation budget is the host's to set.
func TestOptionsBudget(t *testing.T) {
	p, req, rc := load(t)
	for ri := range p.PolicyLayer.PolicyBundles[0].PolicyDSL.Rules {
		r := &p.PolicyLayer.PolicyBundles[0].PolicyDSL.Rules[ri]
		if r.RuleID == "R_HIGH_VALUE_REQUIRES_APPROVAL" {
			r.If = []byte(`{"some":[{"var":"request.context.items"},{"<":[{"var":""},0]}]}`)
		}
	}
	items := make([]any, 50_000)
	for i := range items {
		items[i] = float64(i)
	}
	req.Input.Context["items"] = items
	in := policy.Input{RunID: rc.RunID, Data: policy.NewDocument(req.Input, rc)}
	e, err := policy.Prepare(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	var ee *policy.Error
	if _, err := e.Evaluate(in); !errors.As(err, &ee) || ee.Kind != policy.KindBudget || ee.RuleID != "R_HIGH_VALUE_REQUIRES_APPROVAL" || !errors.Is(err, policy.ErrBudget) {
		t.Fatalf("default budget: %v", err)
	}
	e, err = policy.Prepare(p, &policy.Options{MaxOperations: 1_000_000})
	if err != nil {
		t.Fatal(err)
	}
	if res, err := e.Evaluate(in); err != nil || res.Decisions[1].Outcome != policy.NotApplicable {
		t.Fatalf("raised budget: %+v, %v", res, err)
	}
}
