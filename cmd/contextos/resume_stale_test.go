package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// A resume names the pause it read: when another process continues the
// run between this resume's read of the pause and its resume (here, the
// hook runs a whole second resume in that gap, which approves the first
// refund and pauses at the second refund on the same gate), this resume is
// refused and the second pause still awaits its own decision. Before
// resumes named their pause, the stale approval was spent on the second
// pause: the gateway denied the 3500 refund as an approval of another
// action, and the run ended without anyone deciding it.
func TestResumeOfAPauseContinuedMeanwhileIsRefused(t *testing.T) {
	db := sqliteDB(t)
	plan := testFile("plan.two-refunds.json")
	code, out, errs := runCLI(t, "", runArgs("--store", db.spec, "--plan", plan)...)
	var o struct {
		RunID  string `json:"run_id"`
		Status string `json:"status"`
	}
	if err := json.Unmarshal([]byte(out), &o); code != exitOK || err != nil || o.Status != "DEFERRED" {
		t.Fatalf("run: %d %v %s %s", code, err, out, errs)
	}
	resume := append([]string{"resume", "--store", db.spec, "--approve", "GATE_FINANCE_APPROVAL=lead:finance_lead", o.RunID},
		withoutFlag(withoutFlag(runArgs("--plan", plan), "--request"), "--run-context")[1:]...)

	var inner struct {
		code     int
		out, err string
	}
	testHookPendingRead = func(string) {
		testHookPendingRead = nil
		inner.code, inner.out, inner.err = runCLI(t, "", resume...)
	}
	t.Cleanup(func() { testHookPendingRead = nil })
	code, out, errs = runCLI(t, "", resume...)
	if inner.code != exitOK || !strings.Contains(inner.out, `"status": "DEFERRED"`) {
		t.Fatalf("the other process's resume did not reach the second pause: %d %s %s", inner.code, inner.out, inner.err)
	}
	if code != exitInvalid {
		t.Errorf("a resume of a pause continued meanwhile: exit %d, want %d (refused)\n%s\n%s", code, exitInvalid, out, errs)
	}
	code, out, errs = runCLI(t, "", "approvals", "list", "--store", db.spec)
	if code != exitOK || !strings.Contains(out, o.RunID) || !strings.Contains(out, "3500") {
		t.Errorf("the second pause no longer awaits its decision: %d %s %s", code, out, errs)
	}
}
