package server_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/internal/storekit"
	"github.com/contextos/contextos/server"
)

// refundThenAnother refunds 2100, and once that is decided, 4200: the
// run pauses twice on the finance gate, for two different calls.
func refundThenAnother() contextos.Planner {
	return contextos.PlannerFunc(func(ctx context.Context, r *contextos.PlanRequest) (*contextos.Plan, error) {
		switch r.Turn {
		case 0:
			return storekit.LookupPlan(), nil
		case 1:
			p := storekit.RefundPlan(2100)
			p.Decision = nil
			return p, nil
		case 2:
			p := storekit.RefundPlan(4200)
			p.Decision = nil
			p.Steps[0].Args["note"] = "the second refund"
			return p, nil
		}
		p := storekit.RefundPlan(0)
		p.Steps = nil
		return p, nil
	})
}

// pendingDigests lists the action digests of the pauses w may decide.
func (e *env) pendingDigests(w who) []string {
	e.t.Helper()
	r := e.do("GET", "/v1/approvals", e.token(w), nil)
	if r.status != http.StatusOK {
		e.t.Fatalf("GET /v1/approvals: %d %s", r.status, r.body)
	}
	var v struct {
		Approvals []struct {
			ActionDigest string `json:"action_digest"`
		} `json:"approvals"`
	}
	if err := json.Unmarshal(r.body, &v); err != nil {
		e.t.Fatal(err)
	}
	var out []string
	for _, a := range v.Approvals {
		out = append(out, a.ActionDigest)
	}
	return out
}

var hiddenInput = regexp.MustCompile(`<input type="hidden" name="([a-z_]+)" value="([^"]*)">`)

// A decision is about the call its approver was shown. The lead opens the
// run page of the 2100 refund; meanwhile lead2 approves it and the run
// pauses again on the same gate for a 4200 refund no one has seen. The
// lead's Approve on the page they loaded (or an API decision naming the
// 2100 refund's digest) must not approve the 4200 refund: it is the
// second decision on a pause already decided.
func TestStaleDecisionDoesNotApproveTheNextPause(t *testing.T) {
	e := newEnv(t, &envOptions{planner: refundThenAnother()})
	runID := e.startPaused("req_stale_decision")
	first := e.pendingDigests(lead)
	if len(first) != 1 {
		t.Fatalf("pending: %v", first)
	}
	page := e.do("GET", "/inbox/runs/"+runID, e.token(lead), nil)
	if page.status != http.StatusOK || !strings.Contains(string(page.body), "2100") {
		t.Fatalf("run page: %d %s", page.status, page.body)
	}
	// What the page's form posts besides the decision and the reason.
	form := url.Values{"decision": {"approve"}, "reason": {"looks fine"}}
	for _, m := range hiddenInput.FindAllStringSubmatch(string(page.body), -1) {
		form.Set(m[1], m[2])
	}

	if r := e.decide(runID, lead2, server.DecisionApprove, ""); r.status != http.StatusAccepted {
		t.Fatalf("lead2 approves the 2100 refund: %d %s", r.status, r.body)
	}
	var second []string
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if second = e.pendingDigests(lead); len(second) == 1 && second[0] != first[0] {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the run did not pause on the second refund: %v", second)
		}
	}

	path := "/inbox/runs/" + runID + "/approvals/GATE_FINANCE_APPROVAL"
	if r := e.form(path, e.token(lead), form, "Sec-Fetch-Site", "same-origin"); r.status != http.StatusConflict {
		t.Errorf("the lead's Approve on the 2100 refund's page: %d %s; want 409", r.status, r.body)
	} else {
		contains(t, "the stale approval's page", r.body, `data-code="already_decided"`)
	}
	b, _ := json.Marshal(map[string]string{"decision": server.DecisionApprove, "action_digest": first[0]})
	if r := e.do("POST", "/v1/runs/"+runID+"/approvals/GATE_FINANCE_APPROVAL", e.token(lead), b); r.status != http.StatusConflict {
		t.Errorf("an API approval naming the 2100 refund's digest: %d %s; want 409", r.status, r.body)
	} else {
		r.problem(t, http.StatusConflict, server.CodeAlreadyDecided)
	}
	if got := e.pendingDigests(lead); len(got) != 1 || got[0] != second[0] {
		t.Errorf("the 4200 refund's pause: %v; want it still pending (%s)", got, second[0])
	}
	// Naming a digest the run never paused on is not pending either.
	b, _ = json.Marshal(map[string]string{"decision": server.DecisionApprove, "action_digest": "sha256:0000"})
	if r := e.do("POST", "/v1/runs/"+runID+"/approvals/GATE_FINANCE_APPROVAL", e.token(lead), b); r.status != http.StatusConflict {
		t.Errorf("an approval naming an unknown digest: %d %s; want 409", r.status, r.body)
	} else {
		r.problem(t, http.StatusConflict, server.CodeNotPending)
	}
	// The digest of the pause that waits decides it.
	b, _ = json.Marshal(map[string]string{"decision": server.DecisionDeny, "action_digest": second[0]})
	if r := e.do("POST", "/v1/runs/"+runID+"/approvals/GATE_FINANCE_APPROVAL", e.token(lead), b); r.status != http.StatusAccepted {
		t.Errorf("a denial naming the waiting pause's digest: %d %s", r.status, r.body)
	}
	e.waitEnded(runID)
}

