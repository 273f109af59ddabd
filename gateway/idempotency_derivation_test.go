package gateway_test

import (
	"testing"

	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/internal/canon"
)

// A write's key is the one CallRequest.IdempotencyKey documents: the id
// (prefix "ik") of the run's tenant id, the run id, the plan's key when
// there is one, the capability and the canonical arguments as the plan
// gave them. It is pinned here byte for byte (recorded runs and the
// stores hold these keys), for the plan's key, without it, and with a
// plan that fills in an idempotency_key argument of its own.
func TestIdempotencyKeyDerivation(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, callerKey string
		ownArg          bool // the plan sets args.idempotency_key itself
	}{
		{"the plan's key", "refund-ord_881", false},
		{"no key of the plan's", "", false},
		{"the plan's key and its own argument", "refund-ord_881", true},
		{"its own argument only", "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, lowValue)
			req := refundCall(1200)
			req.IdempotencyKey = tc.callerKey
			if tc.ownArg {
				req.Args["idempotency_key"] = "plan-made"
			}
			args, err := canon.JSON(req.Args)
			if err != nil {
				t.Fatal(err)
			}
			parts := []canon.Part{canon.StringPart(f.rc.TenantID), canon.StringPart(f.rc.RunID)}
			if tc.callerKey != "" {
				parts = append(parts, canon.StringPart(tc.callerKey))
			}
			parts = append(parts, canon.StringPart(req.CapabilityID), canon.RawPart(args))
			want, err := canon.IDOf(canon.PrefixIdem, parts...)
			if err != nil {
				t.Fatal(err)
			}
			res, err := f.run.Call(ctx, req)
			if err != nil || res.Status != gateway.StatusCompleted {
				t.Fatalf("%v %s %+v", err, res.Status, res.Error)
			}
			if res.Metadata.IdempotencyKey != want {
				t.Errorf("key %s, want %s", res.Metadata.IdempotencyKey, want)
			}
			if call := f.payments.Calls()[0]; call.IdempotencyKey != want || call.Envelope.IdempotencyKey == nil || *call.Envelope.IdempotencyKey != want {
				t.Errorf("the adapter's call carries %q and %v, want %s", call.IdempotencyKey, call.Envelope.IdempotencyKey, want)
			}
		})
	}
}
