package main

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	_ "modernc.org/sqlite" // the database/sql driver "sqlite", to tamper with the file

	"github.com/contextos/contextos/internal/pgtest"
)

// cardPlan is the refund plan with a card number among the refund's
// arguments, which approvals list must never show.
const cardPlan = `[
  {"steps": [{"capability_id": "adp_orders.lookup", "args": {"order_id": "ord_881"}},
             {"capability_id": "adp_policy.eval", "args": {"order_id": "ord_881"}}]},
  {"steps": [{"capability_id": "adp_payments.issue_refund",
              "args": {"order_id": "ord_881", "amount_inr": 4200, "currency": "INR", "note": "refund to card 4111 1111 1111 1111"}}],
   "decision": {"decision_key": "support.refund.execute", "outcome": "approved", "outputs": {"refund_amount_inr": 4200, "currency": "INR"},
     "rationale": "Delivered order within the refund window.", "confidence": 0.95,
     "subject_ids": ["customer:cus_77", "order:ord_881"], "evidence_refs": ["kg:order:ord_881#snapshot_kg_2026_05_03_T0930"]}}
]`

// storeDB is a durable store under test: its --store value, and the
// database behind it opened directly, to tamper with it.
type storeDB struct {
	spec string
	db   *sql.DB
	// param is the placeholder of the n-th statement argument.
	param func(n int) string
}

func sqliteDB(t *testing.T) storeDB {
	path := filepath.Join(t.TempDir(), "contextos.db")
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return storeDB{spec: "sqlite:" + path, db: db, param: func(int) string { return "?" }}
}

func postgresDB(t *testing.T) storeDB {
	url := pgtest.URL(t)
	db, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return storeDB{spec: url, db: db, param: func(n int) string { return fmt.Sprintf("$%d", n) }}
}

