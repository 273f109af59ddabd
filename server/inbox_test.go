package server_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/contextos/contextos/server"
)

// form posts a form to path with hdr.
func (e *env) form(path, tok string, values url.Values, hdr ...string) response {
	e.t.Helper()
	req, err := http.NewRequest("POST", e.srv.URL+path, strings.NewReader(values.Encode()))
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	buf := make([]byte, 32<<10)
	for {
		n, err := resp.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			break
		}
	}
	return response{status: resp.StatusCode, header: resp.Header, body: []byte(b.String())}
}

func contains(t *testing.T, what string, body []byte, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(string(body), w) {
			t.Errorf("%s lacks %q", what, w)
		}
	}
}

// The inbox: the lead's list shows the paused refund with its arguments
// redacted, the agent's is empty; the run's page shows what the decision
// is about; a cross-origin form post is refused; the lead's approval
// redirects back, a second is refused, and the records page shows the
// lead's approval and a verified chain. No page shows the card number.
func TestInbox(t *testing.T) {
	e := newEnv(t, nil)
	runID := e.startPaused("req_inbox_1")

	r := e.do("GET", "/inbox", e.token(lead), nil)
	if r.status != http.StatusOK || !strings.HasPrefix(r.header.Get("Content-Type"), "text/html") {
		t.Fatalf("inbox: %d %s", r.status, r.body)
	}
	contains(t, "the lead's inbox", r.body, runID, "adp_payments.issue_refund", "amount_inr", "4200", "[REDACTED", "GATE_FINANCE_APPROVAL", "2h 00m left", "user_finance_lead_77")
	csp := r.header.Get("Content-Security-Policy")
	if !strings.Contains(csp, "default-src 'none'") || strings.Contains(csp, "script-src") || r.header.Get("X-Frame-Options") != "DENY" {
		t.Errorf("inbox headers: %v", r.header)
	}
	if strings.Contains(strings.ToLower(string(r.body)), "<script") {
		t.Error("the inbox page holds a script")
	}
	r = e.do("GET", "/inbox", e.token(agent), nil)
	contains(t, "the agent's inbox", r.body, `data-testid="empty"`)
	if strings.Contains(string(r.body), runID) {
		t.Error("the agent's inbox lists the run")
	}

	r = e.do("GET", "/inbox/runs/"+runID, e.token(lead), nil)
	if r.status != http.StatusOK {
		t.Fatalf("run page: %d %s", r.status, r.body)
	}
	contains(t, "the run page", r.body, runID, tenant, "GATE_FINANCE_APPROVAL", "finance_lead", "adp_payments.issue_refund", "sha256:",
		"tool:adp_orders.lookup", "awaiting approval on GATE_FINANCE_APPROVAL", "R_HIGH_VALUE_REQUIRES_APPROVAL", "2h 00m left", `data-testid="approve"`, `data-testid="deny"`)
	r = e.do("GET", "/inbox/runs/"+runID, e.token(agent), nil)
	contains(t, "the agent's run page", r.body, "needs the role finance_lead")
	if strings.Contains(string(r.body), `data-testid="approve"`) {
		t.Error("the agent's page offers Approve")
	}

	decide := url.Values{"decision": {"approve"}, "reason": {"within policy"}, "action_digest": {e.lastPause(runID)}}
	path := "/inbox/runs/" + runID + "/approvals/GATE_FINANCE_APPROVAL"
	for name, hdr := range map[string][]string{
		"cross-site fetch": {"Sec-Fetch-Site", "cross-site"},
		"foreign origin":   {"Origin", "https://evil.example"},
	} {
		if r := e.form(path, e.token(lead), decide, hdr...); r.status != http.StatusForbidden || !strings.Contains(string(r.body), server.RuleCrossOrigin) {
			t.Errorf("%s: %d %s", name, r.status, r.body)
		}
	}
	// The API's POSTs are protected the same way (a proxy may add the
	// token to a forged request).
	if r := e.do("POST", "/v1/runs/"+runID+"/approvals/GATE_FINANCE_APPROVAL", e.token(lead), []byte(`{"decision":"approve","action_digest":"`+decide.Get("action_digest")+`"}`), "Sec-Fetch-Site", "cross-site"); r.status != http.StatusForbidden {
		t.Errorf("cross-site API decision: %d %s", r.status, r.body)
	}

	r = e.form(path, e.token(lead), decide, "Sec-Fetch-Site", "same-origin")
	if r.status != http.StatusSeeOther || r.header.Get("Location") != "/inbox/runs/"+runID+"?decided=approve" {
		t.Fatalf("approve: %d %v %s", r.status, r.header, r.body)
	}
	if m := e.waitEnded(runID); m["status"] != "DECIDED" {
		t.Fatalf("run ended %v", m["status"])
	}
	r = e.form(path, e.token(lead2), decide, "Sec-Fetch-Site", "same-origin")
	if r.status != http.StatusConflict {
		t.Errorf("second approval: %d", r.status)
	}
	contains(t, "the second approval's page", r.body, `data-code="already_decided"`)

	r = e.do("GET", "/inbox/runs/"+runID+"?decided=approve", e.token(lead), nil)
	contains(t, "the decided run's page", r.body, "Approved.", `data-testid="decided"`, "user_finance_lead_77", "within policy", "DECIDED")
	r = e.do("GET", "/inbox/runs/"+runID+"/records", e.token(lead), nil)
	contains(t, "the records page", r.body, "Chain verified", `data-status="DECIDED"`, `data-status="DEFERRED"`, "by <strong>user_finance_lead_77</strong>")
	for _, p := range []string{"/inbox", "/inbox/runs/" + runID, "/inbox/runs/" + runID + "/records"} {
		if r := e.do("GET", p, e.token(lead), nil); strings.Contains(string(r.body), cardNumber) {
			t.Errorf("%s shows the card number", p)
		}
	}
	e.payments.AssertOneEffect(t, 1)
}

