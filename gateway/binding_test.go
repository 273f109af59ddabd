package gateway_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/contextos/contextos/compiler"
	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/gateway/gatewaytest"
	fixtures "github.com/contextos/contextos/internal/fixture"
	"github.com/contextos/contextos/pack"
	"github.com/contextos/contextos/runcontext"
)

// prepareAs prepares p as the fixture prepared its pack.
func prepareAs(t *testing.T, p *pack.Pack) *compiler.Prepared {
	t.Helper()
	var ev compiler.StaticEvidence
	if err := json.Unmarshal(fixtures.Read(t, "evidence.support.json"), &ev); err != nil {
		t.Fatal(err)
	}
	prepared, err := compiler.Prepare([]compiler.Input{{Ref: pack.MustParseRef("ctxpack.support@1.0.0"), Pack: p}}, &compiler.Options{Ontologies: []string{"ont.support@1.0.0"}, Evidence: ev})
	if err != nil {
		t.Fatal(err)
	}
	return prepared
}

// twoPacks is the set-up of the two-pack binding tests: the fixture (pack
// a prepared), pack b (a refund capped at 1000, gated by GATE_B; neither
// gate active), one gateway whose payments adapter edits the call
// metadata it is handed, its recorder and scripted adapter, and the call
// metadata each pack's refunds must carry.
func twoPacks(t *testing.T) (f *fixture, pa, pb *compiler.Prepared, gw *gateway.Gateway, rec *gatewaytest.Recorder, payments *gatewaytest.ScriptedAdapter, wantMeta []map[string]any) {
	t.Helper()
	f = newFixture(t, lowValue)
	p, err := f.prepared.Pack().Clone()
	if err != nil {
		t.Fatal(err)
	}
	for i := range p.ToolingLayer.Permissions {
		if q := &p.ToolingLayer.Permissions[i]; q.Capability == "issue_refund" {
			q.ArgConstraints["amount_inr"] = map[string]any{"min": 1, "max": 1000}
			q.RequiresApprovalGate = "GATE_B"
		}
	}
	p.PolicyLayer.ApprovalGates = append(p.PolicyLayer.ApprovalGates, pack.ApprovalGate{GateID: "GATE_B", When: json.RawMessage(`{">":[{"var":"request.context.refund_amount"},100000]}`), RequiredApproverRole: "finance_lead", TTLSeconds: 60})
	payments = gatewaytest.NewScriptedAdapter()
	payments.On("issue_refund").ReturnOutput(map[string]any{"transaction_id": "txn_q9"}, "refund:txn_q9")
	rec = &gatewaytest.Recorder{}
	gw, err = gateway.New([]gateway.Registration{{AdapterID: "adp_payments", Capabilities: map[string]gateway.Capability{"issue_refund": {ArgsSchema: refundSchema, Scopes: []string{"payments.refund"}, Timeout: time.Minute, CostCents: 0.31}},
		Adapter: gateway.AdapterFunc(func(ctx context.Context, call *gateway.Call) (*gateway.Outcome, error) {
			// The adapter edits the call metadata it is handed.
			clear(call.Envelope.Metadata)
			call.Envelope.Metadata["requires_approval_gate"] = "GATE_EDITED"
			return payments.Call(ctx, call)
		})}}, &gateway.Options{Transcript: rec})
	if err != nil {
		t.Fatal(err)
	}
	wantMeta = []map[string]any{
		{"requires_approval_gate": "GATE_FINANCE_APPROVAL", "protocol": "in-process", "version": "contextos.tool_call.v1", "arg_schema_ref": digestOf(t, string(refundSchema))},
		{"requires_approval_gate": "GATE_B", "protocol": "in-process", "version": "contextos.tool_call.v1", "arg_schema_ref": digestOf(t, string(refundSchema))},
	}
	return f, f.prepared, prepareAs(t, p), gw, rec, payments, wantMeta
}

// One gateway binds the runs of two packs each to its own pack, whichever
// pack it bound a run of before (it builds what a run takes from a pack
// once per pack, and keeps it): the argument constraints a run enforces
// and the approval gate its calls' metadata names are its pack's. And
// what one run's adapter does to the call metadata it is handed changes
// no later run's.
func TestRunsOfTwoPacksThroughOneGateway(t *testing.T) {
	t.Parallel()
	f, pa, pb, gw, rec, payments, wantMeta := twoPacks(t)
	packs := []*compiler.Prepared{pa, pb}
	for i := range 6 {
		k := i % 2 // a, b, a, b, …
		rc := f.rc.Clone()
		rc.RunID = "run_binding_" + string(rune('a'+i))
		cc, err := packs[k].Compile(ctx, f.req, rc)
		if err != nil {
			t.Fatal(err)
		}
		run, err := gw.NewRun(gateway.RunConfig{Prepared: packs[k], Compiled: cc, Request: f.req, RunContext: rc, Meter: runcontext.NewMeter(rc.RunBudget, f.now)}, nil)
		if err != nil {
			t.Fatal(err)
		}
		// A refund of 500 runs under either pack, one of 2000 only under
		// pack a's constraints.
		small := refundCall(500)
		small.Step.Index = 2
		if res, err := run.Call(ctx, small); err != nil || res.Status != gateway.StatusCompleted {
			t.Fatalf("run %d (pack %c): a refund of 500: %v %+v, want completed", i, 'a'+k, err, res)
		}
		res, err := run.Call(ctx, refundCall(2000))
		if err != nil {
			t.Fatal(err)
		}
		switch k {
		case 0:
			if res.Status != gateway.StatusCompleted {
				t.Fatalf("run %d (pack a): %s %+v, want completed", i, res.Status, res.Error)
			}
		case 1:
			if res.Status != gateway.StatusRejected || res.Error == nil || !strings.Contains(res.Error.Message, "above the maximum 1000") {
				t.Fatalf("run %d (pack b): %s %+v, want rejected above the maximum 1000", i, res.Status, res.Error)
			}
		}
		n := 0
		for _, c := range rec.Calls() {
			if c.RunID != rc.RunID {
				continue
			}
			n++
			if diff := cmp.Diff(wantMeta[k], c.Metadata); diff != "" {
				t.Errorf("run %d (pack %c): call metadata (-want +got):\n%s", i, 'a'+k, diff)
			}
		}
		if n == 0 {
			t.Fatalf("run %d recorded no call", i)
		}
	}
	if n := payments.CallCount("issue_refund"); n != 9 {
		t.Errorf("the adapter ran %d refunds, want 9 (6 of 500, 3 of 2000 under pack a)", n)
	}
}
