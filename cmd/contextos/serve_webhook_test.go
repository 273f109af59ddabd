package main

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// contextos serve's pause webhook redacts the paused call's arguments by
// the --redactors rules too, as its API and inbox do, though the run's
// pack does not name them: the fixture pack activates no host rule, and
// the order id, which the host rule redacts, reaches no event.
func TestServeWebhookRedactedByTheRedactorsFlag(t *testing.T) {
	dir := t.TempDir()
	key, flags := serveFiles(t, dir)
	bodies := make(chan []byte, 8)
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		bodies <- b
		w.WriteHeader(http.StatusNoContent)
	}))
	defer recv.Close()
	whsec := writeFile(t, dir, "wh.secret", []byte("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"))
	rules := writeFile(t, dir, "redactors.json", []byte(`{"order_ref": "ord_[0-9]+"}`))
	svc := startServeProc(t, append(flags, "--webhook", recv.URL+"/hook", "--webhook-secret", whsec, "--redactors", rules, "--store", "sqlite:"+dir+"/serve.db")...)
	agent := hsToken(t, key, "agent_17", "tenant_acme_prod", "support_agent")
	code, run := call(t, "POST", svc.url+"/v1/runs", agent, refundRunBody(t, "req_webhook_redactors"))
	if code != http.StatusOK || run["state"] != "paused" {
		t.Fatalf("POST /v1/runs: %d %v\n%s", code, run, svc.log())
	}
	var body []byte
	select {
	case body = <-bodies:
	case <-time.After(30 * time.Second):
		t.Fatalf("no event delivered\n%s", svc.log())
	}
	if !bytes.Contains(body, []byte("amount_inr")) {
		t.Fatalf("the event holds no paused refund: %s", body)
	}
	if bytes.Contains(body, []byte("ord_881")) {
		t.Errorf("the event shows the order id the --redactors rule redacts: %s", body)
	}
}
