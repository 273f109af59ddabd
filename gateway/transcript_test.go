package gateway_test

import (
	"context"
	"testing"
	"time"

	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/runcontext"
)

func TestMemoryTranscriptKeepsRunsApartAndBounded(t *testing.T) {
	m := gateway.NewMemoryTranscriptLimit(2)
	for i, run := range []string{"run_a", "run_b", "run_a", "run_c"} {
		if err := m.Append(context.Background(), gateway.TranscriptEntry{RunID: run, Seq: i}); err != nil {
			t.Fatal(err)
		}
	}
	if got := m.Entries("run_a"); len(got) != 0 {
		t.Errorf("the oldest run was kept past the limit: %v", got)
	}
	if got := m.Entries("run_b"); len(got) != 1 || got[0].Seq != 1 {
		t.Errorf("run_b = %v", got)
	}
	all := m.Entries("")
	if len(all) != 2 || all[0].RunID != "run_b" || all[1].RunID != "run_c" {
		t.Errorf("all = %v", all)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := m.Append(ctx, gateway.TranscriptEntry{RunID: "run_d"}); err == nil {
		t.Error("Append with a cancelled context succeeded")
	}
}

// The transcript keeps the result as hashed (latency_ms 0, no transcript
// id); the result Call returns carries both, and the entry still verifies.
func TestRecordedResultLeavesOutRecordingFields(t *testing.T) {
	f := newFixture(t)
	tick := f.now
	run, err := f.gw.NewRun(gateway.RunConfig{Prepared: f.prepared, Compiled: f.cc, Request: f.req, RunContext: f.rc, Meter: runcontext.NewMeter(f.rc.RunBudget, f.now)}, &gateway.RunOptions{
		Now: func() time.Time { tick = tick.Add(7 * time.Millisecond); return tick }})
	if err != nil {
		t.Fatal(err)
	}
	res, err := run.Call(ctx, lookupCall())
	if err != nil || res.Status != gateway.StatusOK {
		t.Fatal(res, err)
	}
	if res.LatencyMS <= 0 || res.Metadata.ToolTranscriptID != f.rc.RunID+"#1" {
		t.Errorf("returned result: latency %d, transcript id %q", res.LatencyMS, res.Metadata.ToolTranscriptID)
	}
	entries := f.recorder.Entries()
	last := entries[len(entries)-1]
	if last.Result == nil || last.Result.LatencyMS != 0 || last.Result.Metadata.ToolTranscriptID != "" || last.Seq != 1 {
		t.Errorf("recorded result: %+v", last)
	}
	if _, err := gateway.VerifyTranscript(entries); err != nil {
		t.Error(err)
	}
}
