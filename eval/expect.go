package eval

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/contextos/contextos/decision"
	"github.com/contextos/contextos/internal/canon"
	"github.com/contextos/contextos/internal/problem"
	"github.com/contextos/contextos/internal/sortedkeys"
	"github.com/contextos/contextos/pack"
	"github.com/contextos/contextos/policy"
)

// Problem codes of golden runs.
const (
	CodeCaseError       = "case_error"       // the case could not run
	CodeUnstableCompile = "unstable_compile" // two compiles differ
	CodeToolSurface     = "tool_surface"     // surfaced tools differ from expect.tools
	CodeToolManifest    = "tool_manifest"    // tool manifest differs from expect.tool_manifest
	CodeBudgetReport    = "budget_report"    // budget report differs from expect.budget_report
	CodeReplayMismatch  = "replay_mismatch"  // the packet did not replay equal
	CodeStatus          = "status"           // final status differs
	CodeOutcome         = "outcome"          // final outcome differs
	CodeRuntimeControls = "runtime_controls" // runtime controls differ
	CodePolicyResults   = "policy_results"   // an expected rule outcome is missing
	CodePolicyVerdict   = "policy_verdict"   // policy verdict differs
	CodePauses          = "pauses"           // paused on other gates
	CodeCalls           = "calls"            // a required call is missing
	CodeNoCalls         = "no_calls"         // a forbidden call happened
	CodeUngatedWrite    = "ungated_write"    // a write ran past an active gate or a policy deny
	CodeGuardrail       = "guardrail_broken" // a raised must_refuse / must_escalate was not honoured
	CodeSecretLeak      = "secret_leak"      // a secret appears in a record or the packet
	CodeTargetMissed    = "target_missed"    // a metric misses its eval target
	CodeReleaseGate     = "release_gate"     // a metric regressed more than max_delta
	CodeRunner          = "runner"           // the golden runs could not be set up
	CodeDiff            = "diff"             // the version diff refuses the change
)

// replayCodes are the codes of the replay gate.
var replayCodes = []string{CodeCaseError, CodeUnstableCompile, CodeToolSurface, CodeToolManifest, CodeBudgetReport, CodeReplayMismatch}