// A refund paused at the approval gate with --store is listed by
// approvals list (redacted), continued by resume in a second invocation,
// and its records are listed, shown, verified and replayed from the
// store; a record edited in the database is named by records verify.
func TestDurableStoreFlow(t *testing.T) {
	for _, engine := range []struct {
		name string
		open func(t *testing.T) storeDB
	}{
		{"sqlite", sqliteDB},
		{"postgres", postgresDB},
	} {
		t.Run(engine.name, func(t *testing.T) {
			db := engine.open(t)
			dir := t.TempDir()
			plan := writeFile(t, dir, "plan.json", []byte(cardPlan))
			store := []string{"--store", db.spec}
			approve := []string{"--approve", "GATE_FINANCE_APPROVAL=user_finance_lead_77:finance_lead"}

			// 1. The run pauses at the gate; its pause is in the store.
			code, out, errs := runCLI(t, "", runArgs(append(store, "--plan", plan)...)...)
			if code != exitOK {
				t.Fatalf("run: %d %s", code, errs)
			}
			var paused struct {
				RunID  string `json:"run_id"`
				Status string `json:"status"`
			}
			if err := json.Unmarshal([]byte(out), &paused); err != nil || paused.Status != "DEFERRED" || paused.RunID == "" {
				t.Fatalf("run output: %v %s", err, out)
			}

			// 2. approvals list shows it, redacted.
			code, out, errs = runCLI(t, "", append([]string{"approvals", "list"}, store...)...)
			if code != exitOK {
				t.Fatalf("approvals list: %d %s", code, errs)
			}
			var pending []map[string]any
			if err := json.Unmarshal([]byte(out), &pending); err != nil || len(pending) != 1 {
				t.Fatalf("approvals list: %v %s", err, out)
			}
			p := pending[0]
			args, _ := p["args"].(map[string]any)
			if p["run_id"] != paused.RunID || p["gate_id"] != "GATE_FINANCE_APPROVAL" || p["approver_role"] != "finance_lead" ||
				p["capability_id"] != "adp_payments.issue_refund" || p["tool_call_id"] == "" || args["order_id"] != "ord_881" || p["tenant_id"] == "" {
				t.Errorf("pending approval = %v", p)
			}
			if strings.Contains(out, "4111") || !strings.Contains(fmt.Sprint(args["note"]), "[REDACTED]") {
				t.Errorf("approvals list shows the card number: %s", out)
			}

			// 3. resume, in a second invocation, finishes it; it is no
			// longer pending and cannot be resumed again.
			resume := append(append([]string{"resume", paused.RunID}, store...), approve...)
			resume = append(resume, withoutFlag(withoutFlag(runArgs("--plan", plan), "--request"), "--run-context")[1:]...)
			code, out, errs = runCLI(t, "", resume...)
			if code != exitOK {
				t.Fatalf("resume: %d %s", code, errs)
			}
			var done runOut
			var doneID struct {
				RunID string `json:"run_id"`
			}
			json.Unmarshal([]byte(out), &done)
			json.Unmarshal([]byte(out), &doneID)
			if done.Status != "DECIDED" || done.Record.Outcome != "approved" || len(done.Record.Approvals) != 1 ||
				done.Record.Approvals[0].Approver != "user_finance_lead_77" || doneID.RunID != paused.RunID {
				t.Errorf("resume output = %+v (run %s)", done, doneID.RunID)
			}
			refunded := false
			for _, r := range done.ToolResults {
				refunded = refunded || strings.Contains(string(r), `"adp_payments.issue_refund"`) && strings.Contains(string(r), `"txn_q9"`)
			}
			if !refunded {
				t.Errorf("the resumed run issued no refund: %s", out)
			}
			if code, out, _ := runCLI(t, "", append([]string{"approvals", "list"}, store...)...); code != exitOK || strings.TrimSpace(out) != "[]" {
				t.Errorf("approvals list after the resume: %d %s", code, out)
			}
			if code, _, errs := runCLI(t, "", resume...); code != exitInvalid || !strings.Contains(errs, "awaits no approval") {
				t.Errorf("second resume: %d %s", code, errs)
			}

			// 4. records list, with filters, and show.
			var recs []struct {
				RecordID string `json:"record_id"`
				RunID    string `json:"run_id"`
				Status   string `json:"status"`
			}
			code, out, errs = runCLI(t, "", append([]string{"records", "list"}, store...)...)
			if err := json.Unmarshal([]byte(out), &recs); code != exitOK || err != nil {
				t.Fatalf("records list: %d %v %s", code, err, errs)
			}
			var statuses []string
			decided := -1
			for i, r := range recs {
				statuses = append(statuses, r.Status)
				if r.RunID != paused.RunID {
					t.Errorf("record %s is of run %s", r.RecordID, r.RunID)
				}
				if r.Status == "DECIDED" {
					decided = i
				}
			}
			if !slices.Contains(statuses, "DEFERRED") || decided < 0 {
				t.Fatalf("records = %v, want the DEFERRED and the DECIDED record", statuses)
			}
			for _, tc := range []struct {
				filter []string
				want   int
			}{
				{[]string{"--status", "DECIDED"}, 1},
				{[]string{"--run", paused.RunID}, len(recs)},
				{[]string{"--run", "run_other"}, 0},
				{[]string{"--tenant", "tenant_other"}, 0},
			} {
				code, out, errs := runCLI(t, "", append(append([]string{"records", "list"}, store...), tc.filter...)...)
				var got []json.RawMessage
				if err := json.Unmarshal([]byte(out), &got); code != exitOK || err != nil || len(got) != tc.want {
					t.Errorf("records list %v: %d records (%v, %s), want %d", tc.filter, len(got), err, errs, tc.want)
				}
			}
			id := recs[decided].RecordID
			code, out, errs = runCLI(t, "", append([]string{"records", "show", id}, store...)...)
			if code != exitOK || !strings.Contains(out, `"record_id": "`+id+`"`) || !strings.Contains(out, `"outcome": "approved"`) {
				t.Errorf("records show: %d %s %s", code, out, errs)
			}
			if code, _, errs := runCLI(t, "", append([]string{"records", "show", "dr_missing"}, store...)...); code != exitInvalid || !strings.Contains(errs, "dr_missing") {
				t.Errorf("records show of an unknown id: %d %s", code, errs)
			}

			// 5. The stored packet replays equal.
			replay := append([]string{"replay", "--pack", testFile("ctxpack.support-1.0.0.json"), "--allow-unsigned"}, store...)
			if code, out, errs := runCLI(t, "", append(replay, id)...); code != exitOK || !strings.Contains(out, `"replay_equal"`) {
				t.Errorf("replay from the store: %d %s %s", code, out, errs)
			}

			// 6. verify holds, then names the record edited behind the
			// store's back.
			if code, out, errs := runCLI(t, "", append([]string{"records", "verify"}, store...)...); code != exitOK || out != fmt.Sprintf("verified: %d records\n", len(recs)) {
				t.Errorf("records verify: %d %q %s", code, out, errs)
			}
			var data []byte
			if err := db.db.QueryRow(`SELECT data FROM contextos_records WHERE record_id = `+db.param(1), id).Scan(&data); err != nil {
				t.Fatal(err)
			}
			edited := strings.Replace(string(data), "Delivered order within", "Delivered order outside", 1)
			if edited == string(data) {
				t.Fatalf("the stored record holds no rationale to edit: %s", data)
			}
			if _, err := db.db.Exec(`UPDATE contextos_records SET data = `+db.param(1)+` WHERE record_id = `+db.param(2), []byte(edited), id); err != nil {
				t.Fatal(err)
			}
			code, out, _ = runCLI(t, "", append([]string{"records", "verify"}, store...)...)
			if want := fmt.Sprintf("broken: record %d (%s): ", decided, id); code != exitInvalid || !strings.HasPrefix(out, want) {
				t.Errorf("records verify after tampering: %d %q, want the prefix %q", code, out, want)
			}
		})
	}
}

