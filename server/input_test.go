package server_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/contextos/contextos/decision"
	"github.com/contextos/contextos/server"
)

// POST /v1/runs refuses each bad input with a problem naming the member
// or rule: media type, size, JSON, unknown members, a missing or invalid
// request, a run id the caller chose, another tenant, a run context that
// disagrees with the request, and a role outside --invoke-roles.
func TestPostRunBadInput(t *testing.T) {
	e := newEnv(t, &envOptions{handler: server.Options{MaxBodyBytes: 64 << 10}})
	good := refundBody(t, "req_bad_1", 1200)
	mod := func(f func(req, rc map[string]any)) []byte {
		var body struct {
			Request    map[string]any `json:"request"`
			RunContext map[string]any `json:"run_context"`
		}
		json.Unmarshal(good, &body)
		f(body.Request, body.RunContext)
		b, _ := json.Marshal(body)
		return b
	}
	cases := []struct {
		name   string
		body   []byte
		hdr    []string
		status int
		code   string
		path   string // the first field error's path
		rule   string
	}{
		{name: "form body", body: good, hdr: []string{"Content-Type", "application/x-www-form-urlencoded"}, status: 415, code: server.CodeUnsupportedMedia},
		{name: "too large", body: []byte(`{"request": "` + strings.Repeat("x", 70<<10) + `"}`), status: 413, code: server.CodeBodyTooLarge},
		{name: "not json", body: []byte(`{"request": `), status: 400, code: server.CodeInvalidRequest},
		{name: "empty", body: []byte(` `), status: 400, code: server.CodeInvalidRequest},
		{name: "array", body: []byte(`[]`), status: 400, code: server.CodeInvalidRequest},
		{name: "unknown member", body: []byte(`{"request": {}, "plan": []}`), status: 400, code: server.CodeInvalidRequest, path: "plan"},
		{name: "duplicate member", body: []byte(`{"request": {}, "request": {}}`), status: 400, code: server.CodeInvalidRequest},
		{name: "no request", body: []byte(`{"run_context": {}}`), status: 400, code: server.CodeInvalidRequest, path: "request"},
		{name: "request not an object", body: []byte(`{"request": 7}`), status: 400, code: server.CodeInvalidRequest, path: "request"},
		{name: "bad mode", body: mod(func(req, _ map[string]any) { req["mode"] = "fast" }), status: 400, code: server.CodeInvalidRequest, path: "request.mode"},
		{name: "unpinned pack", body: mod(func(req, _ map[string]any) { req["context_pack_refs"] = []string{"ctxpack.support@latest"} }), status: 400, code: server.CodeInvalidRequest, path: "request.context_pack_refs[0]"},
		{name: "run id chosen", body: mod(func(_, rc map[string]any) { rc["run_id"] = "run_other_tenants" }), status: 400, code: server.CodeInvalidRequest, path: "run_context.run_id"},
		{name: "run context type", body: mod(func(_, rc map[string]any) { rc["safety_mode"] = 3 }), status: 400, code: server.CodeInvalidRequest, path: "run_context.safety_mode"},
		{name: "run context disagrees", body: mod(func(_, rc map[string]any) { rc["session_id"] = "sess_other" }), status: 400, code: server.CodeInvalidRequest, path: "run_context.session_id"},
		{name: "another tenant", body: mod(func(req, rc map[string]any) { otherTenant(req, rc) }), status: 403, code: server.CodeForbidden, rule: server.RuleTenant},
		{name: "unknown pack", body: mod(func(req, _ map[string]any) { req["context_pack_refs"] = []string{"ctxpack.nope@1.0.0"} }), status: 422, code: server.CodeRunRefused},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := e.do("POST", "/v1/runs", e.token(agent), c.body, c.hdr...)
			m := r.problem(t, c.status, c.code)
			if c.path != "" {
				errs, _ := m["errors"].([]any)
				if len(errs) == 0 || errs[0].(map[string]any)["path"] != c.path {
					t.Errorf("errors %v, want the first at %s", m["errors"], c.path)
				}
			}
			if c.rule != "" && m["rule"] != c.rule {
				t.Errorf("rule %v, want %s", m["rule"], c.rule)
			}
		})
	}
	if keys, _ := e.payments.Counts(); len(keys) != 0 {
		t.Errorf("payments called %d times by refused requests", len(keys))
	}

	roles := newEnv(t, &envOptions{handler: server.Options{InvokeRoles: []string{"support_agent"}}})
	m := roles.do("POST", "/v1/runs", roles.token(lead), good).problem(t, http.StatusForbidden, server.CodeForbidden)
	if m["rule"] != server.RuleInvokeRole {
		t.Errorf("invoke role rule %v", m["rule"])
	}
	if r := roles.do("POST", "/v1/runs", roles.token(agent), good); r.status != http.StatusOK || r.json(t)["status"] != "DECIDED" {
		t.Errorf("support agent's 1200 refund: %d %s", r.status, r.body)
	}
	// The same request again answers the same run; another request under
	// its request id is a conflict.
	if r := roles.do("POST", "/v1/runs", roles.token(agent), good); r.status != http.StatusOK || r.json(t)["status"] != "DECIDED" {
		t.Errorf("the same request again: %d %s", r.status, r.body)
	}
	roles.do("POST", "/v1/runs", roles.token(agent), mod(func(req, _ map[string]any) { req["input"].(map[string]any)["message"] = "another" })).
		problem(t, http.StatusConflict, server.CodeRunConflict)
	roles.payments.AssertOneEffect(t, 1)
}

