package temporalrun

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"go.temporal.io/sdk/testsuite"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/internal/engine"
)

// A planner's or an adapter's error text may carry a secret (an upstream
// error with a key in it). The runtime keeps it out of its records; the
// activity's answer, which the workflow's history keeps in the clear,
// carries none of it either.
func TestActivityAnswersCarryNoErrorText(t *testing.T) {
	const secret = "sk-live-0123456789abcdef"
	fail := errors.New("upstream said 401 for key " + secret)
	h := &Host{
		cfg: Config{Planner: contextos.PlannerFunc(func(context.Context, *contextos.PlanRequest) (*contextos.Plan, error) { return nil, fail })},
		adapters: map[string]gateway.Adapter{"adp": gateway.AdapterFunc(func(context.Context, *gateway.Call) (*gateway.Outcome, error) {
			return nil, fail
		})},
	}
	var s testsuite.WorkflowTestSuite
	env := s.NewTestActivityEnvironment()
	env.RegisterActivity(h.plan)
	env.RegisterActivity(h.attempt)

	wire, err := engine.EncodePlanRequest(&engine.PlanRequest{})
	if err != nil {
		t.Fatal(err)
	}
	v, err := env.ExecuteActivity(h.plan, wire)
	if err != nil {
		t.Fatal(err)
	}
	var pa planAnswer
	if err := v.Get(&pa); err != nil {
		t.Fatal(err)
	}
	if pa.Error == "" || strings.Contains(pa.Error, secret) {
		t.Errorf("plan answer error = %q, want a failure without the planner's words", pa.Error)
	}

	v, err = env.ExecuteActivity(h.attempt, attemptCall{AdapterID: "adp", Call: &gateway.Call{Capability: "c"}})
	if err != nil {
		t.Fatal(err)
	}
	var aa attemptAnswer
	if err := v.Get(&aa); err != nil {
		t.Fatal(err)
	}
	if aa.Error == "" || strings.Contains(aa.Error, secret) {
		t.Errorf("attempt answer error = %q, want a failure without the adapter's words", aa.Error)
	}
}

// A tool error is the adapter's error text too: its message and details
// reach the workflow's history as the adapter wrote them, a key included,
// though temporal.md says the history holds no adapter's error text.
func TestActivityToolErrorCarriesNoSecret(t *testing.T) {
	const secret = "sk-live-0123456789abcdef"
	h := &Host{adapters: map[string]gateway.Adapter{"adp": gateway.AdapterFunc(func(context.Context, *gateway.Call) (*gateway.Outcome, error) {
		return nil, gateway.NewToolError(gateway.CodeExecutionFailed, true, "upstream said 401 for key "+secret, map[string]any{"key": secret})
	})}}
	var s testsuite.WorkflowTestSuite
	env := s.NewTestActivityEnvironment()
	env.RegisterActivity(h.attempt)
	v, err := env.ExecuteActivity(h.attempt, attemptCall{AdapterID: "adp", Call: &gateway.Call{Capability: "c"}})
	if err != nil {
		t.Fatal(err)
	}
	var aa attemptAnswer
	if err := v.Get(&aa); err != nil {
		t.Fatal(err)
	}
	if aa.ToolError == nil || strings.Contains(aa.ToolError.Message, secret) || strings.Contains(fmt.Sprint(aa.ToolError.Details), secret) {
		t.Errorf("attempt answer tool error = %+v, want one without the adapter's key", aa.ToolError)
	}
	if !aa.Redacted || aa.ToolError.Code != gateway.CodeExecutionFailed || !aa.ToolError.Retryable {
		t.Errorf("attempt answer = %+v: want the redaction reported and the error's code and retryability kept", aa)
	}
}

// A failed attempt's outcome reaches the history as what the gateway
// reads of it, its cost and tokens: its output (a card number in it
// here) does not, whether the adapter failed with a tool error or a plain
// error.
func TestFailedAttemptOutcomeKeepsOnlyItsSpend(t *testing.T) {
	const card = "4111111111111111"
	for name, fail := range map[string]error{
		"tool error":  gateway.NewToolError(gateway.CodeExecutionFailed, true, "upstream failed", nil),
		"plain error": errors.New("upstream failed"),
	} {
		t.Run(name, func(t *testing.T) {
			h := &Host{adapters: map[string]gateway.Adapter{"adp": gateway.AdapterFunc(func(context.Context, *gateway.Call) (*gateway.Outcome, error) {
				return &gateway.Outcome{Output: map[string]any{"card": card}, Signals: []string{"s"}, CostCents: 3, Tokens: 5}, fail
			})}}
			var s testsuite.WorkflowTestSuite
			env := s.NewTestActivityEnvironment()
			env.RegisterActivity(h.attempt)
			v, err := env.ExecuteActivity(h.attempt, attemptCall{AdapterID: "adp", Call: &gateway.Call{Capability: "c"}})
			if err != nil {
				t.Fatal(err)
			}
			var aa attemptAnswer
			if err := v.Get(&aa); err != nil {
				t.Fatal(err)
			}
			if aa.Outcome == nil || aa.Outcome.CostCents != 3 || aa.Outcome.Tokens != 5 || aa.Outcome.Output != nil || aa.Outcome.Signals != nil {
				t.Errorf("the answer's outcome = %+v, want its cost and tokens only", aa.Outcome)
			}
		})
	}
}
