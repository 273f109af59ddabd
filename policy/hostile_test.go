package policy_test

import (
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/contextos/contextos/internal/fixture"
	"github.com/contextos/contextos/pack"
	"github.com/contextos/contextos/policy"
	"github.com/contextos/contextos/runcontext"
)

const (
	ruleIDV  = "R_REFUND_REQUIRES_IDV"          // then allow, else deny
	ruleHigh = "R_HIGH_VALUE_REQUIRES_APPROVAL" // then allow, destructive, gated
	gateFin  = "GATE_FINANCE_APPROVAL"
)

// What a hostile case must end in; every one is closed.
const (
	refusedBudget  = "prepare refuses it as over budget"
	refused        = "prepare refuses it"
	evalBudget     = "evaluation fails closed as over budget"
	evalTypeError  = "evaluation fails closed as a type error"
	denied         = "the rule denies"
	gateStaysOpen  = "the finance gate stays active"
	noCrashOrAllow = "evaluation ends without a crash and without allowing"
)

func nested(open, inner, close string, n int) string {
	return strings.Repeat(open, n) + inner + strings.Repeat(close, n)
}

func numbers(n int) []any {
	out := make([]any, n)
	for i := range out {
		out[i] = float64(i)
	}
	return out
}

func wideList(n int, item string) string {
	return "[" + strings.Repeat(item+",", n-1) + item + "]"
}