// A decision is refused as the rules say: 404 for another tenant's or an
// unknown run, 403 without the gate's role, for the run's user and for
// who started it, 409 for a gate the run does not await, an expired
// approval and a second decision, 400 for a bad body; an expired approval
// can still be denied.
func TestDecisionRules(t *testing.T) {
	e := newEnv(t, nil)
	// starter holds finance_lead too: the run it starts is not its to approve.
	r := e.do("POST", "/v1/runs", e.token(starter), refundBody(t, "req_rules_1", 4200))
	if r.status != http.StatusOK {
		t.Fatalf("start: %d %s", r.status, r.body)
	}
	runID := r.json(t)["run_id"].(string)
	body := func(s string) []byte { return []byte(s) }
	post := func(w who, run, gate string, b []byte) response {
		return e.do("POST", "/v1/runs/"+run+"/approvals/"+gate, e.token(w), b)
	}
	digest := e.lastPause(runID)
	approve := body(`{"decision": "approve", "reason": "ok", "action_digest": "` + digest + `"}`)
	cases := []struct {
		name       string
		w          who
		run, gate  string
		body       []byte
		status     int
		code, rule string
		path       string
		fieldCode  string // the field error's code, when set
		leak       string // must not appear in the answer
	}{
		{name: "other tenant", w: outsider, run: runID, gate: "GATE_FINANCE_APPROVAL", body: approve, status: 404, code: server.CodeNotFound},
		{name: "unknown run", w: lead, run: "run_nope", gate: "GATE_FINANCE_APPROVAL", body: approve, status: 404, code: server.CodeNotFound},
		{name: "wrong role", w: agent, run: runID, gate: "GATE_FINANCE_APPROVAL", body: approve, status: 403, code: server.CodeForbidden, rule: server.RuleApproverRole},
		{name: "the run's user", w: requester, run: runID, gate: "GATE_FINANCE_APPROVAL", body: approve, status: 403, code: server.CodeForbidden, rule: server.RuleSelfApproval},
		{name: "the run's user, look-alike", w: who{"usr_771\u200b", tenant, []string{"finance_lead"}}, run: runID, gate: "GATE_FINANCE_APPROVAL", body: approve, status: 403, code: server.CodeForbidden, rule: server.RuleSelfApproval},
		{name: "who started it", w: starter, run: runID, gate: "GATE_FINANCE_APPROVAL", body: approve, status: 403, code: server.CodeForbidden, rule: server.RuleSelfApproval},
		{name: "another gate", w: lead, run: runID, gate: "GATE_OTHER", body: approve, status: 409, code: server.CodeNotPending},
		{name: "a key as the gate", w: lead, run: runID, gate: "sk-live-hr5gateidsecret0001", body: approve, status: 409, code: server.CodeNotPending, leak: "hr5gateidsecret0001"},
		{name: "bad decision", w: lead, run: runID, gate: "GATE_FINANCE_APPROVAL", body: body(`{"decision": "maybe"}`), status: 400, code: server.CodeInvalidRequest, path: "decision"},
		{name: "approver in the body", w: lead, run: runID, gate: "GATE_FINANCE_APPROVAL", body: body(`{"decision": "approve", "approver": "ceo"}`), status: 400, code: server.CodeInvalidRequest, path: "approver"},
		{name: "long reason", w: lead, run: runID, gate: "GATE_FINANCE_APPROVAL", body: body(`{"decision": "approve", "reason": "` + strings.Repeat("r", 1001) + `"}`), status: 400, code: server.CodeInvalidRequest, path: "reason"},
		{name: "control in reason", w: lead, run: runID, gate: "GATE_FINANCE_APPROVAL", body: body(`{"decision": "approve", "reason": "a\u0000b", "action_digest": "` + digest + `"}`), status: 400, code: server.CodeInvalidRequest, path: "reason"},
		// A decision names the pause it decides: without the digest it
		// is refused, whatever the run awaits, and the answer echoes
		// nothing of the body.
		{name: "no action digest", w: lead, run: runID, gate: "GATE_FINANCE_APPROVAL", body: body(`{"decision": "approve", "reason": "card sk-live-hr17digestsecret0001"}`), status: 400, code: server.CodeInvalidRequest, path: "action_digest", fieldCode: "required", leak: "hr17digestsecret0001"},
		{name: "empty action digest", w: lead, run: runID, gate: "GATE_FINANCE_APPROVAL", body: body(`{"decision": "deny", "action_digest": ""}`), status: 400, code: server.CodeInvalidRequest, path: "action_digest", fieldCode: "required"},
		{name: "a key as the digest", w: lead, run: runID, gate: "GATE_FINANCE_APPROVAL", body: body(`{"decision": "approve", "action_digest": "sk-live-hr17digestsecret0002"}`), status: 409, code: server.CodeNotPending, leak: "hr17digestsecret0002"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := post(c.w, c.run, c.gate, c.body)
			if c.leak != "" && strings.Contains(string(r.body), c.leak) {
				t.Errorf("the answer echoes the value: %s", r.body)
			}
			m := r.problem(t, c.status, c.code)
			if c.rule != "" && m["rule"] != c.rule {
				t.Errorf("rule %v, want %s", m["rule"], c.rule)
			}
			if c.path != "" {
				errs, _ := m["errors"].([]any)
				if len(errs) == 0 || errs[0].(map[string]any)["path"] != c.path {
					t.Errorf("errors %v, want %s", m["errors"], c.path)
				} else if c.fieldCode != "" && errs[0].(map[string]any)["code"] != c.fieldCode {
					t.Errorf("errors %v, want code %s", m["errors"], c.fieldCode)
				}
			}
		})
	}
	// None of those decided anything: the lead's list still holds it.
	if r := e.do("GET", "/v1/approvals", e.token(lead), nil); !strings.Contains(string(r.body), runID) {
		t.Fatalf("the run is no longer listed: %s", r.body)
	}
	// The starter's and the user's lists do not hold it.
	for _, w := range []who{starter, requester, outsider} {
		if r := e.do("GET", "/v1/approvals", e.token(w), nil); strings.Contains(string(r.body), runID) {
			t.Errorf("%s's list holds the run: %s", w.sub, r.body)
		}
	}
	// Two hours on, the approval has expired: approving is refused,
	// denying is not.
	e.clock.Advance(2 * time.Hour)
	post(lead, runID, "GATE_FINANCE_APPROVAL", approve).problem(t, http.StatusConflict, server.CodeApprovalExpired)
	if r := post(lead, runID, "GATE_FINANCE_APPROVAL", body(`{"decision": "deny", "reason": "too late", "action_digest": "`+digest+`"}`)); r.status != http.StatusAccepted {
		t.Fatalf("deny after expiry: %d %s", r.status, r.body)
	}
	ended := e.waitEnded(runID)
	if ended["status"] == "DECIDED" {
		t.Errorf("a denied refund ended DECIDED: %v", ended["decision_record"])
	}
	if keys, _ := e.payments.Counts(); len(keys) != 0 {
		t.Errorf("a denied refund reached payments %d times", len(keys))
	}
	post(lead2, runID, "GATE_FINANCE_APPROVAL", approve).problem(t, http.StatusConflict, server.CodeAlreadyDecided)
}

