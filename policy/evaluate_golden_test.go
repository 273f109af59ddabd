package policy_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"slices"
	"testing"

	"github.com/contextos/contextos/pack"
	"github.com/contextos/contextos/policy"
	"github.com/contextos/contextos/runcontext"
)

var update = flag.Bool("update", false, "rewrite testdata/evaluations.golden")

// widePack is the support pack with more kinds of rule: a second bundle
// with the same id at a higher priority (its rules come first in the
// manifest's one entry), rules over an array element, a defaulted
// variable, a variable the document may lack, a number the operand check
// covers, the tool call, and a gate over the call's arguments.
func widePack(t *testing.T) *pack.Pack {
	t.Helper()
	p, _, _ := load(t)
	allow, deny := true, false
	rules := []pack.Rule{
		{RuleID: "R_FIRST_ITEM", If: json.RawMessage(`{"==":[{"var":["request.context.items.0","none"]},"book"]}`),
			Then: &pack.Effect{Allow: &allow, Reason: "first item is a book", Raise: []string{"fraud_signal_high"}}},
		{RuleID: "R_DEFAULTED", If: json.RawMessage(`{">":[{"var":["user.tenure_days",0]},30]}`),
			Then: &pack.Effect{Allow: &allow, Requires: []string{"idv", "otp"}}, Else: &pack.Effect{Allow: &deny, Reason: "new user"}},
		{RuleID: "R_MAYBE_MISSING", If: json.RawMessage(`{"!":{"var":["request.context.coupon",null]}}`),
			Then: &pack.Effect{Allow: &allow}},
		// More variables than an evaluation reads without allocating.
		{RuleID: "R_MANY_VARS", If: json.RawMessage(`{"or":[{"==":[{"var":"user.role"},"auditor"]},{"==":[{"var":["request.context.a",0]},1]},{"==":[{"var":["request.context.b",0]},1]},{"==":[{"var":["request.context.c",0]},1]},{"==":[{"var":["request.context.d",0]},1]},{"==":[{"var":["request.context.e",0]},1]},{"==":[{"var":["request.context.f",0]},1]},{"==":[{"var":["request.context.g",0]},1]},{">":[{"var":"request.context.refund_amount"},9000]},{"==":[{"var":["request.context.items.1","none"]},"pen"]}]}`),
			Then: &pack.Effect{Allow: &deny, Reason: "many"}},
		{RuleID: "R_OVER_CALL", AppliesTo: map[string]any{"tool.capability_id": []any{"adp_payments.issue_refund"}},
			If:   json.RawMessage(`{">":[{"var":"tool.args.amount_inr"},1000]}`),
			Then: &pack.Effect{RequiresApprovalGate: "GATE_FINANCE_APPROVAL", ApprovalMode: runcontext.Destructive}},
	}
	b := p.PolicyLayer.PolicyBundles[0]
	b.Priority = b.Priority - 5
	b.PolicyDSL.Rules = rules
	p.PolicyLayer.PolicyBundles = append(p.PolicyLayer.PolicyBundles, b)
	p.PolicyLayer.ApprovalGates = append(p.PolicyLayer.ApprovalGates, pack.ApprovalGate{
		GateID: "GATE_ARGS", RequiredApproverRole: "finance_lead", TTLSeconds: 60,
		When: json.RawMessage(`{">=":[{"var":["tool.args.amount_inr",0]},500]}`),
	})
	return p
}

// ownBundle gives p's last bundle an id of its own.
func ownBundle(p *pack.Pack) *pack.Pack {
	last := &p.PolicyLayer.PolicyBundles[len(p.PolicyLayer.PolicyBundles)-1]
	last.BundleID = "POLICY_WIDE_V1"
	return p
}

