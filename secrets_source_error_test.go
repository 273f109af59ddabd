package contextos_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/compiler"
	"github.com/contextos/contextos/contextostest"
)

// errSourceDown is the cause an evidence source or memory store returns.
var errSourceDown = errors.New("source down")

type failingEvidence struct{ msg string }

func (e failingEvidence) Evidence(context.Context, compiler.EvidenceQuery) ([]compiler.EvidenceItem, error) {
	return nil, errors.New(e.msg + ": " + errSourceDown.Error())
}

type failingRecall struct {
	rawMemory
	msg string
}

func (m failingRecall) Recall(context.Context, compiler.MemoryQuery) ([]compiler.MemoryItem, error) {
	return nil, errors.Join(errors.New(m.msg), errSourceDown)
}

// An evidence source's or a memory store's error is text from outside
// the run (a driver's error quoting its connection string, an upstream's
// body): the error the run returns, which a service passes on to its
// caller (the server's 422), carries it with every built-in rule applied,
// as a logged error does, and still matches the source's own error.
// Found by review: TestNothingLeaksGeneratedRuns plants in the sources'
// contents, never in their errors.
func TestSourceErrorsQuoteNoSecret(t *testing.T) {
	secrets := []string{"sk-proj-sourceerrorsecret00000000001", "hunter2pw", "4111111111111111", "DE89370400440532013000", "ops.lead@example.org"}
	msg := "dial postgres://admin:hunter2pw@db.internal/kg failed; api_key=" + secrets[0] + " card " + secrets[2] + " iban " + secrets[3] + " owner " + secrets[4]
	for _, which := range []string{"evidence", "memory"} {
		t.Run(which, func(t *testing.T) {
			var o contextos.Options
			if which == "evidence" {
				o.Evidence = failingEvidence{msg}
			} else {
				o.Memory = failingRecall{newRawMemory(), msg}
			}
			h := bareHarness(t, contextostest.NewPlanner(lookupPlan()), &contextostest.Options{Runtime: o})
			req, rc := refundRequest(t, 1200, true)
			_, err := h.Runtime.Invoke(context.Background(), req, rc)
			if !errors.Is(err, compiler.ErrEvidence) {
				t.Fatalf("Invoke = %v, want compiler.ErrEvidence", err)
			}
			if which == "memory" && !errors.Is(err, errSourceDown) {
				t.Errorf("Invoke = %v: the store's own error no longer matches", err)
			}
			for _, s := range secrets {
				if strings.Contains(err.Error(), s) {
					t.Errorf("the run's error quotes %q: %v", s, err)
				}
			}
			if !strings.Contains(err.Error(), "failed") {
				t.Errorf("the run's error lost the source's words: %v", err)
			}
		})
	}
}
