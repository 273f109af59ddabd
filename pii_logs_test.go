package contextos_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"testing"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/contextostest"
	"github.com/contextos/contextos/decision"
)

// Personal data a plug-in's error carries (a card number, an IBAN, an
// email address): the planner's and the host critic's own words go to the
// log, and reach it with every built-in rule applied, as an approver's
// reason is kept. Found by TestNothingLeaksGeneratedRuns.
func TestPluginErrorPersonalDataNotLogged(t *testing.T) {
	const words = "upstream said: card 4111 1111 1111 1111, iban DE89370400440532013000, mail jane.doe@example.com"
	leaked := []string{"4111 1111 1111 1111", "DE89370400440532013000", "jane.doe@example.com"}
	cases := map[string]contextos.Options{
		"planner error": {},
		"critic error":  {Critic: failingCritic{errors.New(words)}},
	}
	for name, opts := range cases {
		t.Run(name, func(t *testing.T) {
			var logs bytes.Buffer
			opts.Logger = slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
			p := contextos.PlannerFunc(func(context.Context, *contextos.PlanRequest) (*contextos.Plan, error) {
				if opts.Critic == nil {
					return nil, errors.New(words)
				}
				return lookupPlan(), nil
			})
			h := harness(t, p, &contextostest.Options{Runtime: opts})
			res := h.Invoke(refundRequest(t, 1200, true))
			if res.Status != decision.Escalated {
				t.Fatalf("run %s, want it stopped by the failure", res.Status)
			}
			if logs.Len() == 0 {
				t.Fatal("nothing logged")
			}
			for _, s := range leaked {
				if bytes.Contains(logs.Bytes(), []byte(s)) {
					t.Errorf("the log holds %q:\n%s", s, logs.String())
				}
			}
		})
	}
}

type failingCritic struct{ err error }

func (c failingCritic) Verify(context.Context, *contextos.CriticInput) (contextos.Judgement, error) {
	return contextos.Judgement{}, c.err
}

func (c failingCritic) Score(context.Context, *contextos.CriticInput) (contextos.Judgement, error) {
	return contextos.Judgement{}, c.err
}
