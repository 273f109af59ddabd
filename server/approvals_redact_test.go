package server_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"go.uber.org/goleak"

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

// The pause webhook redacts the paused call's arguments by the same
// rules as the handler's answers (WebhookOptions.Redactors), whatever the
// run's pack activated: an event shows no more than the inbox does.
func TestWebhookRedactedByTheHostsRules(t *testing.T) {
	leaks := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, leaks) })
	rules := map[string]gateway.Redactor{"ticket": ticketRule}
	bodies := make(chan []byte, 4)
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		bodies <- b
		w.WriteHeader(http.StatusNoContent)
	}))
	defer recv.Close()
	wh, err := server.NewWebhook(recv.URL, make([]byte, 32), &server.WebhookOptions{Redactors: rules})
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, &envOptions{note: "refund for " + ticketRef, handler: server.Options{Redactors: rules},
		runtime: func(o *contextos.Options) { o.Gateway.Redactors = rules; o.OnPause = wh.Notify }})
	e.startPaused("req_webhook_host_rules")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var body []byte
	select {
	case body = <-bodies:
	case <-ctx.Done():
		t.Fatal("no event delivered")
	}
	if err := wh.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(body, []byte("amount_inr")) {
		t.Fatalf("the event holds no paused refund: %s", body)
	}
	if bytes.Contains(body, []byte(ticketRef)) || bytes.Contains(body, []byte(cardNumber)) {
		t.Errorf("the event shows a value the host's rules redact: %s", body)
	}
}