// The commands that read a store refuse to run without one, and a bad
// --store value is a usage error that never shows a password.
func TestStoreFlagErrors(t *testing.T) {
	badRun := runArgs("--store", "mysql://admin:hunter2@127.0.0.1/db")
	missingDir := t.TempDir()
	t.Cleanup(func() {
		// A command that reads a store never creates one.
		if entries, _ := os.ReadDir(missingDir); len(entries) != 0 {
			t.Errorf("a read command created %v", entries)
		}
	})
	for name, tc := range map[string]struct {
		args []string
		msg  string
	}{
		"records list without a store":    {[]string{"records", "list"}, "needs --store"},
		"records show without a store":    {[]string{"records", "show", "dr_1"}, "needs --store"},
		"records verify without a store":  {[]string{"records", "verify"}, "needs --store"},
		"approvals list without a store":  {[]string{"approvals", "list"}, "needs --store"},
		"resume without a store":          {[]string{"resume", "run_1", "--approve", "G=a:r"}, "needs --store"},
		"unknown scheme":                  {badRun, "want sqlite:PATH"},
		"empty sqlite path":               {[]string{"records", "list", "--store", "sqlite:"}, "path is empty"},
		"unparsable url":                  {[]string{"records", "list", "--store", "postgres://admin:hunter2@[::1"}, "want sqlite:PATH"},
		"unreachable server":              {[]string{"records", "list", "--store", "postgres://admin:hunter2@127.0.0.1:1/db?connect_timeout=2"}, "--store: "},
		"password in the query":           {[]string{"approvals", "list", "--store", "postgresql://127.0.0.1:1/db?password=hunter2&connect_timeout=2"}, "--store: "},
		"bad status":                      {[]string{"records", "list", "--store", "sqlite:x.db", "--status", "DONE"}, "--status"},
		"resume without a run id":         {[]string{"resume", "--store", "sqlite:x.db", "--approve", "G=a:r"}, "RUN_ID"},
		"resume without --approve":        {[]string{"resume", "run_1", "--store", "sqlite:x.db", "--plan", "p", "--tools", "t"}, "--approve"},
		"records show without an id":      {[]string{"records", "show", "--store", "sqlite:x.db"}, "RECORD_ID"},
		"verify of a missing database":    {[]string{"records", "verify", "--store", "sqlite:" + filepath.Join(missingDir, "typo.db")}, "does not exist"},
		"approvals of a missing database": {[]string{"approvals", "list", "--store", "sqlite:" + filepath.Join(missingDir, "typo.db")}, "does not exist"},
	} {
		t.Run(name, func(t *testing.T) {
			code, out, errs := runCLI(t, "", tc.args...)
			if code != exitUsage || !strings.Contains(errs, tc.msg) {
				t.Errorf("exit %d (%s), want %d with %q", code, errs, exitUsage, tc.msg)
			}
			if strings.Contains(out+errs, "hunter2") {
				t.Errorf("the output shows the password: %s %s", out, errs)
			}
		})
	}
}

