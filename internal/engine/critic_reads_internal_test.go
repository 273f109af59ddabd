package engine

import (
	"reflect"
	"strings"
	"testing"

	"github.com/contextos/contextos/decision"
	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/internal/deepcheck"
	"github.com/contextos/contextos/policy"
)

// TestBuiltinCriticEditsNothing: the built-in critic is given the run's
// own policy evaluation, as the gateway enforces and the record cites it
// (run.runPolicy, no copy), with the run's facts and its critic input;
// scoring a plan by any of its paths leaves every member they reach as it
// was. Each value is filled (deepcheck.Fill) and compared with a twin
// filled and set the same way.
func TestBuiltinCriticEditsNothing(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		set  func(in *CriticInput, pol *policy.Evaluation, facts *decision.Facts)
		want string // the verdict's reason starts with it
	}{
		{"no decision yet", func(in *CriticInput, _ *policy.Evaluation, _ *decision.Facts) {
			in.Plan.Decision, in.Results = nil, nil
		}, reasonContinue},
		{"a step failed", func(in *CriticInput, _ *policy.Evaluation, _ *decision.Facts) {
			in.Results[0].Turn = in.Turn
			in.Results[0].Result.Status = gateway.StatusFailed
			in.Results[0].Result.Error.Retryable = false
		}, "s failed (s)"},
		{"a deny bound to the decision", func(in *CriticInput, pol *policy.Evaluation, _ *decision.Facts) {
			in.Results = nil
			pol.Decisions = append(pol.Decisions, pol.Decisions[0].Clone())
			pol.Decisions[1].Outcome, pol.Decisions[1].DecisionBinding = policy.Deny, in.Plan.Decision.DecisionKey
		}, "violates_decision_spec: policy rule s denied s"},
		{"evidence missing", func(in *CriticInput, _ *policy.Evaluation, facts *decision.Facts) {
			in.Results = nil
			facts.Admitted, facts.RequestContext, facts.ToolResults = nil, nil, nil
		}, "missing_evidence: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			filled := func() (*CriticInput, *policy.Evaluation, *decision.Facts) {
				var (
					in    CriticInput
					pol   policy.Evaluation
					facts decision.Facts
				)
				for _, v := range []any{&in, &pol, &facts} {
					deepcheck.Fill(reflect.ValueOf(v).Elem())
				}
				// The plan decides the pack's decision, with an outcome
				// that is neither a refusal nor an escalation.
				spec := &in.Pack.DecisionLayer.DecisionSpecs[0]
				spec.RefusalOutcomes, spec.EscalationOutcomes = []string{"denied"}, []string{"escalated"}
				facts.Pack = in.Pack
				tc.set(&in, &pol, &facts)
				return &in, &pol, &facts
			}
			in, pol, facts := filled()
			wantIn, wantPol, wantFacts := filled()
			j, _ := builtinCritic{}.score(in, pol, facts)
			if !strings.HasPrefix(j.Reason, tc.want) {
				t.Fatalf("score = %+v, want a reason starting %q", j, tc.want)
			}
			for _, c := range []struct {
				name      string
				got, want any
			}{{"critic input", in, wantIn}, {"policy evaluation", pol, wantPol}, {"facts", facts, wantFacts}} {
				if !reflect.DeepEqual(c.got, c.want) {
					t.Errorf("score changed the %s it read", c.name)
				}
			}
		})
	}
}