// TestHostilePolicies: hostile expressions and data documents never make
// the engine allow what it should not, crash it, or run without bound.
func TestHostilePolicies(t *testing.T) {
	t.Parallel()
	million := numbers(1_000_000)
	thousand := numbers(1000)
	selfRef := []any{"x", nil}
	selfRef[1] = selfRef
	deepData := any("leaf")
	for range 900 {
		deepData = map[string]any{"d": deepData}
	}

	cases := []struct {
		name  string
		where string // the rule or gate whose expression is replaced
		expr  string
		ctx   map[string]any // merged into request.context
		raw   map[string]any // set in the built document's request.context (not normalized)
		msg   string         // request.message, when set
		opts  *policy.Options
		want  string
	}{
		// Static budget: refused when the policy is prepared.
		{name: "100k-deep expression", where: ruleHigh, expr: nested(`{"!":`, `true`, `}`, 100_000), want: refusedBudget},
		{name: "100k-deep array literal", where: ruleHigh, expr: `{"in":[1,` + nested("[", "1", "]", 100_000) + `]}`, want: refusedBudget},
		{name: "65 nested operators", where: gateFin, expr: nested(`{"!!":[`, `true`, `]}`, 65), want: refusedBudget},
		{name: "and of 20,000 conditions", where: ruleHigh, expr: `{"and":` + wideList(20_000, `{"var":"user.role"}`) + `}`, want: refusedBudget},
		{name: "in over a 20,000-element literal", where: ruleHigh, expr: `{"in":[{"var":"user.role"},` + wideList(20_000, `"a"`) + `]}`, want: refusedBudget},
		{name: "constant reduce that doubles a string", where: ruleIDV, expr: `{"reduce":[` + wideList(64, "1") + `,{"cat":[{"var":"accumulator"},{"var":"accumulator"}]},"xx"]}`, want: refusedBudget},
		{name: "constant map of maps", where: ruleIDV, expr: `{"map":[` + wideList(3000, "1") + `,{"map":[` + wideList(3000, "1") + `,1]}]}`, want: refusedBudget},
		{name: "duplicate operator key in a rule", where: ruleHigh, expr: `{">":[{"var":"request.context.refund_amount"},3000],">":[0,1]}`, want: refused},
		{name: "duplicate var key in a gate", where: gateFin, expr: `{">":[{"var":"request.context.refund_amount","var":"request.context.zero"},3000]}`, want: refused},
		{name: "invalid UTF-8 in a rule literal", where: ruleHigh, expr: "{\"==\":[{\"var\":\"user.role\"},\"support\xffagent\"]}", want: refused},
		{name: "lone surrogate in a var path", where: ruleHigh, expr: `{"==":[{"var":"user.r\ud800ole"},"x"]}`, want: refused},
		// Evaluation budget: the rule or gate errors, the run gets no verdict.
		{name: "map over a million elements", where: ruleHigh, expr: `{"!!":[{"map":[{"var":"request.context.items"},{"+":[{"var":""},1]}]}]}`, ctx: map[string]any{"items": million}, want: evalBudget},
		{name: "filter over a million elements", where: ruleHigh, expr: `{"!!":[{"filter":[{"var":"request.context.items"},true]}]}`, ctx: map[string]any{"items": million}, want: evalBudget},
		{name: "all over a million elements", where: ruleHigh, expr: `{"all":[{"var":"request.context.items"},{">=":[{"var":""},0]}]}`, ctx: map[string]any{"items": million}, want: evalBudget},
		{name: "some over a million elements", where: gateFin, expr: `{"some":[{"var":"request.context.items"},{"<":[{"var":""},0]}]}`, ctx: map[string]any{"items": million}, want: evalBudget},
		{name: "none over a million elements", where: ruleIDV, expr: `{"none":[{"var":"request.context.items"},{"<":[{"var":""},0]}]}`, ctx: map[string]any{"items": million}, want: evalBudget},
		{name: "reduce over a million elements", where: ruleHigh, expr: `{">":[{"reduce":[{"var":"request.context.items"},{"+":[{"var":"current"},{"var":"accumulator"}]},0]},0]}`, ctx: map[string]any{"items": million}, want: evalBudget},
		{name: "reduce explosion over data", where: ruleHigh, expr: `{"!!":[{"reduce":[{"var":"request.context.items"},{"cat":[{"var":"accumulator"},{"var":"accumulator"}]},"ab"]}]}`, ctx: map[string]any{"items": numbers(64)}, want: evalBudget},
		{name: "map of maps over data", where: ruleHigh, expr: `{"!!":[{"map":[{"var":"request.context.items"},{"map":[{"var":""},1]}]}]}`, ctx: map[string]any{"items": func() []any {
			out := make([]any, 1000)
			for i := range out {
				out[i] = thousand
			}
			return out
		}()}, want: evalBudget},
		{name: "cat of a huge message", where: ruleHigh, expr: `{"in":["refund",{"cat":[{"var":"request.message"},{"var":"request.message"}]}]}`, msg: strings.Repeat("a", 3<<20), want: evalBudget},
		{name: "in over a huge string a thousand times", where: gateFin, expr: `{"reduce":[{"var":"request.context.items"},{"if":[{"in":["zz",{"var":"accumulator"}]},"found",{"var":"accumulator"}]},{"var":"request.context.blob"}]}`, ctx: map[string]any{"items": thousand, "blob": strings.Repeat("a", 1<<20)}, want: evalBudget},
		{name: "merge that grows past the byte budget", where: ruleHigh, expr: `{"!!":[{"merge":[{"var":"request.context.items"},{"var":"request.context.items"},{"var":"request.context.items"},{"var":"request.context.items"},{"var":"request.context.items"}]}]}`, ctx: map[string]any{"items": million}, want: evalBudget},
		{name: "a small budget from Options", where: ruleHigh, expr: `{"some":[{"var":"request.context.items"},{"<":[{"var":""},0]}]}`, ctx: map[string]any{"items": thousand}, opts: &policy.Options{MaxOperations: 500}, want: evalBudget},
		{name: "self-referencing array in host data", where: ruleHigh, expr: `{"in":["zz",{"cat":[{"var":"request.context.loop"}]}]}`, raw: map[string]any{"loop": selfRef}, want: evalBudget},
		// NaN and infinity: falsy, comparisons false, never an allow.
		{name: "NaN condition of an allow rule", where: ruleIDV, expr: `{"/":[0,0]}`, want: denied},
		{name: "NaN from data of an allow rule", where: ruleIDV, expr: `{"%":[{"var":"request.context.refund_amount"},0]}`, want: denied},
		{name: "NaN from a string subtraction", where: ruleIDV, expr: `{"-":[{"var":"request.context.order_id"},1]}`, want: evalTypeError},
		{name: "NaN compared below a limit", where: ruleIDV, expr: `{"<=":[{"%":[{"var":"request.context.refund_amount"},0]},3000]}`, want: evalTypeError},
		{name: "a line item without its amount summed", where: gateFin, expr: `{">":[{"reduce":[{"var":"request.context.lines"},{"+":[{"var":"accumulator"},{"var":"current.amount"}]},0]},3000]}`, raw: map[string]any{"lines": []any{map[string]any{"amount": 50000.0}, map[string]any{}}}, want: evalTypeError},
		{name: "null inside and", where: ruleIDV, expr: `{"and":[{"var":["request.context.nothing",null]},true]}`, want: denied},
		{name: "zero inside and", where: ruleIDV, expr: `{"and":[0,{"var":"request.context.identity_verified"}]}`, want: denied},
		{name: "NaN refund amount from a Go host", where: ruleHigh, ctx: map[string]any{"refund_amount": math.NaN()}, want: evalTypeError},
		{name: "infinite refund amount from a Go host", where: ruleHigh, ctx: map[string]any{"refund_amount": math.Inf(1)}, want: evalTypeError},
		{name: "infinity compared above the threshold", where: gateFin, expr: `{">":[{"/":[{"var":"request.context.refund_amount"},0]},3000]}`, want: gateStaysOpen},
		// Hostile data shapes.
		{name: "900-deep data document", where: ruleHigh, expr: `{"==":[{"var":"request.context.deep"},"x"]}`, ctx: map[string]any{"deep": deepData}, want: noCrashOrAllow},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p, req, rc := load(t)
			if tc.expr != "" {
				setExpr(t, p, tc.where, tc.expr)
			}
			e, err := policy.Prepare(p, tc.opts)
			switch tc.want {
			case refusedBudget, refused:
				var pe *policy.Error
				if !errors.As(err, &pe) || !errors.Is(err, policy.ErrPrepare) {
					t.Fatalf("Prepare = %v, want an *Error of KindPrepare", err)
				}
				if pe.RuleID != tc.where && pe.GateID != tc.where {
					t.Errorf("error names %q/%q, not %s", pe.RuleID, pe.GateID, tc.where)
				}
				if tc.want == refusedBudget && !errors.Is(err, policy.ErrBudget) {
					t.Errorf("error does not match ErrBudget: %v", err)
				}
				if len(err.Error()) > 4096 {
					t.Errorf("error text is %d bytes", len(err.Error()))
				}
				return
			}
			if err != nil {
				t.Fatalf("Prepare: %v", err)
			}
			for k, v := range tc.ctx {
				req.Input.Context[k] = v
			}
			if tc.msg != "" {
				req.Input.Message = tc.msg
			}
			doc := policy.NewDocument(req.Input, rc)
			for k, v := range tc.raw {
				doc["request"].(map[string]any)["context"].(map[string]any)[k] = v
			}
			res, err := e.Evaluate(policy.Input{RunID: rc.RunID, Data: doc})
			switch tc.want {
			case evalBudget, evalTypeError:
				var ee *policy.Error
				if !errors.As(err, &ee) || !errors.Is(err, policy.ErrEvaluation) || res != nil {
					t.Fatalf("Evaluate = %v, %v; want an *Error and no result", res, err)
				}
				if ee.RuleID != tc.where && ee.GateID != tc.where {
					t.Errorf("error names %q/%q, not %s", ee.RuleID, ee.GateID, tc.where)
				}
				if wantBudget := tc.want == evalBudget; errors.Is(err, policy.ErrBudget) != wantBudget || (ee.Kind == policy.KindBudget) != wantBudget {
					t.Errorf("kind %s, ErrBudget %v: %v", ee.Kind, errors.Is(err, policy.ErrBudget), err)
				}
				if len(err.Error()) > 4096 {
					t.Errorf("error text is %d bytes", len(err.Error()))
				}
			case denied:
				if err != nil {
					t.Fatal(err)
				}
				if d := res.Decisions[0]; d.RuleID != ruleIDV || d.Outcome != policy.Deny || res.Verdict != policy.VerdictDeny {
					t.Fatalf("verdict %s, %s = %s", res.Verdict, d.RuleID, d.Outcome)
				}
			case gateStaysOpen:
				if err != nil {
					t.Fatal(err)
				}
				if got := res.ActiveGates(); len(got) != 1 || got[0] != gateFin {
					t.Fatalf("active gates %v", got)
				}
			case noCrashOrAllow:
				if err == nil {
					for _, d := range res.Decisions {
						if d.RuleID == tc.where && d.Outcome == policy.Allow {
							t.Fatalf("%s allows", d.RuleID)
						}
					}
				}
			default:
				t.Fatalf("unknown want %q", tc.want)
			}
		})
	}
}

