package engine

import (
	"testing"
	"time"

	"github.com/contextos/contextos/runcontext"

	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/internal/playback"
)

// TestTakeInputsKeepsOutcomesOfItsOwn holds takeInputs, which keeps the
// first outcomes it takes as the recorder handed them, to a list of the
// run's own: what the recorder records next for the run, or an append to
// that list elsewhere, does not change the outcomes taken.
func TestTakeInputsKeepsOutcomesOfItsOwn(t *testing.T) {
	rec := playback.NewRecorder()
	r := &run{recorder: rec, clock: playback.RecordingClock(time.Now), rc: &runcontext.RunContext{RunID: "run_1"}}
	rec.Observe(gateway.Attempt{RunID: "run_1", ToolCallID: "tc_1", CapabilityID: "cap", Attempt: 1})
	cp := &checkpointState{}
	r.takeInputs(cp)
	if len(cp.Outcomes) != 1 || cp.Outcomes[0].ToolCallID != "tc_1" {
		t.Fatalf("outcomes taken = %+v", cp.Outcomes)
	}
	rec.Observe(gateway.Attempt{RunID: "run_1", ToolCallID: "tc_2", CapabilityID: "cap", Attempt: 1})
	again := rec.Outcomes("run_1")
	_ = append(again, again...)
	if len(again) > 0 {
		again[0].ToolCallID = "edited"
	}
	if len(cp.Outcomes) != 1 || cp.Outcomes[0].ToolCallID != "tc_1" {
		t.Fatalf("outcomes taken changed to %+v", cp.Outcomes)
	}
	r.takeInputs(cp)
	if len(cp.Outcomes) != 2 || cp.Outcomes[0].ToolCallID != "tc_1" || cp.Outcomes[1].ToolCallID != "tc_2" {
		t.Fatalf("outcomes after a second take = %+v", cp.Outcomes)
	}
}
