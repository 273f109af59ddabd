package server_test

import (
	"bytes"
	"net/http"
	"testing"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/server"
)

// The pending approvals a handler shows are redacted by its own rules too
// (its Options.Redactors, also the runtime's Gateway.Redactors), whatever
// the run's pack activated: GET /v1/approvals, the inbox's list and the
// run's page show the paused call's arguments without what a host rule
// redacts, as the run's events and view do.
func TestPendingApprovalsRedactedByTheHandlersRules(t *testing.T) {
	rules := map[string]gateway.Redactor{"ticket": ticketRule}
	e := newEnv(t, &envOptions{note: "refund for " + ticketRef, handler: server.Options{Redactors: rules},
		runtime: func(o *contextos.Options) { o.Gateway.Redactors = rules }})
	runID := e.startPaused("req_pending_host_rules")
	if v := e.do("GET", "/v1/runs/"+runID, e.token(agent), nil); v.status != http.StatusOK || bytes.Contains(v.body, []byte(ticketRef)) {
		t.Fatalf("the run's view: %d, shows the ticket %d times", v.status, bytes.Count(v.body, []byte(ticketRef)))
	}
	for _, path := range []string{"/v1/approvals", "/inbox", "/inbox/runs/" + runID} {
		r := e.do("GET", path, e.token(lead), nil)
		if r.status != http.StatusOK || !bytes.Contains(r.body, []byte("amount_inr")) {
			t.Errorf("%s: %d, lists no paused refund: %s", path, r.status, r.body)
			continue
		}
		if bytes.Contains(r.body, []byte(ticketRef)) {
			t.Errorf("%s shows a value the handler's rules redact (%d times)", path, bytes.Count(r.body, []byte(ticketRef)))
		}
	}
}
