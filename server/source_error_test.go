package server_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/compiler"
	"github.com/contextos/contextos/server"
)

type failingEvidence struct{ msg string }

func (e failingEvidence) Evidence(context.Context, compiler.EvidenceQuery) ([]compiler.EvidenceItem, error) {
	return nil, errors.New(e.msg)
}

// A run refused because its evidence source failed is answered 422 with
// the refusal's words, which quote the source's error: a driver's error
// that quotes its connection string, or an upstream body with a key,
// card or email in it, reaches the HTTP caller with every built-in rule
// applied, never as the source wrote it. Found by review.
func TestRefusalQuotesNoSourceSecret(t *testing.T) {
	secrets := []string{"sk-proj-serversourceerror000000000001", "hunter2pw", cardNumber, "DE89370400440532013000", "ops.lead@example.org"}
	msg := "dial postgres://admin:hunter2pw@db.internal/kg: api_key=" + secrets[0] + " card " + cardNumber + " iban " + secrets[3] + " owner " + secrets[4]
	e := newEnv(t, &envOptions{runtime: func(o *contextos.Options) { o.Evidence = failingEvidence{msg} }})
	r := e.do("POST", "/v1/runs", e.token(agent), refundBody(t, "req_src_err_1", 1200))
	m := r.problem(t, http.StatusUnprocessableEntity, server.CodeRunRefused)
	detail, _ := m["detail"].(string)
	if !strings.Contains(detail, "evidence") {
		t.Errorf("detail %q does not name the evidence source", detail)
	}
	for _, s := range secrets {
		if strings.Contains(string(r.body), s) {
			t.Errorf("the 422 quotes %q: %s", s, r.body)
		}
	}
}
