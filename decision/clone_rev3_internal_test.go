package decision

import (
	"os"
	"os/exec"
	"reflect"
	"strings"
	"testing"

	"github.com/contextos/contextos/internal/deepcheck"
	"github.com/contextos/contextos/runcontext"
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

// TestCloneRecordCopiesEveryMember fills every member a Record has (by
// reflection, so a member added later is filled too) and holds the typed
// copy to the JSON round trip and to sharing nothing with the record: a
// list, map or pointer member the copy does not know of would be shared
// by the shallow copy it starts from.
func TestCloneRecordCopiesEveryMember(t *testing.T) {
	r := &Record{}
	deepcheck.Fill(reflect.ValueOf(r).Elem())
	r.Status = Decided
	for i := range r.AgentIdentity.PrincipalChain {
		r.AgentIdentity.PrincipalChain[i].Kind = runcontext.PrincipalUser
	}
	for i := range r.Approvals {
		r.Approvals[i].ApprovalModeEffective = runcontext.Destructive
	}
	c, ok := copyRecord(r)
	if !ok {
		t.Fatal("a record of plain values does not take the typed copy")
	}
	want, err := cloneRecordJSON(r)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(c, want) {
		t.Fatalf("copy\n%#v\nround trip\n%#v", c, want)
	}
	if s := deepcheck.Shared("Record", reflect.ValueOf(r).Elem(), reflect.ValueOf(c).Elem()); s != "" {
		t.Fatalf("the copy shares %s with the record", s)
	}
}
