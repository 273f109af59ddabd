package gateway_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/runcontext"
)

// ownRefusal is a transcript (a SQL store's, say) that refuses a forked
// position with an error of its own (a unique index's), not
// gateway.ErrPositionTaken.
type ownRefusal struct{ *gateway.MemoryTranscript }

var errUniqueIndex = errors.New("test: UNIQUE constraint failed: contextos_transcripts.run_id, contextos_transcripts.seq")

func (o ownRefusal) Append(ctx context.Context, e gateway.TranscriptEntry) error {
	if err := o.MemoryTranscript.Append(ctx, e); err != nil {
		return errUniqueIndex
	}
	return nil
}

// A call whose entry the transcript refuses because another runtime's
// entry holds the run's position fails with ErrPositionTaken whatever
// error the sink refused it with (the runtime stops on it without
// recording more): the gateway reads the run back and finds the other
// entry there.
func TestARefusedPositionIsErrPositionTaken(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	mem := gateway.NewMemoryTranscript()
	other := gateway.TranscriptEntry{RunID: f.rc.RunID, Seq: 0, Kind: "call", PrevHash: gateway.GenesisHash, EntryHash: "sha256:e1", ChainHash: "sha256:c1"}
	if err := mem.Append(ctx, other); err != nil {
		t.Fatal(err)
	}
	gw, err := gateway.New([]gateway.Registration{{AdapterID: "adp_orders", Adapter: f.orders, Capabilities: map[string]gateway.Capability{"lookup": {ArgsSchema: lookupSchema}}}},
		&gateway.Options{Transcript: ownRefusal{mem}, Sleep: func(context.Context, time.Duration) error { return nil }})
	if err != nil {
		t.Fatal(err)
	}
	run, err := gw.NewRun(gateway.RunConfig{Prepared: f.prepared, Compiled: f.cc, Request: f.req, RunContext: f.rc, Meter: runcontext.NewMeter(f.rc.RunBudget, f.now)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := run.Call(ctx, lookupCall()); !errors.Is(err, gateway.ErrPositionTaken) || !errors.Is(err, errUniqueIndex) {
		t.Errorf("Call over a taken position = %v, want ErrPositionTaken wrapping the sink's error", err)
	}
	if n := f.orders.CallCount("lookup"); n != 0 {
		t.Errorf("the lookup ran %d times though its call was not recorded", n)
	}
}
