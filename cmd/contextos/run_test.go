package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/contextos/contextos/internal/fixture"
	"github.com/contextos/contextos/replay"
)

func runArgs(extra ...string) []string {
	td := testFile
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
	replayArgs := []string{"replay", "--pack", testFile("ctxpack.support-1.0.0.json"), "--allow-unsigned", packet}
	if code, out, errs := runCLI(t, "", replayArgs...); code != exitOK || !strings.Contains(out, `"replay_equal"`) {
		t.Errorf("replay: %d %s %s", code, out, errs)
	}
	b, _ := os.ReadFile(packet)
	// A changed recorded outcome (its first occurrence): tampering; sealed
	// again, as a packet recorded with that outcome, a mismatch.
	changed := []byte(strings.Replace(string(b), "txn_q9", "txn_q8", 1))
	os.WriteFile(packet, changed, 0o644)
	if code, out, _ := runCLI(t, "", replayArgs...); code != exitInvalid || !strings.Contains(out, `"tamper"`) {
		t.Errorf("changed outcome: %d %s", code, out)
	}
	var p replay.Packet
	if err := json.Unmarshal(changed, &p); err != nil || p.Seal() != nil {
		t.Fatalf("reseal: %v", err)
	}
	resealed, _ := json.Marshal(&p)
	os.WriteFile(packet, resealed, 0o644)
	if code, out, _ := runCLI(t, "", replayArgs...); code != exitInvalid || !strings.Contains(out, `"replay_mismatch"`) {
		t.Errorf("changed outcome, resealed: %d %s", code, out)
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

// request1200 is the canonical request for a 1200 refund (no gate).
func request1200(t *testing.T, dir string) string {
	t.Helper()
	b := fixture.Invoke()
	var req map[string]any
	json.Unmarshal(b, &req)
	req["input"].(map[string]any)["context"].(map[string]any)["refund_amount"] = 1200
	b, _ = json.Marshal(req)
	return writeFile(t, dir, "request.json", b)
}

const plan1200 = `[
  {"steps": [{"capability_id": "adp_orders.lookup", "args": {"order_id": "ord_881"}},
             {"capability_id": "adp_policy.eval", "args": {"order_id": "ord_881"}}]},
  {"steps": [{"capability_id": "adp_payments.issue_refund", "args": {"order_id": "ord_881", "amount_inr": AMOUNT, "currency": "INR"}}],
   "decision": {"decision_key": "support.refund.execute", "outcome": "approved", "confidence": 0.9,
                "subject_ids": ["order:ord_881"], "evidence_refs": ["kg:order:ord_881#snapshot_kg_2026_05_03_T0930"]}},
  {"decision": {"decision_key": "support.refund.execute", "outcome": "approved", "confidence": 0.9,
                "subject_ids": ["order:ord_881"], "evidence_refs": ["kg:order:ord_881#snapshot_kg_2026_05_03_T0930"]}},
  {"decision": {"decision_key": "support.refund.execute", "outcome": "approved", "confidence": 0.9,
                "subject_ids": ["order:ord_881"], "evidence_refs": ["kg:order:ord_881#snapshot_kg_2026_05_03_T0930"]}},
  {"decision": {"decision_key": "support.refund.execute", "outcome": "approved", "confidence": 0.9,
                "subject_ids": ["order:ord_881"], "evidence_refs": ["kg:order:ord_881#snapshot_kg_2026_05_03_T0930"]}}
]`

// Through the CLI, a refund that did not complete is never DECIDED
// approved, whatever status the payments tool gave.
func TestRunCommandFailedWriteIsNeverDecided(t *testing.T) {
	for _, tc := range []struct {
		name, refund string
		amount       int
		want         string // the refund's result status
	}{
		{"failed", `{"status": "failed"}`, 1200, "failed"},
		{"error", `{"status": "error", "error": {"code": "invalid_input", "reason": "bad", "retryable": false, "message": "account closed"}}`, 1200, "error"},
		{"blocked", `{"status": "blocked"}`, 1200, "error"},
		{"rejected", `{"status": "rejected"}`, 1200, "error"},
		{"denied", `{"status": "denied"}`, 1200, "error"},
		{"no mutations", `{"status": "ok", "output": {"transaction_id": "txn_q9"}}`, 1200, "error"},
		{"rejected arguments", `{"status": "ok", "output": {"transaction_id": "txn_q9"}, "mutations": ["refund:txn_q9"]}`, 0, "rejected"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			tools := writeFile(t, dir, "tools.json", []byte(`{"adp_orders.lookup": [{"status": "ok", "output": {"status": "delivered"}}],
				"adp_policy.eval": [{"status": "ok", "output": {"eligible": true}}], "adp_payments.issue_refund": [`+tc.refund+`]}`))
			plan := writeFile(t, dir, "plan.json", []byte(strings.ReplaceAll(plan1200, "AMOUNT", fmt.Sprint(tc.amount))))
			packet := filepath.Join(dir, "packet.json")
			code, out, errs := runCLI(t, "", runArgs("--request", request1200(t, dir), "--plan", plan, "--tools", tools, "--replay-packet", packet)...)
			if code != exitOK {
				t.Fatalf("run: %d %s", code, errs)
			}
			var o struct {
				Status string `json:"status"`
				Record struct {
					Outcome string `json:"outcome"`
				} `json:"decision_record"`
				ToolResults []struct {
					CapabilityID string `json:"capability_id"`
					Status       string `json:"status"`
				} `json:"tool_results"`
			}
			if err := json.Unmarshal([]byte(out), &o); err != nil {
				t.Fatal(err)
			}
			if o.Status == "DECIDED" {
				t.Fatalf("DECIDED %s although the refund ended %s", o.Record.Outcome, tc.want)
			}
			found := false
			for _, r := range o.ToolResults {
				found = found || r.CapabilityID == "adp_payments.issue_refund" && r.Status == tc.want
			}
			if !found {
				t.Errorf("no refund result %s in %+v", tc.want, o.ToolResults)
			}
			replayArgs := []string{"replay", "--pack", testFile("ctxpack.support-1.0.0.json"), "--allow-unsigned", packet}
			if code, out, errs := runCLI(t, "", replayArgs...); code != exitOK {
				t.Errorf("replay: %d %s %s", code, out, errs)
			}
		})
	}
	// A status the tools file does not know is invalid input.
	dir := t.TempDir()
	tools := writeFile(t, dir, "tools.json", []byte(`{"adp_orders.lookup": [{"status": "okay"}]}`))
	if code, _, errs := runCLI(t, "", runArgs("--tools", tools)...); code != exitInvalid || !strings.Contains(errs, "okay") {
		t.Errorf("unknown status: %d %s", code, errs)
	}
}

// A run that ends DEFERRED still prints its result, and its packet (taken
// from the checkpoint) replays to the same pause.
func TestRunCommandDeferredWritesItsPacket(t *testing.T) {
	dir := t.TempDir()
	packet := filepath.Join(dir, "packet.json")
	code, out, errs := runCLI(t, "", runArgs("--replay-packet", packet)...)
	if code != exitOK || out == "" {
		t.Fatalf("run: %d, stdout %q, %s", code, out, errs)
	}
	var o runOut
	if err := json.Unmarshal([]byte(out), &o); err != nil || o.Status != "DEFERRED" {
		t.Fatalf("output %s (%v)", out, err)
	}
	replayArgs := []string{"replay", "--pack", testFile("ctxpack.support-1.0.0.json"), "--allow-unsigned", packet}
	if code, out, errs := runCLI(t, "", replayArgs...); code != exitOK || !strings.Contains(out, `"replay_equal"`) {
		t.Errorf("replay: %d %s %s", code, out, errs)
	}
}

// Runs with and without --evidence and --memory replay equal through
// contextos replay.
func TestRunCommandReplaysEqualWithAnyInputs(t *testing.T) {
	mem := testFile("memory.support.json")
	for _, tc := range []struct {
		name     string
		evidence string // "" for none, "EMPTY" for an empty file, else a file
		extra    []string
	}{
		{"evidence", testFile("evidence.support.json"), nil},
		{"evidence and memory", testFile("evidence.support.json"), []string{"--memory", mem}},
		{"empty evidence", "EMPTY", nil},
		{"no evidence", "", nil},
		{"memory only", "", []string{"--memory", mem}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			packet := filepath.Join(dir, "packet.json")
			args := withoutFlag(runArgs(), "--evidence")
			switch tc.evidence {
			case "":
			case "EMPTY":
				args = append(args, "--evidence", writeFile(t, dir, "empty.json", []byte("[]")))
			default:
				args = append(args, "--evidence", tc.evidence)
			}
			args = append(append(args, "--approve", "GATE_FINANCE_APPROVAL=user_finance_lead_77:finance_lead", "--replay-packet", packet), tc.extra...)
			if code, _, errs := runCLI(t, "", args...); code != exitOK {
				t.Fatalf("run: %d %s", code, errs)
			}
			replayArgs := []string{"replay", "--pack", testFile("ctxpack.support-1.0.0.json"), "--allow-unsigned", packet}
			if code, out, errs := runCLI(t, "", replayArgs...); code != exitOK || !strings.Contains(out, `"replay_equal"`) {
				t.Errorf("replay: %d %s %s", code, out, errs)
			}
		})
	}
}

// withoutFlag drops a flag and its value from args.
func withoutFlag(args []string, flag string) []string {
	i := slices.Index(args, flag)
	if i < 0 {
		return args
	}
	return slices.Delete(slices.Clone(args), i, i+2)
}
