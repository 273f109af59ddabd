package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/contextos/contextos/compiler"
	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/gateway/gatewaytest"
	"github.com/contextos/contextos/pack"
	"github.com/contextos/contextos/runcontext"
)

// More packs than one gateway keeps bindings for (it forgets them all
// past its bound and builds them again), their runs bound in a shuffled
// order, three times over: every call through the shared gateway is
// decided as its pack says (its own maximum, its own deny, its own gate
// in the call's metadata) and yields the very envelope the same call
// yields through a gateway that never saw another pack.
func TestManyPacksThroughOneGatewayDecideAsEachAlone(t *testing.T) {
	t.Parallel()
	const packs = 300 // above the gateway's bound of 256 bindings
	f := newFixture(t, lowValue)
	type packCase struct {
		prepared *compiler.Prepared
		max      int
		deny     bool
		gate     string
	}
	cases := make([]packCase, packs)
	for i := range cases {
		p, err := f.prepared.Pack().Clone()
		if err != nil {
			t.Fatal(err)
		}
		c := packCase{max: 1000 + 37*i, deny: i%5 == 3, gate: fmt.Sprintf("GATE_P%03d", i)}
		for j := range p.ToolingLayer.Permissions {
			if q := &p.ToolingLayer.Permissions[j]; q.Capability == "issue_refund" {
				q.ArgConstraints["amount_inr"] = map[string]any{"min": 1, "max": c.max}
				q.RequiresApprovalGate = c.gate
				q.Allow = !c.deny
			}
		}
		p.PolicyLayer.ApprovalGates = append(p.PolicyLayer.ApprovalGates, pack.ApprovalGate{GateID: c.gate, When: json.RawMessage(`{">":[{"var":"request.context.refund_amount"},100000]}`), RequiredApproverRole: "finance_lead", TTLSeconds: 60})
		c.prepared = prepareAs(t, p)
		cases[i] = c
	}
	newGateway := func(rec *gatewaytest.Recorder) *gateway.Gateway {
		payments := gatewaytest.NewScriptedAdapter()
		payments.On("issue_refund").ReturnOutput(map[string]any{"transaction_id": "txn_q9"}, "refund:txn_q9")
		gw, err := gateway.New([]gateway.Registration{{AdapterID: "adp_payments", Adapter: payments,
			Capabilities: map[string]gateway.Capability{"issue_refund": {ArgsSchema: refundSchema, Scopes: []string{"payments.refund"}, Timeout: time.Minute, CostCents: 0.31}}}},
			&gateway.Options{Transcript: rec, Now: func() time.Time { return f.now }})
		if err != nil {
			t.Fatal(err)
		}
		return gw
	}
	call := func(gw *gateway.Gateway, c packCase, cc *compiler.CompiledContext, rc *runcontext.RunContext, amount float64) *gateway.ToolResultEnvelope {
		t.Helper()
		run, err := gw.NewRun(gateway.RunConfig{Prepared: c.prepared, Compiled: cc, Request: f.req, RunContext: rc, Meter: runcontext.NewMeter(rc.RunBudget, f.now)}, nil)
		if err != nil {
			t.Fatal(err)
		}
		res, err := run.Call(context.Background(), refundCall(amount))
		if err != nil {
			t.Fatalf("run %s: %v", rc.RunID, err)
		}
		return res
	}
	rec := &gatewaytest.Recorder{}
	shared := newGateway(rec)
	rng := rand.New(rand.NewPCG(37, 256))
	n := 0
	for round := range 3 {
		for _, i := range rng.Perm(packs) {
			c := cases[i]
			n++
			rc := f.rc.Clone()
			rc.RunID = fmt.Sprintf("run_many_%d_%03d", round, i)
			cc, err := c.prepared.Compile(context.Background(), f.req, rc)
			if err != nil {
				t.Fatal(err)
			}
			// Half the calls at the pack's own maximum, half just above it.
			amount := float64(c.max + rng.IntN(2))
			got := call(shared, c, cc, rc, amount)
			want := call(newGateway(&gatewaytest.Recorder{}), c, cc, rc, amount)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Fatalf("pack %d, run %s: the shared gateway's envelope differs from a gateway of its own (-alone +shared):\n%s", i, rc.RunID, diff)
			}
			switch {
			case c.deny:
				if got.Status.Succeeded() {
					t.Fatalf("pack %d denies issue_refund; its call %s", i, got.Status)
				}
			case amount > float64(c.max):
				if got.Status != gateway.StatusRejected || got.Error == nil || !strings.Contains(got.Error.Message, fmt.Sprintf("above the maximum %d", c.max)) {
					t.Fatalf("pack %d: a refund of %v above its maximum %d: %s %+v", i, amount, c.max, got.Status, got.Error)
				}
			default:
				if got.Status != gateway.StatusCompleted {
					t.Fatalf("pack %d: a refund of %v within its maximum %d: %s %+v", i, amount, c.max, got.Status, got.Error)
				}
			}
		}
	}
	// Each call that reached the adapter carried its own pack's gate.
	calls := 0
	for _, e := range rec.Calls() {
		var round, i int
		if _, err := fmt.Sscanf(e.RunID, "run_many_%d_%03d", &round, &i); err != nil {
			t.Fatalf("call of run %q", e.RunID)
		}
		calls++
		if g := e.Metadata["requires_approval_gate"]; g != cases[i].gate {
			t.Fatalf("run %s: call metadata names gate %v, its pack's is %s", e.RunID, g, cases[i].gate)
		}
	}
	if calls == 0 || calls > n {
		t.Fatalf("%d calls recorded of %d made", calls, n)
	}
}
