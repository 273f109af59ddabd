package contextos_test

import (
	"context"
	"strings"
	"testing"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/contextostest"
	"github.com/contextos/contextos/decision"
)

// continueCritic scores every plan as a replan whose reason has the words
// of the built-in critic's "no decision yet" judgement.
type continueCritic struct{}

func (continueCritic) Verify(context.Context, *contextos.CriticInput) (contextos.Judgement, error) {
	return contextos.Judgement{Verdict: contextos.VerdictOK}, nil
}

func (continueCritic) Score(context.Context, *contextos.CriticInput) (contextos.Judgement, error) {
	return contextos.Judgement{Verdict: contextos.VerdictReplan, Reason: "continue: no decision proposed yet"}, nil
}

// The loop decides on typed values, not on a reason's words: a host
// critic's replan counts against max_replan_attempts whatever its reason
// says, so a reason spelled like the built-in "continue" does not let a
// run replan past its budget.
func TestHostReplanSpelledLikeContinueCountsAsReplan(t *testing.T) {
	h := harness(t, contextostest.NewPlanner(lookupPlan(), refundPlan(1200)).RepeatLast(),
		&contextostest.Options{Runtime: contextos.Options{Critic: continueCritic{}}})
	req, rc := refundRequest(t, 1200, true)
	res := h.Invoke(req, rc)
	contextostest.AssertStatus(t, res, decision.Escalated)
	if got := res.Record.Rationale.Summary; !strings.Contains(got, "replans exhausted") {
		t.Errorf("rationale = %q, want the replan budget exhausted", got)
	}
}