// The service follows the gate's self-approval rule as the gateway does:
// on a gate that allows it, the run's user lists and approves its own
// run (202, the run ends DECIDED with the user as approver); the role is
// still needed. On a gate that does not, the same approval is 403
// (TestDecisionRules).
func TestSelfApprovalAllowedByTheGate(t *testing.T) {
	e := newEnv(t, &envOptions{pack: selfApprovalPack(t)})
	runID := e.startPaused("req_self_1")
	r := e.do("GET", "/v1/approvals", e.token(requester), nil)
	if r.status != http.StatusOK || !strings.Contains(string(r.body), runID) || !strings.Contains(string(r.body), `"allow_self_approval":true`) {
		t.Fatalf("the user's list lacks its own run on a gate that allows self-approval: %d %s", r.status, r.body)
	}
	e.decide(runID, who{"USR_771", tenant, []string{"support_agent"}}, server.DecisionApprove, "").problem(t, http.StatusForbidden, server.CodeForbidden)
	r = e.decide(runID, requester, server.DecisionApprove, "my own refund, allowed")
	if r.status != http.StatusAccepted {
		t.Fatalf("self-approval on a gate that allows it: %d %s", r.status, r.body)
	}
	ended := e.waitEnded(runID)
	if ended["status"] != "DECIDED" {
		t.Fatalf("run ended %v: %v", ended["status"], ended["decision_record"])
	}
	approvals := ended["decision_record"].(map[string]any)["approvals"].([]any)
	if len(approvals) != 1 || approvals[0].(map[string]any)["approver"] != requester.sub {
		t.Errorf("record approvals %v, want the user's own", approvals)
	}
	e.payments.AssertOneEffect(t, 1)
}

