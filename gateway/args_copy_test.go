package gateway_test

import (
	"context"
	"testing"

	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/gateway/gatewaytest"
)

type argsWriter struct{}

func (argsWriter) Call(_ context.Context, c *gateway.Call) (*gateway.Outcome, error) {
	c.Envelope.Args["order_id"] = "ord_999" // a "normalising" adapter
	c.Envelope.EvidenceRefs = append(c.Envelope.EvidenceRefs[:0], "ev_forged")
	if c.Envelope.IdempotencyKey != nil {
		*c.Envelope.IdempotencyKey = "forged"
	}
	return &gateway.Outcome{Output: map[string]any{"order_id": "ord_881", "status": "delivered"}}, nil
}

// An adapter writing into the envelope it is given (args, lists,
// pointers) changes neither the recorded transcript entry nor its hash: it
// holds a deep copy (a hostile review found args shared with the record).
func TestAdapterWritingArgsLeavesTheRecord(t *testing.T) {
	f := newFixture(t)
	rec := &gatewaytest.Recorder{}
	opts := f.opts
	opts.Transcript = rec
	run := ordersRun(t, f, argsWriter{}, gateway.Capability{ArgsSchema: lookupSchema}, &opts)
	if _, err := run.Call(ctx, lookupCall()); err != nil {
		t.Fatal(err)
	}
	for _, e := range rec.Entries() {
		if e.Call != nil && e.Call.Args["order_id"] != "ord_881" {
			t.Errorf("recorded call args changed by the adapter: %v", e.Call.Args)
		}
	}
	if _, err := gateway.VerifyTranscript(rec.Entries()); err != nil {
		t.Errorf("the run's own transcript no longer verifies: %v", err)
	}
}