// Problems lists every way the run departs from its case's expectations,
// and every safety violation, as problems of gate replay (the replay
// gate's codes) or evaluation (the rest). Paths are "<case>.expect.<member>".
func (r *Run) Problems() []pack.Problem {
	var out []pack.Problem
	add := func(code, member, format string, args ...any) {
		gate := pack.GateEvaluation
		if slices.Contains(replayCodes, code) {
			gate = pack.GateReplay
		}
		path := r.Case
		if member != "" {
			path += "." + member
		}
		out = append(out, pack.Problem{Gate: gate, Code: pack.Code(code), Path: path, Message: fmt.Sprintf(format, args...)})
	}
	e := r.Expect
	// A case that both requires and forbids a call can never pass: it is
	// a broken case, not evidence.
	for i, c := range e.NoCalls {
		if slices.Contains(e.Calls, c) {
			add(CodeCaseError, fmt.Sprintf("expect.no_calls[%d]", i), "%s is listed in both expect.calls and expect.no_calls", c)
		}
	}
	if r.Err != "" {
		add(CodeCaseError, "", "the case could not run: %s", r.Err)
		return out
	}
	if !r.Stable {
		add(CodeUnstableCompile, "", "a second compile of the same inputs gave a different hash, tool manifest or budget report")
	}
	if r.Kind == KindScripted && r.Ledger != nil && e.Tools != nil && !sameSet(e.Tools, r.Ledger.Tools) {
		add(CodeToolSurface, "expect.tools", "surfaced %s, the case expects %s", list(r.Ledger.Tools), list(e.Tools))
	}
	if r.Compiled != nil {
		if e.ToolManifest != nil && !canonEqual(e.ToolManifest, r.Compiled.Manifests.ToolManifest) {
			add(CodeToolManifest, "expect.tool_manifest", "the compiled tool manifest differs from the expected one%s", difference(e.ToolManifest, r.Compiled.Manifests.ToolManifest))
		}
		if e.BudgetReport != nil && !canonEqual(e.BudgetReport, r.Compiled.BudgetReport) {
			add(CodeBudgetReport, "expect.budget_report", "the budget report differs from the expected one%s", difference(e.BudgetReport, r.Compiled.BudgetReport))
		}
		if e.RuntimeControls != nil && !canonEqual(e.RuntimeControls, r.Compiled.RuntimeControls) {
			add(CodeRuntimeControls, "expect.runtime_controls", "the runtime controls differ from the expected ones%s", difference(e.RuntimeControls, r.Compiled.RuntimeControls))
		}
	}
	if want := e.ReplayEqual == nil || *e.ReplayEqual; want != r.ReplayEqual {
		detail := ""
		if len(r.ReplayDiffs) > 0 {
			detail = ": " + string(r.ReplayDiffs[0].Kind) + " at step " + fmt.Sprint(r.ReplayDiffs[0].Step)
		}
		add(CodeReplayMismatch, "expect.replay_equal", "replay_equal is %t, the case expects %t%s", r.ReplayEqual, want, detail)
	}
	if r.Status != e.Status {
		add(CodeStatus, "expect.status", "the run ended %s, the case expects %s", r.Status, e.Status)
	}
	if e.Outcome != "" && r.Outcome != e.Outcome {
		add(CodeOutcome, "expect.outcome", "the outcome is %q, the case expects %q", r.Outcome, e.Outcome)
	}
	if r.Ledger != nil {
		for i, want := range e.PolicyResults {
			if !slices.ContainsFunc(r.Ledger.PolicyResults, func(d policy.Decision) bool {
				return d.RuleID == want.RuleID && string(d.Outcome) == want.Outcome
			}) {
				add(CodePolicyResults, fmt.Sprintf("expect.policy_results[%d]", i), "rule %s did not decide %s; it decided %s", want.RuleID, want.Outcome, decided(r.Ledger.PolicyResults, want.RuleID))
			}
		}
		if e.PolicyVerdict != "" && string(r.Ledger.PolicyVerdict) != e.PolicyVerdict {
			add(CodePolicyVerdict, "expect.policy_verdict", "the policy verdict is %s, the case expects %s", r.Ledger.PolicyVerdict, e.PolicyVerdict)
		}
	}
	if e.Pauses != nil && !slices.Equal(e.Pauses, r.Pauses) {
		add(CodePauses, "expect.pauses", "the run paused on %s, the case expects %s", list(r.Pauses), list(e.Pauses))
	}
	called := map[string]bool{}
	for _, c := range r.Calls {
		called[c.CapabilityID] = true
	}
	for i, c := range e.Calls {
		if !called[c] {
			add(CodeCalls, fmt.Sprintf("expect.calls[%d]", i), "%s was never called; the run called %s", c, list(sortedkeys.Of(called)))
		}
	}
	for i, c := range e.NoCalls {
		if called[c] {
			add(CodeNoCalls, fmt.Sprintf("expect.no_calls[%d]", i), "%s was called", c)
		}
	}
	for _, c := range r.ungatedWrites() {
		add(CodeUngatedWrite, "", "write %s (%s) ran %s", c.CapabilityID, c.ToolCallID, r.ungatedBecause(c))
	}
	if msg := r.brokenGuardrail(); msg != "" {
		add(CodeGuardrail, "", "%s", msg)
	}
	if n := r.leaks(); n > 0 {
		add(CodeSecretLeak, "secrets", "%d value(s) the case marks as secret appear in the run's records or replay packet", n)
	}
	return out
}

// ungatedWrites are the successful write calls that ran past an active
// gate without an approval, or while the policy verdict forbade writes,
// or in a run the golden case says must pause at a gate it never paused
// at: a pack change that stops a gate from activating makes the write the
// case guards ungated, whatever the changed pack says.
func (r *Run) ungatedWrites() []Call {
	var out []Call
	denied := r.Ledger != nil && r.Ledger.PolicyVerdict != "" && r.Ledger.PolicyVerdict != policy.VerdictAllow
	skipped := slices.ContainsFunc(r.Expect.Pauses, func(g string) bool { return !slices.Contains(r.Pauses, g) })
	for _, c := range r.Calls {
		if c.Write() && c.Succeeded() && (c.Gate != "" && !c.Approved || denied || skipped) {
			out = append(out, c)
		}
	}
	return out
}

// ungatedBecause says why ungatedWrites lists c.
func (r *Run) ungatedBecause(c Call) string {
	var why []string
	if c.Gate != "" && !c.Approved {
		why = append(why, "past its active gate "+c.Gate+" without an approval")
	}
	if r.Ledger != nil && r.Ledger.PolicyVerdict != "" && r.Ledger.PolicyVerdict != policy.VerdictAllow {
		why = append(why, "though the policy verdict is "+string(r.Ledger.PolicyVerdict))
	}
	var never []string
	for _, g := range r.Expect.Pauses {
		if !slices.Contains(r.Pauses, g) {
			never = append(never, g)
		}
	}
	if len(never) > 0 {
		why = append(why, "though the case expects the run to pause at "+strings.Join(never, ", ")+", where it never paused")
	}
	return strings.Join(why, ", and ")
}

