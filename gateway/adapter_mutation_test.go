package gateway_test

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/gateway/gatewaytest"
	"github.com/contextos/contextos/runcontext"
)

// scribble overwrites, in place, every string, number and bool it can
// reach in v's maps and slices, and adds a member to every map.
func scribble(v any) {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			switch e.(type) {
			case map[string]any, []any:
				scribble(e)
			default:
				x[k] = "scribbled"
			}
		}
		x["scribbled"] = true
	case []any:
		for i, e := range x {
			switch e.(type) {
			case map[string]any, []any:
				scribble(e)
			default:
				x[i] = "scribbled"
			}
		}
	}
}

// mutating wraps an adapter: before delegating, it changes everything the
// call gives it (the envelope's args, deep; its metadata, lists, pointers
// and ids; the user's delegation), and after, it changes the call again.
func mutating(next gateway.Adapter) gateway.Adapter {
	mutate := func(call *gateway.Call) {
		e := call.Envelope
		scribble(e.Args)
		e.Args["order_id"] = "ord_scribbled"
		scribble(e.Metadata)
		if e.Metadata == nil {
			e.Metadata = map[string]any{}
		}
		e.Metadata["protocol"] = "scribbled"
		for i := range e.PrincipalChain {
			e.PrincipalChain[i].ID, e.PrincipalChain[i].TenantID = "scribbled", "scribbled"
		}
		for i := range e.EvidenceRefs {
			e.EvidenceRefs[i] = "scribbled"
		}
		for _, p := range []*string{e.PolicyDecisionID, e.IdempotencyKey, e.AuthRef} {
			if p != nil {
				*p = "scribbled"
			}
		}
		e.ToolCallID, e.RunID, e.TraceID, e.SessionID, e.CapabilityID = "scribbled", "scribbled", "scribbled", "scribbled", "scribbled.x"
		e.ApprovalModeEffective = runcontext.Destructive
		if d := call.Delegation; d != nil {
			for i := range d.Scopes {
				d.Scopes[i] = "scribbled"
			}
			d.TokenRef, d.Subject = "scribbled", "scribbled"
		}
		call.IdempotencyKey, call.Capability = "scribbled", "scribbled"
	}
	return gateway.AdapterFunc(func(ctx context.Context, call *gateway.Call) (*gateway.Outcome, error) {
		// The adapter answers for the call it was given, then scribbles
		// over it before and after the answer is built.
		c := *call
		env := *call.Envelope
		c.Envelope = &env
		mutate(call)
		out, err := next.Call(ctx, &c)
		mutate(call)
		return out, err
	})
}

// An adapter may change everything it is given: the transcript, its chain
// hash, the result and the run's context are what they are with an adapter
// that changes nothing.
func TestAdapterMutationChangesNothing(t *testing.T) {
	t.Parallel()
	calls := []gateway.CallRequest{
		lookupCall(),
		{CapabilityID: "adp_policy.eval", Step: gateway.StepID{Index: 2},
			Args: map[string]any{"order": map[string]any{"id": "ord_881", "lines": []any{map[string]any{"sku": "a", "qty": 1.0}, "x"}}, "reason": "damaged"}},
		refundCall(1200),
	}
	type outcome struct {
		Results    []*gateway.ToolResultEnvelope
		Entries    []gateway.TranscriptEntry
		Chain      string
		Delegation *runcontext.Delegation
		Principals []runcontext.Principal
	}
	play := func(t *testing.T, wrap func(gateway.Adapter) gateway.Adapter) outcome {
		f := newFixture(t, lowValue)
		rec := &gatewaytest.Recorder{}
		opts := f.opts
		opts.Transcript = canonChecked{t, rec}
		gw, err := gateway.New([]gateway.Registration{
			{AdapterID: "adp_orders", Adapter: wrap(f.orders), Capabilities: map[string]gateway.Capability{"lookup": {ArgsSchema: lookupSchema, Scopes: []string{"orders.read"}}}},
			{AdapterID: "adp_policy", Adapter: wrap(f.policyAd), Capabilities: map[string]gateway.Capability{"eval": {}}},
			{AdapterID: "adp_payments", Adapter: wrap(f.payments), Capabilities: map[string]gateway.Capability{"issue_refund": {ArgsSchema: refundSchema, Scopes: []string{"payments.refund"}, CostCents: 0.31}}},
		}, &opts)
		if err != nil {
			t.Fatal(err)
		}
		run := rebind(t, f, gw)
		var o outcome
		for _, c := range calls {
			res, err := run.Call(ctx, c)
			if err != nil {
				t.Fatal(err)
			}
			if !res.Status.Succeeded() {
				t.Fatalf("%s = %s %+v", c.CapabilityID, res.Status, res.Error)
			}
			o.Results = append(o.Results, res)
		}
		o.Entries, o.Chain = rec.Entries(), run.ChainState().Hash
		if got, err := gateway.VerifyTranscript(o.Entries); err != nil || got != o.Chain {
			t.Fatalf("VerifyTranscript = %s, %v; the run's chain is %s", got, err, o.Chain)
		}
		o.Delegation, o.Principals = f.rc.User.Delegation, f.rc.PrincipalChain()
		return o
	}
	want := play(t, func(a gateway.Adapter) gateway.Adapter { return a })
	got := play(t, mutating)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("an adapter that mutates its call changed the run (-plain +mutating):\n%s", diff)
	}
}
