package gateway_test

import (
	"context"
	"errors"
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

// An entry's kind is outside its hash, and readers count calls and
// results by it: VerifyTranscript refuses an entry that is not what its
// kind says, though its chain links still hold.
func TestVerifyTranscriptRefusesAnEntryItsKindMisnames(t *testing.T) {
	f := newFixture(t)
	run, err := f.gw.NewRun(gateway.RunConfig{Prepared: f.prepared, Compiled: f.cc, Request: f.req, RunContext: f.rc, Meter: runcontext.NewMeter(f.rc.RunBudget, f.now)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res, err := run.Call(ctx, lookupCall()); err != nil || res.Status != gateway.StatusOK {
		t.Fatal(res, err)
	}
	entries := f.recorder.Entries()
	if len(entries) != 2 || entries[0].Kind != "call" || entries[1].Kind != "result" {
		t.Fatalf("entries: %+v", entries)
	}
	if _, err := gateway.VerifyTranscript(entries); err != nil {
		t.Fatal(err)
	}
	for name, edit := range map[string]func(es []gateway.TranscriptEntry){
		"a call renamed":                  func(es []gateway.TranscriptEntry) { es[0].Kind = "approval" },
		"a call with no kind":             func(es []gateway.TranscriptEntry) { es[0].Kind = "" },
		"a call that also holds a result": func(es []gateway.TranscriptEntry) { es[0].Result = es[1].Result },
		"a result that also holds a call": func(es []gateway.TranscriptEntry) { es[1].Call = es[0].Call },
	} {
		t.Run(name, func(t *testing.T) {
			es := append([]gateway.TranscriptEntry(nil), entries...)
			edit(es)
			if _, err := gateway.VerifyTranscript(es); !errors.Is(err, gateway.ErrChain) {
				t.Errorf("VerifyTranscript = %v, want ErrChain", err)
			}
		})
	}
}