// A caller sees its tenant's runs and records only: another tenant's run,
// events, records and verification are not found, and its lists are
// empty.
func TestTenantIsolation(t *testing.T) {
	e := newEnv(t, nil)
	runID := e.startPaused("req_iso_1")
	rec := e.do("GET", "/v1/records?run_id="+runID, e.token(agent), nil)
	var recs struct {
		Records []struct {
			RecordID string `json:"record_id"`
		} `json:"records"`
	}
	json.Unmarshal(rec.body, &recs)
	if len(recs.Records) != 1 {
		t.Fatalf("records: %s", rec.body)
	}
	for _, p := range []string{"/v1/runs/" + runID, "/v1/runs/" + runID + "/events", "/v1/records/" + recs.Records[0].RecordID, "/v1/records/verify?run_id=" + runID, "/inbox/runs/" + runID, "/inbox/runs/" + runID + "/records"} {
		r := e.do("GET", p, e.token(outsider), nil)
		if r.status != http.StatusNotFound {
			t.Errorf("%s as another tenant: %d %s", p, r.status, r.body)
		}
	}
	for _, p := range []string{"/v1/records?run_id=" + runID, "/v1/records", "/v1/approvals"} {
		r := e.do("GET", p, e.token(outsider), nil)
		if r.status != http.StatusOK || strings.Contains(string(r.body), runID) {
			t.Errorf("%s as another tenant: %d %s", p, r.status, r.body)
		}
	}
	// The same request id in another tenant is another run.
	var body map[string]any
	json.Unmarshal(refundBody(t, "req_iso_1", 4200), &body)
	otherTenant(body["request"].(map[string]any), body["run_context"].(map[string]any))
	b, _ := json.Marshal(body)
	r := e.do("POST", "/v1/runs", e.token(outsider), b)
	if r.status == http.StatusOK && r.json(t)["run_id"] == runID {
		t.Errorf("another tenant's request got run %s", runID)
	}
}

