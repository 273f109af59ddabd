package server_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/contextos/contextos/server"
)

// The refund's life over the API: it pauses at the finance gate (the
// POST answers the paused run), its events stream from the start, the
// finance lead lists it with its arguments redacted and approves it
// (202), the run resumes on a worker and ends DECIDED with the lead in
// its record, payments runs once, and a second decision is refused.
func TestRefundApprovedOverTheAPI(t *testing.T) {
	e := newEnv(t, nil)
	runID := e.startPaused("req_api_1")

	r := e.do("GET", "/v1/runs/"+runID, e.token(agent), nil)
	if r.status != http.StatusOK {
		t.Fatalf("GET run: %d %s", r.status, r.body)
	}
	run := r.json(t)
	if run["state"] != server.StatePaused || len(run["pending_approvals"].([]any)) != 1 || len(run["events"].([]any)) == 0 {
		t.Fatalf("paused run: %s", r.body)
	}
	if strings.Contains(string(r.body), cardNumber) {
		t.Fatalf("the run's view shows the card number: %s", r.body)
	}

	// Events from the start, ending with the result.
	r = e.do("GET", "/v1/runs/"+runID+"/events", e.token(agent), nil)
	if r.status != http.StatusOK || r.header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("events: %d %s", r.status, r.body)
	}
	evs := readSSE(t, strings.NewReader(string(r.body)))
	ks := kinds(evs)
	if len(ks) < 4 || ks[0] != "compiled" || ks[len(ks)-1] != "result" || !slices.Contains(ks, "pause") || !slices.Contains(ks, "plan") {
		t.Fatalf("event kinds %v", ks)
	}
	if strings.Contains(string(r.body), cardNumber) {
		t.Fatalf("the event stream shows the card number")
	}

	// The lead's list holds it, redacted; the agent's does not.
	r = e.do("GET", "/v1/approvals", e.token(lead), nil)
	if r.status != http.StatusOK {
		t.Fatalf("approvals: %d %s", r.status, r.body)
	}
	var list struct {
		Approvals []struct {
			RunID        string         `json:"run_id"`
			TenantID     string         `json:"tenant_id"`
			GateID       string         `json:"gate_id"`
			ApproverRole string         `json:"approver_role"`
			CapabilityID string         `json:"capability_id"`
			Args         map[string]any `json:"args"`
			ActionDigest string         `json:"action_digest"`
			ExpiresAt    string         `json:"expires_at"`
			SecondsLeft  int            `json:"seconds_left"`
		} `json:"approvals"`
	}
	if err := json.Unmarshal(r.body, &list); err != nil {
		t.Fatal(err)
	}
	if len(list.Approvals) != 1 {
		t.Fatalf("lead's approvals: %s", r.body)
	}
	a := list.Approvals[0]
	if a.RunID != runID || a.TenantID != tenant || a.GateID != "GATE_FINANCE_APPROVAL" || a.ApproverRole != "finance_lead" ||
		a.CapabilityID != "adp_payments.issue_refund" || a.ActionDigest == "" || a.SecondsLeft != 7200 || a.ExpiresAt != "2026-05-04T11:31:00Z" {
		t.Errorf("approval %+v", a)
	}
	if a.Args["amount_inr"] != float64(4200) || !strings.Contains(a.Args["note"].(string), "[REDACTED") || strings.Contains(string(r.body), cardNumber) {
		t.Errorf("args %v: want the amount kept and the card redacted", a.Args)
	}
	if r := e.do("GET", "/v1/approvals", e.token(agent), nil); r.status != http.StatusOK || !strings.Contains(string(r.body), `"approvals":[]`) {
		t.Errorf("agent's approvals: %d %s", r.status, r.body)
	}

	r = e.decide(runID, lead, server.DecisionApprove, "within policy")
	if r.status != http.StatusAccepted || r.header.Get("Location") != "/v1/runs/"+runID {
		t.Fatalf("approve: %d %v %s", r.status, r.header, r.body)
	}
	if m := r.json(t); m["approver"] != lead.sub || m["approver_role"] != "finance_lead" || m["decision"] != "approve" {
		t.Errorf("decision answer %v", m)
	}
	ended := e.waitEnded(runID)
	if ended["status"] != "DECIDED" {
		t.Fatalf("run ended %v", ended["status"])
	}
	rec := ended["decision_record"].(map[string]any)
	approvals := rec["approvals"].([]any)
	if len(approvals) != 1 || approvals[0].(map[string]any)["approver"] != lead.sub || approvals[0].(map[string]any)["approver_role"] != "finance_lead" {
		t.Errorf("record approvals %v, want the lead's", approvals)
	}
	e.payments.AssertOneEffect(t, 1)

	e.decide(runID, lead2, server.DecisionApprove, "").problem(t, http.StatusConflict, server.CodeAlreadyDecided)
	e.decide(runID, lead, server.DecisionDeny, "").problem(t, http.StatusConflict, server.CodeAlreadyDecided)
	e.payments.AssertOneEffect(t, 1)

	// The records: listed, got, verified.
	r = e.do("GET", "/v1/records?run_id="+runID, e.token(lead), nil)
	var recs struct {
		Records []struct {
			RecordID string `json:"record_id"`
			Status   string `json:"status"`
		} `json:"records"`
	}
	if err := json.Unmarshal(r.body, &recs); err != nil || r.status != http.StatusOK {
		t.Fatalf("records: %d %s", r.status, r.body)
	}
	var statuses []string
	for _, x := range recs.Records {
		statuses = append(statuses, x.Status)
	}
	if diff := cmp.Diff([]string{"DEFERRED", "DECIDED", "CLOSED"}, statuses); diff != "" {
		t.Errorf("record statuses (-want +got):\n%s", diff)
	}
	r = e.do("GET", "/v1/records/"+recs.Records[1].RecordID, e.token(lead), nil)
	if r.status != http.StatusOK || r.json(t)["status"] != "DECIDED" {
		t.Errorf("record: %d %s", r.status, r.body)
	}
	r = e.do("GET", "/v1/records/verify?run_id="+runID, e.token(lead), nil)
	if r.status != http.StatusOK || r.json(t)["verified"] != true || r.json(t)["records"] != float64(3) {
		t.Errorf("verify: %d %s", r.status, r.body)
	}
	// Finished: its events still stream from the start.
	r = e.do("GET", "/v1/runs/"+runID+"/events", e.token(agent), nil)
	ks = kinds(readSSE(t, strings.NewReader(string(r.body))))
	if ks[0] != "compiled" || ks[len(ks)-1] != "result" || !slices.Contains(ks, "pause") || strings.Count(strings.Join(ks, ","), "decision") < 2 {
		t.Errorf("finished run's events %v", ks)
	}
}
