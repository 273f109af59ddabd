package gateway_test

import (
	"testing"

	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/pack"
	"github.com/contextos/contextos/runcontext"
)

// asTenant makes the run's request, run context and principals a tenant's
// (the pack shared with it), and the run's id runID.
func asTenant(tenant, runID string) fixtureOption {
	return func(f *fixture, rc *runcontext.RunContext, req *runcontext.InvokeRequest, _ map[string]gateway.Capability) {
		f.editPack = func(p *pack.Pack) { p.PackMeta.Tenant.Shared = true }
		rc.TenantID, req.TenantID, rc.RunID = tenant, tenant, runID
		for i := range rc.Agent.PrincipalChain {
			rc.Agent.PrincipalChain[i].TenantID = tenant
		}
	}
}

// sharedStore makes the fixture's gateway use store for idempotency.
func sharedStore(store gateway.IdempotencyStore) fixtureOption {
	return func(f *fixture, _ *runcontext.RunContext, _ *runcontext.InvokeRequest, _ map[string]gateway.Capability) {
		f.opts.Idempotency = store
	}
}

// The key a write executes once under is scoped to the tenant and the run:
// two tenants (run ids can be host-chosen, so they can share one) and two
// runs of one tenant that pick the same key, or make the same call, each
// execute their write; a retry within the run is still a duplicate.
func TestIdempotencyKeysAreScoped(t *testing.T) {
	t.Parallel()
	const run = "run_a1b2c3d4e5f60718"
	tests := []struct {
		name      string
		a, b      fixtureOption
		callerKey string
		shared    bool // b's call is a's again: a duplicate
	}{
		{"two tenants, one run id, one caller key", asTenant("tenant_a", run), asTenant("tenant_b", run), "refund-ord_881", false},
		{"two tenants, one run id, derived keys", asTenant("tenant_a", run), asTenant("tenant_b", run), "", false},
		{"two runs of a tenant, one caller key", asTenant("tenant_a", "run_1111111111111111"), asTenant("tenant_a", "run_2222222222222222"), "refund-ord_881", false},
		{"two runs of a tenant, derived keys", asTenant("tenant_a", "run_1111111111111111"), asTenant("tenant_a", "run_2222222222222222"), "", false},
		{"the same run again, one caller key", asTenant("tenant_a", run), asTenant("tenant_a", run), "refund-ord_881", true},
		{"the same run again, derived keys", asTenant("tenant_a", run), asTenant("tenant_a", run), "", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			store := gateway.NewMemoryIdempotency()
			fa := newFixture(t, lowValue, sharedStore(store), tc.a)
			fb := newFixture(t, lowValue, sharedStore(store), tc.b)
			req := refundCall(1200)
			req.IdempotencyKey = tc.callerKey
			ra, err := fa.run.Call(ctx, req)
			if err != nil || ra.Status != gateway.StatusCompleted {
				t.Fatalf("first run: %s %+v, %v", ra.Status, ra.Error, err)
			}
			rb, err := fb.run.Call(ctx, req)
			if err != nil || rb.Status != gateway.StatusCompleted {
				t.Fatalf("second run: %s %+v, %v", rb.Status, rb.Error, err)
			}
			want := 1
			if tc.shared {
				want = 0
			}
			if n := fb.payments.CallCount("issue_refund"); n != want || rb.Metadata.Duplicate != tc.shared {
				t.Errorf("second run's adapter ran %d times (duplicate %v), want %d", n, rb.Metadata.Duplicate, want)
			}
			if same := ra.Metadata.IdempotencyKey == rb.Metadata.IdempotencyKey; same != tc.shared {
				t.Errorf("keys %s and %s: same = %v, want %v", ra.Metadata.IdempotencyKey, rb.Metadata.IdempotencyKey, same, tc.shared)
			}
			// The key the adapter gets is the scoped one, on the call, the
			// envelope and in args.idempotency_key.
			call := fa.payments.Calls()[0]
			key := ra.Metadata.IdempotencyKey
			if key == "" || key == tc.callerKey || call.IdempotencyKey != key || *call.Envelope.IdempotencyKey != key || call.Envelope.Args["idempotency_key"] != key {
				t.Errorf("adapter call key %q, envelope %v, args %v, result %q (caller's %q)", call.IdempotencyKey, *call.Envelope.IdempotencyKey, call.Envelope.Args["idempotency_key"], key, tc.callerKey)
			}
		})
	}
}

// A retry of a write within the run (the same caller key, the same step)
// is deduplicated; the same caller key at another step too: the caller
// said it is the same effect.
func TestIdempotencyRetryWithinRun(t *testing.T) {
	f := newFixture(t, lowValue)
	req := refundCall(1200)
	req.IdempotencyKey = "refund-ord_881"
	first, err := f.run.Call(ctx, req)
	if err != nil || first.Status != gateway.StatusCompleted {
		t.Fatal(first, err)
	}
	again, err := f.run.Call(ctx, req)
	if err != nil || !again.Metadata.Duplicate || again.Metadata.IdempotencyKey != first.Metadata.IdempotencyKey {
		t.Errorf("retry = duplicate %v key %s, %v; want the first result (key %s)", again.Metadata.Duplicate, again.Metadata.IdempotencyKey, err, first.Metadata.IdempotencyKey)
	}
	req.Step.Index++
	later, err := f.run.Call(ctx, req)
	if err != nil || !later.Metadata.Duplicate {
		t.Errorf("the caller's key at another step = duplicate %v, %v", later.Metadata.Duplicate, err)
	}
	if n := f.payments.CallCount("issue_refund"); n != 1 {
		t.Errorf("issue_refund ran %d times, want once", n)
	}
}