// setExpr replaces the condition of the named rule or gate.
func setExpr(t *testing.T, p *pack.Pack, where, expr string) {
	t.Helper()
	raw := json.RawMessage(expr)
	for bi := range p.PolicyLayer.PolicyBundles {
		rules := p.PolicyLayer.PolicyBundles[bi].PolicyDSL.Rules
		for ri := range rules {
			if rules[ri].RuleID == where {
				rules[ri].If = raw
				return
			}
		}
	}
	for gi := range p.PolicyLayer.ApprovalGates {
		if p.PolicyLayer.ApprovalGates[gi].GateID == where {
			p.PolicyLayer.ApprovalGates[gi].When = raw
			return
		}
	}
	t.Fatalf("no rule or gate %s", where)
}

// TestHostileInvokeReachesNoRule: the duplicated refund_amount that once
// skipped the approval gate (the validator saw one amount, the policy the
// other) is refused before any rule runs.
func TestHostileInvokeReachesNoRule(t *testing.T) {
	b := fixture.Invoke()
	doc := strings.Replace(string(b), `"refund_amount": 4200,`, `"refund_amount": 4200, "refund_amount": 10,`, 1)
	_, err := runcontext.DecodeInvokeRequest([]byte(doc))
	var ve *runcontext.ValidationError
	if !errors.As(err, &ve) || !strings.Contains(err.Error(), "input.context.refund_amount") {
		t.Fatalf("DecodeInvokeRequest = %v", err)
	}
}