// A client's retry of its decision never decides the next pause. The
// lead approves the 2100 refund with the digest GET /v1/approvals lists
// (the run's own pending_approvals list the same); the run moves on and
// pauses on the same gate for a 4200 refund. The client retries its
// approval: without the digest it is refused (400, action_digest
// required) and with it 409 (already decided); either way the 4200
// refund's pause still awaits, undecided.
func TestRetriedDecisionDoesNotApproveTheNextPause(t *testing.T) {
	e := newEnv(t, &envOptions{planner: refundThenAnother()})
	runID := e.startPaused("req_retried_decision")
	first := e.pendingDigests(lead)
	if len(first) != 1 || !strings.HasPrefix(first[0], "sha256:") {
		t.Fatalf("pending: %v", first)
	}
	run := e.do("GET", "/v1/runs/"+runID, e.token(lead), nil).json(t)
	if p, _ := run["pending_approvals"].([]any); len(p) != 1 || p[0].(map[string]any)["action_digest"] != first[0] {
		t.Fatalf("the run's pending_approvals %v, want the listed digest %s", run["pending_approvals"], first[0])
	}
	path := "/v1/runs/" + runID + "/approvals/GATE_FINANCE_APPROVAL"
	named, _ := json.Marshal(map[string]string{"decision": server.DecisionApprove, "reason": "ok", "action_digest": first[0]})
	if r := e.do("POST", path, e.token(lead), named); r.status != http.StatusAccepted {
		t.Fatalf("approve the 2100 refund with the listed digest: %d %s", r.status, r.body)
	}
	var second []string
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if second = e.pendingDigests(lead); len(second) == 1 && second[0] != first[0] {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the run did not pause on the second refund: %v", second)
		}
	}

	bare, _ := json.Marshal(map[string]string{"decision": server.DecisionApprove, "reason": "ok"})
	m := e.do("POST", path, e.token(lead), bare).problem(t, http.StatusBadRequest, server.CodeInvalidRequest)
	if errs, _ := m["errors"].([]any); len(errs) != 1 || errs[0].(map[string]any)["path"] != "action_digest" || errs[0].(map[string]any)["code"] != "required" {
		t.Errorf("the retry without a digest: errors %v, want action_digest required", m["errors"])
	}
	e.do("POST", path, e.token(lead), named).problem(t, http.StatusConflict, server.CodeAlreadyDecided)
	if got := e.pendingDigests(lead); len(got) != 1 || got[0] != second[0] {
		t.Fatalf("the 4200 refund's pause: %v; want it still pending (%s)", got, second[0])
	}
	if keys, _ := e.payments.Counts(); len(keys) != 1 {
		t.Errorf("payments saw %d refunds, want the approved one", len(keys))
	}
	// The 4200 refund's own digest decides it.
	deny, _ := json.Marshal(map[string]string{"decision": server.DecisionDeny, "action_digest": second[0]})
	if r := e.do("POST", path, e.token(lead2), deny); r.status != http.StatusAccepted {
		t.Fatalf("deny the 4200 refund: %d %s", r.status, r.body)
	}
	e.waitEnded(runID)
	if keys, _ := e.payments.Counts(); len(keys) != 1 {
		t.Errorf("payments saw %d refunds after the denial, want 1", len(keys))
	}
}
