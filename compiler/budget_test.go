package compiler_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/contextos/contextos/compiler"
	"github.com/contextos/contextos/pack"
	"github.com/contextos/contextos/policy"
	"github.com/contextos/contextos/runcontext"
)

func setRule(s *scenario, ruleID, expr string) {
	for bi := range s.pack.PolicyLayer.PolicyBundles {
		rules := s.pack.PolicyLayer.PolicyBundles[bi].PolicyDSL.Rules
		for ri := range rules {
			if rules[ri].RuleID == ruleID {
				rules[ri].If = json.RawMessage(expr)
			}
		}
	}
}

// TestPolicyBudget: the compiler evaluates policy within a budget; a
// request whose data makes a rule's evaluation too costly fails closed at
// stage 5 naming the rule, and the host can set the budget.
func TestPolicyBudget(t *testing.T) {
	items := make([]any, 1_000_000)
	for i := range items {
		items[i] = float64(i)
	}
	s := canonicalScenario(t)
	setRule(s, "R_HIGH_VALUE_REQUIRES_APPROVAL", `{"some":[{"var":"request.context.items"},{"<":[{"var":""},0]}]}`)
	s.req.Input.Context["items"] = items
	// The request context is compiled into the session bucket whole: it
	// gets room for the items.
	s.rc.RunBudget.BucketTokens[runcontext.BucketSession] = 10_000_000
	_, err := compiler.Compile(ctx, s.inputs(), s.req, s.rc, &s.opts)
	var ce *compiler.Error
	if !errors.As(err, &ce) || ce.Stage != 5 || !errors.Is(err, compiler.ErrPolicy) || !errors.Is(err, policy.ErrBudget) || !strings.Contains(err.Error(), "R_HIGH_VALUE_REQUIRES_APPROVAL") {
		t.Fatalf("Compile = %v", err)
	}
	s.opts.Policy = policy.Options{MaxOperations: 10_000_000, MaxBytes: 1 << 26}
	if _, err := compiler.Compile(ctx, s.inputs(), s.req, s.rc, &s.opts); err != nil {
		t.Fatalf("with a raised budget: %v", err)
	}
}

// TestPolicyTooDeep: an expression over the static budget is refused when
// the packs are prepared, naming the rule's path.
func TestPolicyTooDeep(t *testing.T) {
	s := canonicalScenario(t)
	setRule(s, "R_HIGH_VALUE_REQUIRES_APPROVAL", strings.Repeat(`{"!":`, 100)+"true"+strings.Repeat("}", 100))
	_, err := compiler.Prepare(s.inputs(), &s.opts)
	var ve *pack.ValidationError
	if !errors.As(err, &ve) || !strings.Contains(err.Error(), "policy_layer.policy_bundles[0].policy_dsl.rules[1].if") || !strings.Contains(err.Error(), "nested too deeply") {
		t.Fatalf("Prepare = %v", err)
	}
}