// resume names the gate a run awaits when --approve answers another, and
// run prints its run id without --store too.
func TestResumeNeedsTheAwaitedGate(t *testing.T) {
	db := sqliteDB(t)
	code, out, errs := runCLI(t, "", runArgs("--store", db.spec)...)
	var o struct {
		RunID string `json:"run_id"`
	}
	if err := json.Unmarshal([]byte(out), &o); code != exitOK || err != nil || o.RunID == "" {
		t.Fatalf("run: %d %v %s", code, err, errs)
	}
	args := append([]string{"resume", "--store", db.spec, "--approve", "GATE_OTHER=a:r", o.RunID}, withoutFlag(withoutFlag(runArgs(), "--request"), "--run-context")[1:]...)
	if code, _, errs := runCLI(t, "", args...); code != exitUsage || !strings.Contains(errs, "awaits GATE_FINANCE_APPROVAL (role finance_lead)") {
		t.Errorf("resume with another gate: %d %s", code, errs)
	}
	// The awaited gate by another role is refused before the gateway
	// would deny it and end the run: the run stays paused.
	args = append([]string{"resume", "--store", db.spec, "--approve", "GATE_FINANCE_APPROVAL=mallory:intern", o.RunID}, withoutFlag(withoutFlag(runArgs(), "--request"), "--run-context")[1:]...)
	if code, _, errs := runCLI(t, "", args...); code != exitUsage || !strings.Contains(errs, "by role finance_lead") {
		t.Errorf("resume with another role: %d %s", code, errs)
	}
	if code, out, errs := runCLI(t, "", "approvals", "list", "--store", db.spec); code != exitOK || !strings.Contains(out, o.RunID) {
		t.Errorf("after a refused resume the run is no longer pending: %d %s %s", code, out, errs)
	}
	if code, out, _ := runCLI(t, "", runArgs()...); code != exitOK || !strings.Contains(out, `"run_id": "`+o.RunID+`"`) {
		t.Errorf("run without --store prints no run id: %s", out)
	}
}

// scrub takes the --store value's password out of a message that quotes
// it, whether in the user info or in the query.
func TestScrub(t *testing.T) {
	for _, tc := range []struct{ spec, msg string }{
		{"postgres://admin:hunter2@db/x", "cannot reach postgres://admin:hunter2@db/x"},
		{"postgres://admin:hunter%232@db/x", "cannot reach postgres://admin:hunter%232@db/x (password hunter#2)"},
		{"postgresql://db/x?password=hunter2", "cannot reach db with password=hunter2"},
		{"postgres://db/x?user=a&password=hunter2&sslmode=disable", "bad option hunter2"},
	} {
		got := scrub(tc.msg, tc.spec)
		if strings.Contains(got, "hunter") || !strings.Contains(got, "[REDACTED]") {
			t.Errorf("scrub(%q) = %q", tc.msg, got)
		}
	}
}