// Signing in directly keeps the token in an HttpOnly, SameSite=Strict
// cookie that the inbox pages honour and the API does not; a bad token
// is refused; signing out clears it.
func TestInboxSignIn(t *testing.T) {
	e := newEnv(t, nil)
	if r := e.do("GET", "/inbox", "", nil); r.status != http.StatusUnauthorized || !strings.Contains(string(r.body), "/inbox/signin") {
		t.Fatalf("inbox without a token: %d %s", r.status, r.body)
	}
	if r := e.do("GET", "/inbox/signin", "", nil); r.status != http.StatusOK {
		t.Fatalf("sign-in page: %d", r.status)
	}
	if r := e.form("/inbox/signin", "", url.Values{"token": {"nope.nope.nope"}}); r.status != http.StatusUnauthorized {
		t.Errorf("sign in with a bad token: %d", r.status)
	}
	tok := e.token(lead)
	r := e.form("/inbox/signin", "", url.Values{"token": {tok}})
	if r.status != http.StatusSeeOther || r.header.Get("Location") != "/inbox" {
		t.Fatalf("sign in: %d %v", r.status, r.header)
	}
	c := r.header.Get("Set-Cookie")
	for _, want := range []string{"contextos_session=", "HttpOnly", "SameSite=Strict", "Path=/inbox"} {
		if !strings.Contains(c, want) {
			t.Errorf("cookie %q lacks %s", c, want)
		}
	}
	cookie := strings.SplitN(c, ";", 2)[0]
	if r := e.do("GET", "/inbox", "", nil, "Cookie", cookie); r.status != http.StatusOK || !strings.Contains(string(r.body), lead.sub) {
		t.Errorf("inbox with the cookie: %d", r.status)
	}
	e.do("GET", "/v1/approvals", "", nil, "Cookie", cookie).problem(t, http.StatusUnauthorized, server.CodeUnauthenticated)
	r = e.form("/inbox/signout", "", nil, "Cookie", cookie)
	if r.status != http.StatusSeeOther || !strings.Contains(r.header.Get("Set-Cookie"), "Max-Age=0") {
		t.Errorf("sign out: %d %v", r.status, r.header)
	}
}

// Unknown paths and methods are problems too.
func TestNotFoundAndMethods(t *testing.T) {
	e := newEnv(t, nil)
	e.do("GET", "/v2/runs", e.token(lead), nil).problem(t, http.StatusNotFound, server.CodeNotFound)
	r := e.do("DELETE", "/v1/runs", e.token(lead), nil)
	r.problem(t, http.StatusMethodNotAllowed, server.CodeMethodNotAllowed)
	if r.header.Get("Allow") != "POST" {
		t.Errorf("Allow %q", r.header.Get("Allow"))
	}
	e.do("GET", "/v1/runs/run_nope", e.token(lead), nil).problem(t, http.StatusNotFound, server.CodeNotFound)
	e.do("GET", "/v1/records/dr_nope", e.token(lead), nil).problem(t, http.StatusNotFound, server.CodeNotFound)
	e.do("GET", "/v1/records?limit=0", e.token(lead), nil).problem(t, http.StatusBadRequest, server.CodeInvalidRequest)
	e.do("GET", "/v1/records?status=DONE", e.token(lead), nil).problem(t, http.StatusBadRequest, server.CodeInvalidRequest)
	e.do("GET", "/v1/records?tenant_id=tenant_other", e.token(lead), nil).problem(t, http.StatusBadRequest, server.CodeInvalidRequest)
	e.do("GET", "/v1/records/verify?run_id=run_nope", e.token(lead), nil).problem(t, http.StatusNotFound, server.CodeNotFound)
	if r := e.do("GET", "/v1/records/verify", e.token(lead), nil); r.status != http.StatusOK || r.json(t)["verified"] != true {
		t.Errorf("verify an empty store: %d %s", r.status, r.body)
	}
}
