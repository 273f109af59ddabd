package gateway_test

import (
	"testing"

	"github.com/contextos/contextos/gateway"
)

// A plan that fills in the idempotency_key argument itself (the tool's
// schema declares it, so a model sees it and may) does not choose the key
// the adapter gets: args.idempotency_key is the derived key, scoped to the
// tenant and run, as on the envelope. Otherwise two tenants' refunds that
// a model gave the same key would reach a tool that deduplicates on its
// idempotency_key argument as one refund.
func TestIdempotencyKeyArgumentFromThePlanIsReplaced(t *testing.T) {
	t.Parallel()
	store := gateway.NewMemoryIdempotency()
	keys := map[string]bool{}
	for _, tenant := range []string{"tenant_a", "tenant_b"} {
		f := newFixture(t, lowValue, sharedStore(store), asTenant(tenant, "run_1111111111111111"))
		req := refundCall(1200)
		req.Args["idempotency_key"] = "refund-ord_881"
		res, err := f.run.Call(ctx, req)
		if err != nil || res.Status != gateway.StatusCompleted {
			t.Fatalf("%s: %s %+v, %v", tenant, res.Status, res.Error, err)
		}
		call := f.payments.Calls()[0]
		key := res.Metadata.IdempotencyKey
		if got := call.Envelope.Args["idempotency_key"]; got != key || call.IdempotencyKey != key {
			t.Errorf("%s: the adapter got args.idempotency_key %v and key %q, want the derived key %q", tenant, got, call.IdempotencyKey, key)
		}
		if req.Args["idempotency_key"] != "refund-ord_881" {
			t.Errorf("%s: the plan's arguments were changed: %v", tenant, req.Args)
		}
		keys[key] = true
		// The same plan step again is the same action: deduplicated.
		again, err := f.run.Call(ctx, req)
		if err != nil || !again.Metadata.Duplicate || f.payments.CallCount("issue_refund") != 1 {
			t.Errorf("%s: retry: duplicate %v, adapter ran %d times, %v", tenant, again.Metadata.Duplicate, f.payments.CallCount("issue_refund"), err)
		}
	}
	if len(keys) != 2 {
		t.Errorf("two tenants share the key %v", keys)
	}
}
