package gatewaytest_test

import (
	"context"
	"reflect"
	"testing"

	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/gateway/gatewaytest"
)

// A Recorder gives back every entry it was given, in the order given, and
// a run's entries only for that run, the run with no id among them (a
// MemoryTranscript reads "" as every run).
func TestRecorderTranscriptRunWithNoID(t *testing.T) {
	ctx := context.Background()
	r := &gatewaytest.Recorder{}
	want := []gateway.TranscriptEntry{
		{RunID: "run_a", Seq: 0, Kind: "call", Call: &gateway.ToolCallEnvelope{ToolCallID: "a0"}},
		{RunID: "", Seq: 0, Kind: "call", Call: &gateway.ToolCallEnvelope{ToolCallID: "none0"}},
		{RunID: "run_b", Seq: 0, Kind: "call", Call: &gateway.ToolCallEnvelope{ToolCallID: "b0"}},
		{RunID: "", Seq: 1, Kind: "call", Call: &gateway.ToolCallEnvelope{ToolCallID: "none1"}},
	}
	for _, e := range want {
		if err := r.Append(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	if got := r.Entries(); !reflect.DeepEqual(got, want) {
		t.Errorf("Entries() = %v, want %v", ids(got), ids(want))
	}
	got, err := r.RunEntries(ctx, "")
	if err != nil || !reflect.DeepEqual(got, []gateway.TranscriptEntry{want[1], want[3]}) {
		t.Errorf("RunEntries(\"\") = %v, %v; want [none0 none1]", ids(got), err)
	}
}

func ids(es []gateway.TranscriptEntry) []string {
	var out []string
	for _, e := range es {
		out = append(out, e.Call.ToolCallID)
	}
	return out
}
