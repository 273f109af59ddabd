package decision

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestSealCyclicOutputsIsAnError: a record whose outputs hold a cycle (a
// caller's map that contains itself) has no JSON; Seal says so with an
// error, as the JSON round trip did, rather than recursing until the
// goroutine's stack is exhausted, which is fatal to the whole process.
// The seal runs in a child process, so the crash it guards against
// cannot take this test binary down.
func TestSealCyclicOutputsIsAnError(t *testing.T) {
	if os.Getenv("CONTEXTOS_REV3_CYCLE") == "1" {
		r := validRecordForCycle()
		m := map[string]any{"k": "v"}
		m["self"] = m
		r.Outputs = map[string]any{"loop": m}
		if _, _, err := Seal(r, GenesisHash); err == nil {
			os.Stdout.WriteString("no error\n")
			os.Exit(3)
		} else if !strings.Contains(err.Error(), "cycle") {
			os.Stdout.WriteString("error does not name the cycle: " + err.Error() + "\n")
			os.Exit(4)
		}
		os.Exit(0)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestSealCyclicOutputsIsAnError$")
	cmd.Env = append(os.Environ(), "CONTEXTOS_REV3_CYCLE=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		lines := strings.SplitN(string(out), "\n", 4)
		t.Fatalf("sealing a record with cyclic outputs: %v\n%s", err, strings.Join(lines[:min(3, len(lines))], "\n"))
	}
}

func validRecordForCycle() *Record {
	return &Record{RecordID: "rec_1", DecisionKey: "refund", DecisionVersion: "1", Timestamp: "2026-01-01T00:00:00Z", Status: Decided,
		Actor: Actor{Type: "AGENT", ID: "a"}, AgentIdentity: AgentIdentity{Subject: "s"}, IntentRef: "i", InputsRefs: InputsRefs{Request: "r"},
		Lineage: Lineage{PackVersion: "1"}, TraceID: "t"}
}
