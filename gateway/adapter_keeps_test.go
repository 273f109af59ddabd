package gateway_test

import (
	"context"
	"reflect"
	"testing"

	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/gateway/gatewaytest"
	"github.com/contextos/contextos/internal/deepcheck"
)

// keeper holds what adapters returned: their outcomes and tool errors.
type keeper struct {
	outcomes []*gateway.Outcome
	errs     []*gateway.ToolError
}

// vandalize edits, in place, everything the adapters returned.
func (k *keeper) vandalize() {
	deepcheck.Vandalize(reflect.ValueOf(k.outcomes))
	deepcheck.Vandalize(reflect.ValueOf(k.errs))
}

// keeping wraps an adapter: it keeps what the adapter returns and, when
// edit is set, edits everything kept before each call.
func (k *keeper) keeping(next gateway.Adapter, edit bool) gateway.Adapter {
	return gateway.AdapterFunc(func(ctx context.Context, call *gateway.Call) (*gateway.Outcome, error) {
		if edit {
			k.vandalize()
		}
		out, err := next.Call(ctx, call)
		if out != nil {
			k.outcomes = append(k.outcomes, out)
		}
		if te, ok := err.(*gateway.ToolError); ok {
			k.errs = append(k.errs, te)
		}
		return out, err
	})
}

// TestAdapterEditingWhatItReturnedChangesNothing: an adapter may keep the
// outcome or the tool error it returned and edit it later (at its next
// call, after the run's last). The results the run returned, the
// transcript and its chain hash are what they are with an adapter that
// edits nothing: the gateway keeps copies of the outcome's output and
// lists and of the error's details, even when those are empty.
func TestAdapterEditingWhatItReturnedChangesNothing(t *testing.T) {
	t.Parallel()
	calls := []gateway.CallRequest{
		lookupCall(),
		{CapabilityID: "adp_policy.eval", Step: gateway.StepID{Index: 2}, Args: map[string]any{"order_id": "ord_881"}},
		refundCall(1200),
	}
	play := func(t *testing.T, edit bool) callsRecord {
		f := newFixture(t, lowValue)
		rec := &gatewaytest.Recorder{}
		opts := f.opts
		opts.Transcript = canonChecked{t, rec}
		// The policy adapter fails with a tool error whose details are
		// empty; the others answer with outputs, lists and citations.
		failing := gateway.AdapterFunc(func(context.Context, *gateway.Call) (*gateway.Outcome, error) {
			return nil, &gateway.ToolError{Code: gateway.CodeExecutionFailed, Reason: "dependency_failed", Message: "policy service down", Details: map[string]any{}}
		})
		f.orders.On("lookup").Return(&gateway.Outcome{Output: map[string]any{"order_id": "ord_881", "lines": []any{map[string]any{"sku": "a"}}},
			Citations: []gateway.Citation{{EvidenceRef: "kg:order:ord_881"}}, RiskTags: []string{"pii"}, Signals: []string{"ok"}, Artifacts: []string{"art_1"}})
		var k keeper
		gw, err := gateway.New([]gateway.Registration{
			{AdapterID: "adp_orders", Adapter: k.keeping(f.orders, edit), Capabilities: map[string]gateway.Capability{"lookup": {ArgsSchema: lookupSchema, Scopes: []string{"orders.read"}}}},
			{AdapterID: "adp_policy", Adapter: k.keeping(failing, edit), Capabilities: map[string]gateway.Capability{"eval": {}}},
			{AdapterID: "adp_payments", Adapter: k.keeping(f.payments, edit), Capabilities: map[string]gateway.Capability{"issue_refund": {ArgsSchema: refundSchema, Scopes: []string{"payments.refund"}, CostCents: 0.31}}},
		}, &opts)
		if err != nil {
			t.Fatal(err)
		}
		run := rebind(t, f, gw)
		var o callsRecord
		for _, c := range calls {
			res, err := run.Call(ctx, c)
			if err != nil {
				t.Fatal(err)
			}
			o.Results = append(o.Results, res)
		}
		if edit {
			k.vandalize()
		}
		if len(k.outcomes) != 2 || len(k.errs) != 1 {
			t.Fatalf("kept %d outcomes and %d errors; the calls return 2 and 1", len(k.outcomes), len(k.errs))
		}
		finishCalls(t, &o, rec, run)
		return o
	}
	want := play(t, false)
	got := play(t, true)
	if want.Results[1].Status.Succeeded() || !want.Results[2].Status.Succeeded() {
		t.Fatalf("the plain run's eval is %s and refund %s: the test needs a failed call and a write", want.Results[1].Status, want.Results[2].Status)
	}
	sameCalls(t, "an adapter that edits what it returned", want, got)
}

// keepingStore is an idempotency store that keeps the prior results its
// Claim returns and the results Complete is given.
type keepingStore struct {
	gateway.IdempotencyStore
	priors []*gateway.ToolResultEnvelope
}

func (s *keepingStore) Complete(ctx context.Context, key string, res *gateway.ToolResultEnvelope) error {
	err := s.IdempotencyStore.Complete(ctx, key, res)
	s.priors = append(s.priors, res)
	return err
}

func (s *keepingStore) Claim(ctx context.Context, key string) (*gateway.ToolResultEnvelope, bool, error) {
	prior, claimed, err := s.IdempotencyStore.Claim(ctx, key)
	if prior != nil {
		s.priors = append(s.priors, prior)
	}
	return prior, claimed, err
}

// TestIdempotencyStoreEditingWhatItReturnedChangesNothing: an idempotency
// store may keep the result its Complete was given and the prior result
// its Claim returned for a duplicate write, and edit them later. The
// results the run returned, the transcript and its chain hash are what
// they are with a store that edits nothing.
func TestIdempotencyStoreEditingWhatItReturnedChangesNothing(t *testing.T) {
	t.Parallel()
	play := func(t *testing.T, edit bool) callsRecord {
		store := &keepingStore{IdempotencyStore: gateway.NewMemoryIdempotency()}
		f := newFixture(t, lowValue, sharedStore(store))
		var o callsRecord
		for _, c := range []gateway.CallRequest{refundCall(1200), refundCall(1200), lookupCall()} {
			res, err := f.run.Call(ctx, c)
			if err != nil {
				t.Fatal(err)
			}
			o.Results = append(o.Results, res)
		}
		if len(store.priors) != 2 || !o.Results[1].Metadata.Duplicate {
			t.Fatalf("the store was given and returned %d results (2 expected), the second refund's duplicate = %v: the test needs one duplicate", len(store.priors), o.Results[1].Metadata.Duplicate)
		}
		if edit {
			deepcheck.Vandalize(reflect.ValueOf(store.priors))
		}
		finishCalls(t, &o, f.recorder, f.run)
		return o
	}
	want, got := play(t, false), play(t, true)
	sameCalls(t, "a store that edits the prior result it returned", want, got)
}
