package agent_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/agent"
	"github.com/contextos/contextos/schemas"
)

func TestParsePlan(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, text string
		steps      int
		decision   bool
		why        string // a prefix of the reason ("" for a valid plan)
	}{
		{"bare", readStep, 1, false, ""},
		{"fenced json", fencedAnswer, 1, false, ""},
		{"bare fence", "```\n" + abandonPlan + "\n```", 0, true, ""},
		{"spaces", "\n\t " + abandonPlan + " \n", 0, true, ""},
		{"both", `{"steps":[{"capability_id":"a.b","args":{"x":[1,2]}}],"decision":{"decision_key":"k","outcome":"o"}}`, 1, true, ""},
		{"empty", "", 0, false, "invalid_plan: the answer holds no JSON plan"},
		{"empty fence", "```json\n```", 0, false, "invalid_plan: the answer holds no JSON plan"},
		{"prose", "I would read the file first.", 0, false, "invalid_plan: the answer does not match plan.v1: (document): not a JSON document (syntax)"},
		{"other language fence", "```go\nfunc main() {}\n```", 0, false, "invalid_plan: the answer does not match plan.v1: (document): not a JSON document"},
		{"unclosed fence", "```json\n" + readStep, 0, false, "invalid_plan: the answer does not match plan.v1: (document): not a JSON document"},
		{"no steps nor decision", `{}`, 0, false, "invalid_plan: the answer does not match plan.v1: (document): missing property"},
		{"usage claimed", `{"decision":{"decision_key":"k","outcome":"o"},"usage":{"tokens":0}}`, 0, false, "invalid_plan: the answer does not match plan.v1: (document): additional properties 'usage' not allowed (additionalProperties)"},
		{"args missing", `{"steps":[{"capability_id":"a.b"}]}`, 0, false, "invalid_plan: the answer does not match plan.v1: /steps/0: missing property 'args' (required)"},
		{"two documents", readStep + readStep, 0, false, "invalid_plan: the answer does not match plan.v1: (document): not a JSON document"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			p, why := agent.ParsePlan(c.text)
			if c.why != "" {
				if p != nil || !strings.HasPrefix(why, c.why) {
					t.Fatalf("plan %v, why %q; want the reason %q", p, why, c.why)
				}
				return
			}
			if why != "" || p == nil {
				t.Fatalf("refused: %s", why)
			}
			if len(p.Steps) != c.steps || (p.Decision != nil) != c.decision {
				t.Errorf("plan %+v", p)
			}
		})
	}
}

// A plan that calls a tool no run surfaces is still a plan: refusing it is
// the critic's and the gateway's work.
func TestParsePlanDoesNotJudgeTools(t *testing.T) {
	p, why := agent.ParsePlan(`{"steps":[{"capability_id":"adp_payments.issue_refund","args":{"amount":1e9}}]}`)
	if why != "" || p.Steps[0].CapabilityID != "adp_payments.issue_refund" {
		t.Fatalf("%v %q", p, why)
	}
}

// The reason is bounded, however many problems the answer has.
func TestParsePlanReasonIsBounded(t *testing.T) {
	steps := make([]string, 900)
	for i := range steps {
		steps[i] = `{"capability_id":"` + strings.Repeat("x", 50) + `"}`
	}
	_, why := agent.ParsePlan(`{"steps":[` + strings.Join(steps, ",") + `]}`)
	if len(why) > 2048 || !strings.HasSuffix(why, agent.TruncatedSuffix) {
		t.Fatalf("reason of %d bytes", len(why))
	}
}

// FuzzParsePlan: any text is a plan that validates against plan.v1 when
// re-encoded, or a bounded reason; never a panic.
func FuzzParsePlan(f *testing.F) {
	for _, s := range []string{readStep, fencedAnswer, abandonPlan, "", "```json\n{}\n```", "```", "{\"steps\":[{\"capability_id\":\"a.b\",\"args\":{}}]}", "\xff\xfe"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		p, why := agent.ParsePlan(text)
		if p == nil {
			if why == "" || len(why) > 2048 {
				t.Fatalf("no plan, reason %q", why)
			}
			return
		}
		if why != "" {
			t.Fatalf("a plan and a reason %q", why)
		}
		b, err := json.Marshal(struct {
			Steps    []contextos.Step            `json:"steps,omitempty"`
			Decision *contextos.DecisionProposal `json:"decision,omitempty"`
		}{p.Steps, p.Decision})
		if err != nil {
			t.Fatal(err)
		}
		if err := schemas.Validate("plan.v1", b); err != nil {
			t.Fatalf("the parsed plan %s does not validate: %v", b, err)
		}
	})
}
