package gateway_test

import (
	"testing"
	"time"

	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/runcontext"
)

// A result the gateway records before Call measures its latency carries
// latency_ms 0 in the transcript, whatever the clock does: a pause or a
// refusal at an approval gate, and an executed call. Packets recorded by
// earlier runtimes hold these entries so; a replay compares their hashes,
// so recording them with the measured latency would make every such
// packet recorded on a moving clock a mismatch. The caller's result
// still carries the measured latency.
func TestGateAndExecutedResultsAreRecordedBeforeTheirLatency(t *testing.T) {
	t.Parallel()
	movingClock := func(f *fixture, _ *runcontext.RunContext, _ *runcontext.InvokeRequest, _ map[string]gateway.Capability) {
		f.opts.Now = func() time.Time { f.now = f.now.Add(7 * time.Millisecond); return f.now }
	}
	for _, tc := range []struct {
		name   string
		call   func(f *fixture) gateway.CallRequest
		status gateway.Status
	}{
		{"paused at the gate", func(*fixture) gateway.CallRequest { return refundCall(4200) }, gateway.StatusPaused},
		{"executed", func(*fixture) gateway.CallRequest { return lookupCall() }, gateway.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, movingClock)
			res, err := f.run.Call(ctx, tc.call(f))
			if err != nil || res.Status != tc.status {
				t.Fatalf("Call = %+v, %v; want %s", res, err, tc.status)
			}
			if res.LatencyMS <= 0 {
				t.Errorf("the caller's result has latency %d ms on a clock moving 7 ms per reading, want > 0", res.LatencyMS)
			}
			results := f.recorder.Results()
			if len(results) == 0 {
				t.Fatal("no result recorded")
			}
			if got := results[len(results)-1].LatencyMS; got != 0 {
				t.Errorf("recorded result latency_ms = %d, want 0 (recorded before Call measures it)", got)
			}
		})
	}
}