// TestEvaluationsGolden holds Evaluate's whole output, ids and data
// digests included, over the support pack and a wider one and documents
// that take every branch, skip, fail an operand check or lack a
// variable. Run with -update to rewrite it after a deliberate change.
func TestEvaluationsGolden(t *testing.T) {
	t.Parallel()
	canonical, _, _ := load(t)
	packs := []struct {
		name string
		p    *pack.Pack
	}{{"support", canonical}, {"wide", widePack(t)}, {"wide, own bundle", ownBundle(widePack(t))}}
	type docCase struct {
		name    string
		edit    func(req *runcontext.InvokeRequest, rc *runcontext.RunContext)
		call    map[string]any
		signals []string
	}
	docs := []docCase{
		{name: "as given"},
		{name: "small refund", edit: func(req *runcontext.InvokeRequest, _ *runcontext.RunContext) {
			req.Input.Context["refund_amount"] = 100.0
		}},
		{name: "not verified, signals", edit: func(req *runcontext.InvokeRequest, _ *runcontext.RunContext) {
			req.Input.Context["identity_verified"] = false
			req.Input.Context["signals"] = []any{"refund_without_identity", 7, "fraud_signal_high"}
		}},
		{name: "amount not a number", edit: func(req *runcontext.InvokeRequest, _ *runcontext.RunContext) {
			req.Input.Context["refund_amount"] = "lots"
		}},
		{name: "no role", edit: func(_ *runcontext.InvokeRequest, rc *runcontext.RunContext) { rc.User.Role = "" }},
		{name: "items, tenure, coupon", edit: func(req *runcontext.InvokeRequest, rc *runcontext.RunContext) {
			req.Input.Context["items"] = []any{"book", "pen"}
			req.Input.Context["coupon"] = "SAVE5"
			days := 400
			rc.User.TenureDays = &days
		}},
		{name: "refund call", call: map[string]any{"order_id": "ord_881", "amount_inr": 4200}, signals: []string{"fraud_signal_high"}},
		{name: "small call", call: map[string]any{"order_id": "ord_881", "amount_inr": 600}},
		{name: "call without amount", call: map[string]any{"order_id": "ord_881"}},
	}
	var out bytes.Buffer
	for _, pc := range packs {
		e, err := policy.Prepare(pc.p, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, dc := range docs {
			_, req, rc := load(t)
			if dc.edit != nil {
				dc.edit(req, rc)
			}
			doc := policy.NewDocument(req.Input, rc)
			if dc.call != nil {
				doc = doc.WithTool("adp_payments.issue_refund", dc.call, runcontext.Destructive)
			}
			res, err := e.Evaluate(policy.Input{RunID: rc.RunID, Data: doc, Signals: slices.Clone(dc.signals)})
			fmt.Fprintf(&out, "== %s / %s\n", pc.name, dc.name)
			if err != nil {
				fmt.Fprintf(&out, "error: %v\n", err)
				continue
			}
			b, err := json.MarshalIndent(res, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			out.Write(b)
			out.WriteByte('\n')
		}
	}
	const golden = "testdata/evaluations.golden"
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(golden, out.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out.Bytes(), want) {
		t.Errorf("evaluations differ from %s (run with -update after a deliberate change):\n%s", golden, out.String())
	}
}

// An evaluation of the support pack allocates its result (the evaluation
// with its decisions, manifest, gates and allows in one block), one string
// of its digests and ids and one array of its lists, and nothing per
// variable it reads: at most 3 allocations (12 before the result was built
// once its size was known, 21 before variables were read once). Not parallel: AllocsPerRun counts every
// goroutine's allocations.
func TestEvaluateAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates for itself")
	}
	p, req, rc := load(t)
	e, err := policy.Prepare(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	in := policy.Input{RunID: rc.RunID, Data: policy.NewDocument(req.Input, rc)}
	if n := testing.AllocsPerRun(100, func() {
		if _, err := e.Evaluate(in); err != nil {
			t.Fatal(err)
		}
	}); n > 3 {
		t.Errorf("Evaluate allocates %v times, want at most 3", n)
	}
}