// otherTenant moves a refund body to tenant_other.
func otherTenant(req, rc map[string]any) {
	req["tenant_id"] = outsider.tenant
	rc["tenant_id"] = outsider.tenant
	for _, link := range rc["agent"].(map[string]any)["principal_chain"].([]any) {
		link.(map[string]any)["tenant_id"] = outsider.tenant
	}
}

// A denial over the API is in the run's record as an approval is: the
// gate, the deciding principal (the token's subject) and role, the time,
// decision "denied" and the reason, its card number redacted in the
// stored record itself.
func TestDenialInTheRecord(t *testing.T) {
	e := newEnv(t, nil)
	runID := e.startPaused("req_deny_rec_1")
	e.clock.Advance(5 * time.Minute)
	if r := e.decide(runID, lead, server.DecisionDeny, "card "+cardNumber+" is not the customer's"); r.status != http.StatusAccepted {
		t.Fatalf("deny: %d %s", r.status, r.body)
	}
	ended := e.waitEnded(runID)
	if ended["status"] != "ESCALATED" {
		t.Fatalf("denied run ended %v", ended["status"])
	}
	recs, err := e.harness.Decisions.List(context.Background(), decision.Filter{RunID: runID})
	if err != nil {
		t.Fatal(err)
	}
	var terminal *decision.Record
	for _, r := range recs {
		if r.Status == decision.Escalated {
			terminal = r
		}
	}
	if terminal == nil || len(terminal.Approvals) != 1 {
		t.Fatalf("terminal record %+v", terminal)
	}
	a := terminal.Approvals[0]
	if a.Decision != decision.ApprovalDenied || a.Approver != lead.sub || a.ApproverRole != "finance_lead" || a.GateID != "GATE_FINANCE_APPROVAL" ||
		a.DecidedAt != "2026-05-04T09:36:00Z" || a.Reason != "card [REDACTED] is not the customer's" || a.ApprovalID == "" || a.ToolCallID == "" {
		t.Errorf("stored denial %+v", a)
	}
	got := ended["decision_record"].(map[string]any)["approvals"].([]any)
	if len(got) != 1 || got[0].(map[string]any)["decision"] != "denied" || got[0].(map[string]any)["approver"] != lead.sub {
		t.Errorf("the run's record approvals %v", got)
	}
	if keys, _ := e.payments.Counts(); len(keys) != 0 {
		t.Errorf("a denied refund reached payments %d times", len(keys))
	}
	// The inbox's records page says who denied it, and why.
	r := e.do("GET", "/inbox/runs/"+runID+"/records", e.token(lead), nil)
	want := `GATE_FINANCE_APPROVAL <span data-testid="denied">denied</span> by <strong>user_finance_lead_77</strong> (finance_lead) at 2026-05-04T09:36:00Z — “card [REDACTED] is not the customer&#39;s”`
	if r.status != http.StatusOK || !strings.Contains(string(r.body), want) || strings.Contains(string(r.body), cardNumber) {
		t.Errorf("records page %d lacks %s:\n%s", r.status, want, r.body)
	}
	// The run's page says who decided and why, redacted as the record
	// keeps it: no page shows the card number.
	r = e.do("GET", "/inbox/runs/"+runID, e.token(lead), nil)
	if r.status != http.StatusOK || !strings.Contains(string(r.body), `data-testid="decided"`) || strings.Contains(string(r.body), cardNumber) {
		t.Errorf("run page %d shows the card number or no decision:\n%s", r.status, r.body)
	}
}
