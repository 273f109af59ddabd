package gateway_test

import (
	"context"
	"testing"

	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/runcontext"
)

// editingSink stores each entry after editing it in place, as a sink that
// redacts or annotates what it stores might: the call entry's args and
// the strings behind its pointers.
type editingSink struct{ next gateway.TranscriptSink }

func (s editingSink) Append(ctx context.Context, e gateway.TranscriptEntry) error {
	if err := s.next.Append(ctx, e); err != nil {
		return err
	}
	if c := e.Call; c != nil {
		if _, ok := c.Args["amount_inr"]; ok {
			c.Args["amount_inr"] = 9e9
		}
		c.Args["edited_by_sink"] = true
		for i := range c.PrincipalChain {
			c.PrincipalChain[i].ID = "edited"
		}
		for _, p := range []*string{c.IdempotencyKey, c.PolicyDecisionID, c.AuthRef} {
			if p != nil {
				*p = "edited"
			}
		}
	}
	return nil
}

// TestSinkEditingTheCallEntryChangesNotTheCall: the call a transcript
// sink is given to store has been validated and bound to policy; what the
// sink does to it afterwards must not reach the adapter, which runs with
// the arguments that were checked (a refund of 1200, not 9e9), nor the
// result.
func TestSinkEditingTheCallEntryChangesNotTheCall(t *testing.T) {
	t.Parallel()
	for _, honors := range []bool{false, true} {
		f := newFixture(t, lowValue, func(f *fixture, _ *runcontext.RunContext, _ *runcontext.InvokeRequest, caps map[string]gateway.Capability) {
			f.opts.Transcript = editingSink{f.opts.Transcript}
			c := caps["adp_payments.issue_refund"]
			c.HonorsContext = honors
			caps["adp_payments.issue_refund"] = c
		})
		res, err := f.run.Call(ctx, refundCall(1200))
		if err != nil {
			t.Fatal(err)
		}
		if !res.Status.Succeeded() {
			t.Fatalf("honors_context %v: %s %+v", honors, res.Status, res.Error)
		}
		calls := f.payments.Calls()
		if len(calls) != 1 {
			t.Fatalf("honors_context %v: %d calls", honors, len(calls))
		}
		env := calls[0].Envelope
		if env.Args["amount_inr"] != 1200.0 || env.Args["edited_by_sink"] != nil {
			t.Errorf("honors_context %v: the adapter ran with args %v, edited by the transcript sink after they were checked", honors, env.Args)
		}
		if env.IdempotencyKey == nil || *env.IdempotencyKey != calls[0].IdempotencyKey {
			t.Errorf("honors_context %v: the adapter's envelope carries idempotency key %v, its call %q", honors, env.IdempotencyKey, calls[0].IdempotencyKey)
		}
		if env.PolicyDecisionID != nil && *env.PolicyDecisionID == "edited" {
			t.Errorf("honors_context %v: the adapter's envelope carries the policy decision id the sink wrote", honors)
		}
		if res.PolicyDecisionID != nil && *res.PolicyDecisionID == "edited" {
			t.Errorf("honors_context %v: the result carries the policy decision id the sink wrote", honors)
		}
		// The run's principal chain and auth ref, which every call's
		// envelope carries, are not the sink's to edit either.
		if _, err := f.run.Call(ctx, lookupCall()); err != nil {
			t.Fatal(err)
		}
		next := f.orders.Calls()
		if len(next) != 1 {
			t.Fatalf("honors_context %v: %d lookups", honors, len(next))
		}
		for _, p := range next[0].Envelope.PrincipalChain {
			if p.ID == "edited" {
				t.Errorf("honors_context %v: the next call carries the principal chain the sink edited: %v", honors, next[0].Envelope.PrincipalChain)
			}
		}
		if a := next[0].Envelope.AuthRef; a != nil && *a == "edited" {
			t.Errorf("honors_context %v: the next call carries the auth ref the sink edited", honors)
		}
	}
}

// resultEditingSink edits the result entry it stores in place.
type resultEditingSink struct{ next gateway.TranscriptSink }

func (s resultEditingSink) Append(ctx context.Context, e gateway.TranscriptEntry) error {
	if err := s.next.Append(ctx, e); err != nil {
		return err
	}
	if r := e.Result; r != nil {
		for k := range r.Output {
			r.Output[k] = "edited"
		}
		for i := range r.Citations {
			r.Citations[i].EvidenceRef = "edited"
		}
		for i := range r.Mutations {
			r.Mutations[i] = "edited"
		}
		if r.PolicyDecisionID != nil {
			*r.PolicyDecisionID = "edited"
		}
	}
	return nil
}

// TestSinkEditingTheResultEntryChangesNotTheResult: the result a call
// returns to the run (its output, citations, mutations, policy decision
// id) is not what a transcript sink makes of the entry it stores.
func TestSinkEditingTheResultEntryChangesNotTheResult(t *testing.T) {
	t.Parallel()
	f := newFixture(t, lowValue, func(f *fixture, _ *runcontext.RunContext, _ *runcontext.InvokeRequest, _ map[string]gateway.Capability) {
		f.opts.Transcript = resultEditingSink{f.opts.Transcript}
	})
	res, err := f.run.Call(ctx, refundCall(1200))
	if err != nil {
		t.Fatal(err)
	}
	if !res.Status.Succeeded() {
		t.Fatalf("%s %+v", res.Status, res.Error)
	}
	if res.Output["transaction_id"] != "txn_q9" {
		t.Errorf("the result's output is the sink's edit: %v", res.Output)
	}
	for _, c := range res.Citations {
		if c.EvidenceRef == "edited" {
			t.Errorf("the result's citations are the sink's edit: %v", res.Citations)
		}
	}
	for _, m := range res.Mutations {
		if m == "edited" {
			t.Errorf("the result's mutations are the sink's edit: %v", res.Mutations)
		}
	}
	if res.PolicyDecisionID != nil && *res.PolicyDecisionID == "edited" {
		t.Errorf("the result's policy decision id is the sink's edit")
	}
}
