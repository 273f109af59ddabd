package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/contextos/contextos/compiler"
	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/gateway/gatewaytest"
	"github.com/contextos/contextos/pack"
	"github.com/contextos/contextos/runcontext"
)

// Runs of two packs bound through one gateway at once (the bindings and
// call metadata it builds once and shares) each enforce their own pack's
// constraints and carry their own pack's call metadata, whatever the
// other runs' adapters do to the metadata they are handed. Run it with
// -race.
func TestRunsOfTwoPacksThroughOneGatewayConcurrently(t *testing.T) {
	f := newFixture(t, lowValue)
	pb, err := f.prepared.Pack().Clone()
	if err != nil {
		t.Fatal(err)
	}
	for i := range pb.ToolingLayer.Permissions {
		if q := &pb.ToolingLayer.Permissions[i]; q.Capability == "issue_refund" {
			q.ArgConstraints["amount_inr"] = map[string]any{"min": 1, "max": 1000}
			q.RequiresApprovalGate = "GATE_B"
		}
	}
	pb.PolicyLayer.ApprovalGates = append(pb.PolicyLayer.ApprovalGates, pack.ApprovalGate{GateID: "GATE_B", When: json.RawMessage(`{">":[{"var":"request.context.refund_amount"},100000]}`), RequiredApproverRole: "finance_lead", TTLSeconds: 60})
	// Both packs, and copies of each that share its memos (At, WithForm).
	pa, pbp := f.prepared, prepareAs(t, pb)
	packs := []*compiler.Prepared{pa, pbp, pa.At(f.now), pbp.WithForm(compiler.Form2)}
	payments := gatewaytest.NewScriptedAdapter()
	payments.On("issue_refund").ReturnOutput(map[string]any{"transaction_id": "txn_q9"}, "refund:txn_q9")
	rec := &gatewaytest.Recorder{}
	gw, err := gateway.New([]gateway.Registration{{AdapterID: "adp_payments", Capabilities: map[string]gateway.Capability{"issue_refund": {ArgsSchema: refundSchema, Scopes: []string{"payments.refund"}, Timeout: time.Minute, CostCents: 0.31}},
		Adapter: gateway.AdapterFunc(func(ctx context.Context, call *gateway.Call) (*gateway.Outcome, error) {
			clear(call.Envelope.Metadata)
			call.Envelope.Metadata["requires_approval_gate"] = "GATE_EDITED"
			return payments.Call(ctx, call)
		})}}, &gateway.Options{Transcript: rec})
	if err != nil {
		t.Fatal(err)
	}
	wantMeta := []map[string]any{
		{"requires_approval_gate": "GATE_FINANCE_APPROVAL", "protocol": "in-process", "version": "contextos.tool_call.v1", "arg_schema_ref": digestOf(t, string(refundSchema))},
		{"requires_approval_gate": "GATE_B", "protocol": "in-process", "version": "contextos.tool_call.v1", "arg_schema_ref": digestOf(t, string(refundSchema))},
	}
	const runs = 16
	var wg sync.WaitGroup
	errs := make(chan error, runs)
	for i := range runs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			k := i % len(packs)
			which := k % 2 // 0: pack a, 1: pack b
			rc := f.rc.Clone()
			rc.RunID = fmt.Sprintf("run_binding_conc_%02d", i)
			cc, err := packs[k].Compile(ctx, f.req, rc)
			if err != nil {
				errs <- err
				return
			}
			run, err := gw.NewRun(gateway.RunConfig{Prepared: packs[k], Compiled: cc, Request: f.req, RunContext: rc, Meter: runcontext.NewMeter(rc.RunBudget, f.now)}, nil)
			if err != nil {
				errs <- err
				return
			}
			small := refundCall(500)
			small.Step.Index = 2
			if res, err := run.Call(ctx, small); err != nil || res.Status != gateway.StatusCompleted {
				errs <- fmt.Errorf("run %d: a refund of 500: %v %+v, want completed", i, err, res)
				return
			}
			res, err := run.Call(ctx, refundCall(2000))
			if err != nil {
				errs <- err
				return
			}
			switch which {
			case 0:
				if res.Status != gateway.StatusCompleted {
					errs <- fmt.Errorf("run %d (pack a): %s %+v, want completed", i, res.Status, res.Error)
				}
			case 1:
				if res.Status != gateway.StatusRejected || res.Error == nil || !strings.Contains(res.Error.Message, "above the maximum 1000") {
					errs <- fmt.Errorf("run %d (pack b): %s %+v, want rejected above the maximum 1000", i, res.Status, res.Error)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	n := 0
	for _, c := range rec.Calls() {
		var i int
		if _, err := fmt.Sscanf(c.RunID, "run_binding_conc_%02d", &i); err != nil {
			continue
		}
		n++
		if diff := cmp.Diff(wantMeta[(i%len(packs))%2], c.Metadata); diff != "" {
			t.Errorf("run %s: call metadata (-want +got):\n%s", c.RunID, diff)
		}
	}
	if n == 0 {
		t.Fatal("no call recorded")
	}
}
