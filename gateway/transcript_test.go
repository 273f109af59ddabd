package gateway_test

import (
	"context"
	"testing"

	"github.com/contextos/contextos/gateway"
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
