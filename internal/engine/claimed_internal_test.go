package engine

import (
	"testing"

	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/runcontext"
)

// ClaimedPauseOf names a run claimed at a pause, and nothing else: a
// paused run, a run claimed mid-run, an ended one.
func TestClaimedPauseOf(t *testing.T) {
	pending := &gateway.ApprovalRequest{GateID: "G", ToolCallID: "tool_1", ActionDigest: "sha256:a"}
	for _, c := range []struct {
		name string
		st   checkpointState
		want bool
	}{
		{"claimed at a pause", checkpointState{Active: true, Pending: pending, Deferred: "dr_1"}, true},
		{"paused", checkpointState{Pending: pending, Deferred: "dr_1"}, false},
		{"claimed mid-run", checkpointState{Active: true, Deferred: "dr_1"}, false},
		{"ended", checkpointState{Active: true, Terminal: true, Pending: pending, Deferred: "dr_1"}, false},
	} {
		st := c.st
		st.RunID, st.Run = "run_1", &runcontext.RunContext{TenantID: "t1", SafetyMode: runcontext.ReadOnly}
		cp, err := encodeCheckpoint(&st)
		if err != nil {
			t.Fatal(err)
		}
		got, err := ClaimedPauseOf(cp)
		if err != nil || (got != nil) != c.want {
			t.Fatalf("%s: %+v, %v; want claimed %v", c.name, got, err, c.want)
		}
		if got != nil && (got.RunID != "run_1" || got.TenantID != "t1" || got.RecordID != "dr_1" || got.Pending.ActionDigest != "sha256:a") {
			t.Errorf("%s: %+v", c.name, got)
		}
	}
	if _, err := ClaimedPauseOf(&Checkpoint{RunID: "run_1", Version: checkpointV2, Data: []byte("{")}); err == nil {
		t.Error("a corrupt checkpoint read")
	}
}
