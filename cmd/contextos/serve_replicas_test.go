package main

import (
	"net/http"
	"sync"
	"testing"

	"github.com/contextos/contextos/internal/pgtest"
	"github.com/contextos/contextos/internal/storekit"
)

// Two contextos serve processes on one PostgreSQL database, the payments
// tool a live service the test counts: a refund paused through one is
// approved through the other and issued once; approvals of one pause
// sent through both at once are decided once (one 202, one 409), and the
// refund is issued once.
func TestServeReplicasOnPostgres(t *testing.T) {
	url := pgtest.URL(t)
	dir := t.TempDir()
	key, flags := serveFiles(t, dir)
	payments := storekit.NewPayments(t)
	endpoints := writeFile(t, dir, "endpoints.json", []byte(`{"internal://payments": {"transport": "external", "url": "`+payments.URL()+`", "max_attempts": 1}}`))
	flags = append(flags, "--store", url, "--endpoints", endpoints)
	a := startServeProc(t, flags...)
	b := startServeProc(t, flags...)
	const tenant = "tenant_acme_prod"
	agent := hsToken(t, key, "agent_17", tenant, "support_agent")
	leads := []string{hsToken(t, key, "user_finance_lead_77", tenant, "finance_lead"), hsToken(t, key, "user_finance_lead_78", tenant, "finance_lead")}
	// approve is the lead's approval of the pause GET /v1/approvals lists.
	approve := func(svc *serveProc) []byte {
		t.Helper()
		code, m := call(t, "GET", svc.url+"/v1/approvals", leads[0], nil)
		if code != http.StatusOK || len(m["approvals"].([]any)) != 1 {
			t.Fatalf("approvals: %d %v", code, m)
		}
		return []byte(`{"decision": "approve", "reason": "within policy", "action_digest": "` + m["approvals"].([]any)[0].(map[string]any)["action_digest"].(string) + `"}`)
	}

	// Paused through a, approved through b.
	code, run := call(t, "POST", a.url+"/v1/runs", agent, refundRunBody(t, "req_replicas_1"))
	if code != http.StatusOK || run["state"] != "paused" {
		t.Fatalf("POST through a: %d %v\n%s", code, run, a.log())
	}
	runID := run["run_id"].(string)
	if code, m := call(t, "POST", b.url+"/v1/runs/"+runID+"/approvals/GATE_FINANCE_APPROVAL", leads[0], approve(b)); code != http.StatusAccepted {
		t.Fatalf("approve through b: %d %v\n%s", code, m, b.log())
	}
	if m := waitEnded(t, a.url, agent, runID); m["status"] != "DECIDED" {
		t.Fatalf("the run ended %v", m["status"])
	}
	first := payments.AssertOneEffect(t, 1)

	// The same decision through both at once.
	code, run = call(t, "POST", b.url+"/v1/runs", agent, refundRunBody(t, "req_replicas_2"))
	if code != http.StatusOK || run["state"] != "paused" {
		t.Fatalf("POST through b: %d %v", code, run)
	}
	runID = run["run_id"].(string)
	body := approve(a)
	codes := make([]int, 2)
	var wg sync.WaitGroup
	for i, svc := range []*serveProc{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			codes[i], _ = call(t, "POST", svc.url+"/v1/runs/"+runID+"/approvals/GATE_FINANCE_APPROVAL", leads[i], body)
		}()
	}
	wg.Wait()
	if !(codes[0] == http.StatusAccepted && codes[1] == http.StatusConflict || codes[0] == http.StatusConflict && codes[1] == http.StatusAccepted) {
		t.Fatalf("two approvals answered %v, want one 202 and one 409\na:\n%s\nb:\n%s", codes, a.log(), b.log())
	}
	m := waitEnded(t, b.url, agent, runID)
	if m["status"] != "DECIDED" {
		t.Fatalf("the second run ended %v", m["status"])
	}
	winner := "user_finance_lead_77"
	if codes[1] == http.StatusAccepted {
		winner = "user_finance_lead_78"
	}
	approvals := m["decision_record"].(map[string]any)["approvals"].([]any)
	if len(approvals) != 1 || approvals[0].(map[string]any)["approver"] != winner {
		t.Errorf("the record's approvals %v, want %s's", approvals, winner)
	}
	keys, effects := payments.Counts()
	if len(keys) != 2 || len(effects) != 2 || effects[first] != 1 {
		t.Errorf("payments: %d requests, effects %v; want one effect per run", len(keys), effects)
	}
	for k, n := range effects {
		if n != 1 {
			t.Errorf("refund %s issued %d times", k, n)
		}
	}
}