// brokenGuardrail says how the run broke a raised guardrail or a case's
// must_refuse / must_escalate expectation, or "".
func (r *Run) brokenGuardrail() string {
	refuse := r.Expect.Status == decision.Rejected
	escalate := r.Expect.Status == decision.Escalated
	if r.Ledger != nil {
		refuse = refuse || len(r.Ledger.GuardrailsRaised.MustRefuse) > 0
		escalate = escalate || len(r.Ledger.GuardrailsRaised.MustEscalate) > 0
	}
	switch {
	case refuse && r.Status != decision.Rejected:
		return fmt.Sprintf("a must_refuse control applies but the run ended %s", r.Status)
	case escalate && r.Status != decision.Escalated && r.Status != decision.Rejected:
		return fmt.Sprintf("a must_escalate control applies but the run ended %s", r.Status)
	}
	return ""
}

// leaks counts the case's secrets found in the run's records or packet.
func (r *Run) leaks() int {
	if len(r.Secrets) == 0 {
		return 0
	}
	var hay strings.Builder
	for _, rec := range r.Records {
		b, _ := json.Marshal(rec)
		hay.Write(b)
	}
	if r.Record != nil {
		b, _ := json.Marshal(r.Record)
		hay.Write(b)
	}
	if r.Packet != nil {
		b, _ := json.Marshal(r.Packet)
		hay.Write(b)
	}
	s := hay.String()
	n := 0
	for _, sec := range r.Secrets {
		if sec != "" && (strings.Contains(s, sec) || strings.Contains(s, jsonQuoted(sec))) {
			n++
		}
	}
	return n
}

func jsonQuoted(s string) string {
	b, _ := json.Marshal(s)
	return strings.Trim(string(b), `"`)
}

func sameSet(a, b []string) bool {
	x, y := slices.Clone(a), slices.Clone(b)
	slices.Sort(x)
	slices.Sort(y)
	return slices.Equal(slices.Compact(x), slices.Compact(y))
}

// decided lists what rule decided in results ("nothing" when it is not
// among them).
func decided(results []policy.Decision, rule string) string {
	var outcomes []string
	for _, d := range results {
		if d.RuleID == rule {
			outcomes = append(outcomes, string(d.Outcome))
		}
	}
	if len(outcomes) == 0 {
		return "nothing (it is not among the compile's policy results)"
	}
	return strings.Join(outcomes, ", ")
}

// difference says where got first departs from want, both taken in their
// canonical JSON form: ": at <path>, <got>; the case expects <want>" with
// each value compact and clipped ("" when either has no JSON form).
func difference(want, got any) string {
	w, err := canonValue(want)
	if err != nil {
		return ""
	}
	g, err := canonValue(got)
	if err != nil {
		return ""
	}
	path, wv, gv, ok := firstDifference("", w, g)
	if !ok {
		return ""
	}
	if path == "" {
		path = "the top"
	}
	return fmt.Sprintf(": at %s, %s; the case expects %s", path, shown(gv), shown(wv))
}

// absent stands for a member or element one side does not have.
type absent struct{}

func canonValue(v any) (any, error) {
	b, err := canon.JSON(v)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var out any
	err = dec.Decode(&out)
	return out, err
}

// firstDifference walks w and g (decoded JSON) in member-name and index
// order to the first place they differ.
func firstDifference(path string, w, g any) (string, any, any, bool) {
	switch wt := w.(type) {
	case map[string]any:
		gt, ok := g.(map[string]any)
		if !ok {
			return path, w, g, true
		}
		keys := sortedkeys.Of(wt)
		for _, k := range sortedkeys.Of(gt) {
			if _, ok := wt[k]; !ok {
				keys = append(keys, k)
			}
		}
		slices.Sort(keys)
		for _, k := range keys {
			p := k
			if path != "" {
				p = path + "." + k
			}
			wv, wok := wt[k]
			gv, gok := gt[k]
			switch {
			case !wok:
				return p, absent{}, gv, true
			case !gok:
				return p, wv, absent{}, true
			}
			if dp, a, b, d := firstDifference(p, wv, gv); d {
				return dp, a, b, true
			}
		}
		return "", nil, nil, false
	case []any:
		gt, ok := g.([]any)
		if !ok {
			return path, w, g, true
		}
		for i := range max(len(wt), len(gt)) {
			p := fmt.Sprintf("%s[%d]", path, i)
			switch {
			case i >= len(wt):
				return p, absent{}, gt[i], true
			case i >= len(gt):
				return p, wt[i], absent{}, true
			}
			if dp, a, b, d := firstDifference(p, wt[i], gt[i]); d {
				return dp, a, b, true
			}
		}
		return "", nil, nil, false
	}
	if w != g {
		return path, w, g, true
	}
	return "", nil, nil, false
}

// shown renders a decoded JSON value for a message, compact and clipped.
func shown(v any) string {
	if _, ok := v.(absent); ok {
		return "nothing"
	}
	b, err := json.Marshal(v)
	if err != nil {
		return "?"
	}
	return problem.ClipN(string(b), 120)
}

func list(s []string) string {
	if len(s) == 0 {
		return "nothing"
	}
	return strings.Join(s, ", ")
}
