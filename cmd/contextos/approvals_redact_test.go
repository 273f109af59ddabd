package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// approvals list redacts the arguments by every --redactors rule, as
// serve's inbox and webhook do, whatever rules the run's pack activated:
// the fixture pack names no host rule, and the order id the host rule
// redacts is not listed.
func TestApprovalsListRedactedByTheRedactorsFlag(t *testing.T) {
	db := sqliteDB(t)
	dir := t.TempDir()
	plan := writeFile(t, dir, "plan.json", []byte(cardPlan))
	store := []string{"--store", db.spec}
	if code, _, errs := runCLI(t, "", runArgs(append(store, "--plan", plan)...)...); code != exitOK {
		t.Fatalf("run: %d %s", code, errs)
	}
	rules := writeFile(t, dir, "redactors.json", []byte(`{"order_ref": "ord_[0-9]+"}`))
	code, out, errs := runCLI(t, "", append([]string{"approvals", "list", "--redactors", rules}, store...)...)
	if code != exitOK {
		t.Fatalf("approvals list: %d %s", code, errs)
	}
	var pending []map[string]any
	if err := json.Unmarshal([]byte(out), &pending); err != nil || len(pending) != 1 {
		t.Fatalf("approvals list: %v %s", err, out)
	}
	if !strings.Contains(out, "amount_inr") {
		t.Fatalf("no paused refund listed: %s", out)
	}
	if strings.Contains(out, "ord_881") {
		t.Errorf("approvals list shows the order id the --redactors rule redacts: %s", out)
	}
}
