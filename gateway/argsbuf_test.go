package gateway_test

import (
	"fmt"
	"sync"
	"testing"

	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/runcontext"
)

// Calls made at once on one run each encode, hash and key their own
// arguments: a call's encoding is made in a pooled buffer it gives back
// only when it returns, so no call's id, entry or key is another's. The
// transcript checks every entry's hash against the general encoder's, and
// the ids are those the same calls get one at a time.
func TestConcurrentCallsEncodeTheirOwnArgs(t *testing.T) {
	t.Parallel()
	unlimited := func(_ *fixture, rc *runcontext.RunContext, _ *runcontext.InvokeRequest, _ map[string]gateway.Capability) {
		rc.RunBudget.MaxToolCalls = 1 << 20
		rc.RunBudget.MaxCostCents = 1e9
	}
	f := newFixture(t, lowValue, unlimited)
	const workers, calls = 8, 25
	// A long argument too, so some encodings outgrow the pooled buffer.
	req := func(w, i int) gateway.CallRequest {
		r := lookupCall()
		r.Step = gateway.StepID{Turn: w, Index: i}
		r.Args = map[string]any{"order_id": fmt.Sprintf("ord_%d_%d", w, i)}
		if i%5 == 0 {
			r.Args["order_id"] = fmt.Sprintf("ord_%d_%d_%0300d", w, i, i)
		}
		return r
	}
	at := gateway.NewMemoryTranscript()
	run := ordersRun(t, f, noop, gateway.Capability{ArgsSchema: lookupSchema, HonorsContext: true}, &gateway.Options{Transcript: canonChecked{t, at}})
	got := make([][]string, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range calls {
				res, err := run.Call(ctx, req(w, i))
				if err != nil || res.Status != gateway.StatusOK {
					t.Errorf("call %d.%d: %v %v", w, i, res, err)
					return
				}
				got[w] = append(got[w], res.ToolCallID)
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	if _, err := gateway.VerifyTranscript(at.Entries(f.rc.RunID)); err != nil {
		t.Fatal(err)
	}
	one := ordersRun(t, f, noop, gateway.Capability{ArgsSchema: lookupSchema, HonorsContext: true}, &gateway.Options{Transcript: canonChecked{t, gateway.NewMemoryTranscript()}})
	for w := range workers {
		for i := range calls {
			res, err := one.Call(ctx, req(w, i))
			if err != nil || res.ToolCallID != got[w][i] {
				t.Fatalf("call %d.%d: id %s at once, %s alone (%v)", w, i, got[w][i], res.ToolCallID, err)
			}
		}
	}
}

// A call made while another is between its checks (here from the
// VerifyWrite hook, after the write's id, key and size are worked out
// and before it is recorded) encodes its arguments in its own buffer: the
// write's transcript entry hashes the write's arguments.
func TestNestedCallEncodesItsOwnArgs(t *testing.T) {
	t.Parallel()
	f := newFixture(t, lowValue)
	gw, err := gateway.New([]gateway.Registration{
		{AdapterID: "adp_orders", Adapter: noop, Capabilities: map[string]gateway.Capability{"lookup": {ArgsSchema: lookupSchema, HonorsContext: true}}},
		{AdapterID: "adp_payments", Adapter: noop, Capabilities: map[string]gateway.Capability{"issue_refund": {ArgsSchema: refundSchema, Scopes: []string{"payments.refund"}, HonorsContext: true}}},
	}, &gateway.Options{Transcript: canonChecked{t, gateway.NewMemoryTranscript()}})
	if err != nil {
		t.Fatal(err)
	}
	var run *gateway.Run
	nested := 0
	run, err = gw.NewRun(gateway.RunConfig{Prepared: f.prepared, Compiled: f.cc, Request: f.req, RunContext: f.rc, Meter: runcontext.NewMeter(f.rc.RunBudget, f.now)},
		&gateway.RunOptions{VerifyWrite: func(*gateway.WriteCall) *gateway.ToolError {
			req := lookupCall()
			req.Args = map[string]any{"order_id": "ord_nested_call_with_other_arguments"}
			if res, err := run.Call(ctx, req); err != nil || res.Status != gateway.StatusOK {
				t.Errorf("nested call: %v %v", res, err)
			}
			nested++
			return nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	if res, err := run.Call(ctx, refundCall(1200)); err != nil || res.Status != gateway.StatusCompleted || nested != 1 {
		t.Fatalf("write: %v %v (nested calls %d)", res, err, nested)
	}
}
