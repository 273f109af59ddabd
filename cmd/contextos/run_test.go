package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func runArgs(extra ...string) []string {
	td := func(n string) string { return filepath.Join("testdata", n) }
	return append([]string{"run", "--pack", td("ctxpack.support-1.0.0.json"), "--allow-unsigned", "--request", td("invoke.support-refund.json"),
		"--run-context", td("run-context.support.json"), "--plan", td("plan.refund-4200.json"), "--tools", td("tools.refund.json"),
		"--evidence", td("evidence.support.json"), "--ontology", "ont.support@1.0.0", "--now", "2026-05-04T09:31:00Z"}, extra...)
}

type runOut struct {
	Status string `json:"status"`
	Record struct {
		Outcome   string `json:"outcome"`
		Approvals []struct {
			Approver string `json:"approver"`
		} `json:"approvals"`
	} `json:"decision_record"`
	ToolResults []json.RawMessage `json:"tool_results"`
	Events      []struct {
		Kind string `json:"kind"`
	} `json:"events"`
	Pending []struct {
		GateID string `json:"gate_id"`
	} `json:"pending_approvals"`
}

func TestRunCommand(t *testing.T) {
	dir := t.TempDir()
	packet := filepath.Join(dir, "packet.json")
	record := filepath.Join(dir, "record.json")
	code, out, errs := runCLI(t, "", runArgs("--approve", "GATE_FINANCE_APPROVAL=user_finance_lead_77:finance_lead", "--replay-packet", packet, "--record", record)...)
	if code != exitOK {
		t.Fatalf("run: %d %s", code, errs)
	}
	var o runOut
	if err := json.Unmarshal([]byte(out), &o); err != nil {
		t.Fatal(err)
	}
	if o.Status != "DECIDED" || o.Record.Outcome != "approved" || len(o.Record.Approvals) != 1 || len(o.ToolResults) != 3 || len(o.Pending) != 0 {
		t.Errorf("output = %+v", o)
	}
	if _, err := os.Stat(record); err != nil {
		t.Error(err)
	}
	// The same run gives the same bytes.
	if _, again, _ := runCLI(t, "", runArgs("--approve", "GATE_FINANCE_APPROVAL=user_finance_lead_77:finance_lead")...); again != out {
		t.Error("run output is not deterministic under --now")
	}

	// Replay: equal, then a tampered packet.
	replayArgs := []string{"replay", "--pack", filepath.Join("testdata", "ctxpack.support-1.0.0.json"), "--allow-unsigned", packet}
	if code, out, errs := runCLI(t, "", replayArgs...); code != exitOK || !strings.Contains(out, `"replay_equal"`) {
		t.Errorf("replay: %d %s %s", code, out, errs)
	}
	b, _ := os.ReadFile(packet)
	// A changed recorded outcome (its first occurrence): a mismatch.
	os.WriteFile(packet, []byte(strings.Replace(string(b), "txn_q9", "txn_q8", 1)), 0o644)
	if code, out, _ := runCLI(t, "", replayArgs...); code != exitInvalid || !strings.Contains(out, `"replay_mismatch"`) {
		t.Errorf("changed outcome: %d %s", code, out)
	}
	// A changed invoke envelope: tampering.
	os.WriteFile(packet, []byte(strings.Replace(string(b), "Refund order ord_881", "Refund order ord_882", 1)), 0o644)
	if code, out, _ := runCLI(t, "", replayArgs...); code != exitInvalid || !strings.Contains(out, `"tamper"`) {
		t.Errorf("tampered replay: %d %s", code, out)
	}
}

func TestRunCommandWithoutApprovalEndsDeferred(t *testing.T) {
	code, out, errs := runCLI(t, "", runArgs()...)
	if code != exitOK {
		t.Fatalf("run: %d %s", code, errs)
	}
	var o runOut
	json.Unmarshal([]byte(out), &o)
	if o.Status != "DEFERRED" || len(o.Pending) != 1 || o.Pending[0].GateID != "GATE_FINANCE_APPROVAL" {
		t.Errorf("output = %+v", o)
	}
}

func TestRunCommandRefusals(t *testing.T) {
	dir := t.TempDir()
	badPlan := filepath.Join(dir, "plan.json")
	os.WriteFile(badPlan, []byte(`[{"stepz": []}]`), 0o644)
	noUnsigned := runArgs()
	for i, a := range noUnsigned {
		if a == "--allow-unsigned" {
			noUnsigned = append(noUnsigned[:i:i], noUnsigned[i+1:]...)
			break
		}
	}
	for name, tc := range map[string]struct {
		args []string
		code int
		msg  string
	}{
		"unsigned pack":    {noUnsigned, exitInvalid, "--allow-unsigned"},
		"unknown plan key": {append(runArgs(), "--plan", badPlan), exitInvalid, "stepz"},
		"bad approve":      {append(runArgs(), "--approve", "GATE"), exitUsage, "GATE=APPROVER:ROLE"},
		"missing tools":    {[]string{"run", "--pack", "x"}, exitUsage, "required"},
		"replay no packet": {[]string{"replay", "--allow-unsigned", "--pack", "x"}, exitUsage, "PACKET"},
	} {
		t.Run(name, func(t *testing.T) {
			code, _, errs := runCLI(t, "", tc.args...)
			if code != tc.code || !strings.Contains(errs, tc.msg) {
				t.Errorf("exit %d (%s), want %d with %q", code, errs, tc.code, tc.msg)
			}
		})
	}
}
