package eval

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/contextos/contextos/internal/opmetrics"
	"github.com/contextos/contextos/internal/problem"
	"github.com/contextos/contextos/pack"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
)

// Step is one step of the CI checklist (seed 003), in the order Test runs
// them.
type Step string

// The steps.
const (
	StepSchema       Step = "schema"        // parse and validate against the schema
	StepReferences   Step = "references"    // internal references resolve
	StepPolicy       Step = "policy"        // policy lint and approval-gate checks (gates policy, risk)
	StepSecurity     Step = "security"      // tenancy and security gates
	StepToolManifest Step = "tool_manifest" // compiled tool surfaces against the expected minimal surface
	StepCompile      Step = "compile"       // golden requests compile, stably, to the expected budget reports
	StepReplay       Step = "replay"        // incident and correction packets (and every golden run) replay equal
	StepEvaluators   Step = "evaluators"    // the evaluators score every intent held to a target, as numbers meeting the targets
	StepReleaseGates Step = "release_gates" // release gates hold against the baseline
	StepDiff         Step = "diff"          // version-class diff by layer against the baseline
)

// Steps returns every step, in order.
func Steps() []Step {
	return []Step{StepSchema, StepReferences, StepPolicy, StepSecurity, StepToolManifest, StepCompile, StepReplay, StepEvaluators, StepReleaseGates, StepDiff}
}

// Trigger is a refresh and invalidation trigger (seed 003): the dependency
// change that makes a pack version need re-checking.
type Trigger string

// The triggers.
const (
	TriggerPolicyBundleUpdated    Trigger = "POLICY_BUNDLE_UPDATED"
	TriggerOntologyUpdated        Trigger = "ONTOLOGY_UPDATED"
	TriggerAdapterSchemaUpdated   Trigger = "ADAPTER_SCHEMA_UPDATED"
	TriggerDecisionCatalogUpdated Trigger = "DECISION_CATALOG_UPDATED"
	TriggerMemoryPolicyUpdated    Trigger = "MEMORY_POLICY_UPDATED"
	TriggerEvaluatorUpdated       Trigger = "EVALUATOR_UPDATED"
	TriggerModelConfigUpdated     Trigger = "MODEL_CONFIG_UPDATED"
)

// triggerSteps maps each trigger to the checks the seed's table requires
// (schema always: nothing is checked of a pack that does not parse).
var triggerSteps = map[Trigger][]Step{
	// rerun policy lint, golden replay, and approval-gate checks
	TriggerPolicyBundleUpdated: {StepSchema, StepPolicy, StepToolManifest, StepCompile, StepReplay},
	// verify entity types, relationships, CEID namespaces, and evidence mappings
	TriggerOntologyUpdated: {StepSchema, StepReferences, StepCompile},
	// rerun tool schema validation and arg-constraint tests
	TriggerAdapterSchemaUpdated: {StepSchema, StepReferences, StepToolManifest, StepCompile, StepReplay},
	// verify bindings, outcomes, and required evidence
	TriggerDecisionCatalogUpdated: {StepSchema, StepReferences, StepCompile},
	// rerun recall/write-back and consent checks
	TriggerMemoryPolicyUpdated: {StepSchema, StepSecurity, StepCompile},
	// replay golden set and compare score deltas
	TriggerEvaluatorUpdated: {StepSchema, StepCompile, StepReplay, StepEvaluators, StepReleaseGates},
	// replay representative cases before promotion
	TriggerModelConfigUpdated: {StepSchema, StepCompile, StepReplay},
}

// Triggers returns every trigger, in the seed's order.
func Triggers() []Trigger {
	return []Trigger{TriggerPolicyBundleUpdated, TriggerOntologyUpdated, TriggerAdapterSchemaUpdated, TriggerDecisionCatalogUpdated,
		TriggerMemoryPolicyUpdated, TriggerEvaluatorUpdated, TriggerModelConfigUpdated}
}

// ErrTrigger reports an unknown trigger; the error is a *TriggerError.
var ErrTrigger = errors.New("eval: unknown trigger")

// TriggerError names the unknown trigger.
type TriggerError struct{ Trigger string }

func (e *TriggerError) Error() string {
	names := make([]string, 0, 7)
	for _, t := range Triggers() {
		names = append(names, string(t))
	}
	return fmt.Sprintf("eval: unknown trigger %q (known: %s)", problem.Clip(e.Trigger), strings.Join(names, ", "))
}

// Is matches ErrTrigger.
func (e *TriggerError) Is(target error) bool { return target == ErrTrigger }

// ParseTrigger parses a trigger name.
func ParseTrigger(s string) (Trigger, error) {
	if _, ok := triggerSteps[Trigger(s)]; !ok {
		return "", &TriggerError{Trigger: s}
	}
	return Trigger(s), nil
}

// StepsFor returns the steps the triggers require, in checklist order;
// no trigger requires every step.
func StepsFor(triggers ...Trigger) ([]Step, error) {
	if len(triggers) == 0 {
		return Steps(), nil
	}
	want := map[Step]bool{}
	for _, t := range triggers {
		steps, ok := triggerSteps[t]
		if !ok {
			return nil, &TriggerError{Trigger: string(t)}
		}
		for _, s := range steps {
			want[s] = true
		}
	}
	var out []Step
	for _, s := range Steps() {
		if want[s] {
			out = append(out, s)
		}
	}
	return out, nil
}

// TestOptions is what Test checks.
type TestOptions struct {
	// Pack is the candidate pack file, plain or signed.
	Pack []byte
	// Baseline is the version it replaces, plain or signed. Nil is no
	// baseline: the release gates and the diff are skipped and the pack
	// is held to its own eval targets. A non-nil empty Baseline is a
	// baseline file that was given but is empty, an error. Given a
	// baseline, the pack is held to the stricter of the baseline's eval
	// targets and release gates and its own (Bar), so a candidate cannot
	// pass by relaxing its own.
	Baseline []byte
	// Golden is a golden case directory (Load); Cases are further cases.
	// With neither (or an empty directory) the golden steps fail with a
	// no_cases problem: a pack is never passed without evidence.
	Golden string
	Cases  []*Case
	// Keys verify signed packs; AllowUnsigned accepts plain ones.
	Keys          pack.KeyResolver
	AllowUnsigned bool
	// Ontologies the host declares (NS@VERSION); nil declares each pack's
	// own.
	Ontologies []string
	// Triggers select the steps (StepsFor); none runs every step.
	Triggers []Trigger
	// Evaluators score the runs; nil is NewEvaluators().
	Evaluators *Evaluators
	// Validation tunes pack validation (redaction rule names). Its Gates
	// are not run: Test runs the replay and evaluation gates itself.
	Validation *pack.ValidateOptions
	// MeterProvider receives the release-gate pass rate: one
	// contextos.release_gate.evaluations count per release gate the
	// candidate was held to, with the gated metric and pass or fail.
	// Default: no-op.
	MeterProvider metric.MeterProvider
}

// StepStatus is a step's result.
type StepStatus string

// Step statuses.
const (
	StepPass    StepStatus = "pass"
	StepFail    StepStatus = "fail"
	StepSkipped StepStatus = "skipped"
)

// StepResult is one step's result: its status, why it was skipped, its
// problems, the warnings of the validation gates it reports (risks the
// pack passes with, each naming its fix: pack.Warnings) and, for the diff,
// the changes per layer. A warning never fails a step.
type StepResult struct {
	Step     Step           `json:"step"`
	Status   StepStatus     `json:"status"`
	Reason   string         `json:"reason,omitempty"`
	Problems []pack.Problem `json:"problems"`
	Warnings []pack.Problem `json:"warnings,omitempty"`
	Layers   []LayerDiff    `json:"layers,omitempty"`
}

// LayerDiff is the diff's changes in one layer and their highest class.
type LayerDiff struct {
	Layer   string        `json:"layer"`
	Class   pack.Class    `json:"class"`
	Changes []pack.Change `json:"changes"`
}

// CaseResult is one golden case's result.
type CaseResult struct {
	Case     string         `json:"case"`
	Intent   string         `json:"intent"`
	Kind     string         `json:"kind"`
	Passed   bool           `json:"passed"`
	Status   string         `json:"status"`
	Outcome  string         `json:"outcome,omitempty"`
	Problems []pack.Problem `json:"problems"`
}

// Report is the CI checklist's result.
type Report struct {
	Pack     string       `json:"pack"`
	Baseline string       `json:"baseline,omitempty"`
	Triggers []Trigger    `json:"triggers,omitempty"`
	Steps    []StepResult `json:"steps"`
	Cases    []CaseResult `json:"cases"`
	// Scorecard is the candidate's; BaselineScorecard the baseline's.
	Scorecard         *Scorecard `json:"scorecard,omitempty"`
	BaselineScorecard *Scorecard `json:"baseline_scorecard,omitempty"`
}

// Passed reports whether no step failed.
func (r *Report) Passed() bool {
	return !slices.ContainsFunc(r.Steps, func(s StepResult) bool { return s.Status == StepFail })
}

// Step returns the result of a step, or nil when it was not selected.
func (r *Report) Step(s Step) *StepResult {
	for i := range r.Steps {
		if r.Steps[i].Step == s {
			return &r.Steps[i]
		}
	}
	return nil
}

// ReleaseGates reports the release-gate outcome: evaluated is false when
// the step was not run (no baseline, no golden cases, not selected);
// otherwise held reports whether every release gate held.
func (r *Report) ReleaseGates() (held, evaluated bool) {
	s := r.Step(StepReleaseGates)
	if s == nil || s.Status == StepSkipped {
		return false, false
	}
	return s.Status == StepPass, true
}

// JSON renders the report as indented JSON; the same report gives the
// same bytes.
func (r *Report) JSON() ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(r); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// Text renders the report for a terminal: each step, its problems, each
// case with why it failed (every expectation it missed: what the run did
// and what the case expects) and the scorecard.
func (r *Report) Text() string {
	var b strings.Builder
	fmt.Fprintf(&b, "pack test %s", r.Pack)
	if r.Baseline != "" {
		fmt.Fprintf(&b, " against %s", r.Baseline)
	}
	if len(r.Triggers) > 0 {
		ts := make([]string, len(r.Triggers))
		for i, t := range r.Triggers {
			ts[i] = string(t)
		}
		fmt.Fprintf(&b, " (triggers: %s)", strings.Join(ts, ", "))
	}
	b.WriteString("\n")
	for _, s := range r.Steps {
		fmt.Fprintf(&b, "%-7s %s", strings.ToUpper(string(s.Status)), s.Step)
		if s.Reason != "" {
			fmt.Fprintf(&b, " (%s)", s.Reason)
		}
		b.WriteString("\n")
		for _, l := range s.Layers {
			fmt.Fprintf(&b, "        %s: %s, %d change(s)\n", l.Layer, l.Class, len(l.Changes))
			for _, c := range l.Changes {
				fmt.Fprintf(&b, "          %s %s: %s\n", c.Class, c.Path, c.Reason)
			}
		}
		for _, p := range s.Problems {
			fmt.Fprintf(&b, "        - %s [%s]\n", p.String(), p.Code)
		}
		for _, p := range s.Warnings {
			fmt.Fprintf(&b, "        warning: %s [%s]\n", p.String(), p.Code)
		}
	}
	if len(r.Cases) > 0 {
		b.WriteString("cases:\n")
		for _, c := range r.Cases {
			mark := "ok  "
			if !c.Passed {
				mark = "FAIL"
			}
			fmt.Fprintf(&b, "  %s %s (%s) %s\n", mark, c.Case, c.Kind, strings.TrimSpace(c.Status+" "+c.Outcome))
			// Why it failed: each expectation it missed, what the run
			// did and what the case expects.
			for _, p := range c.Problems {
				where := strings.TrimPrefix(strings.TrimPrefix(p.Path, c.Case), ".")
				if where != "" {
					where += ": "
				}
				fmt.Fprintf(&b, "         - %s%s [%s]\n", where, p.Message, p.Code)
			}
		}
	}
	if r.Scorecard != nil {
		b.WriteString(r.Scorecard.Text())
	}
	verdict := "PASSED"
	if !r.Passed() {
		verdict = "FAILED"
	}
	fmt.Fprintf(&b, "%s\n", verdict)
	return b.String()
}

// Test runs the CI checklist on a candidate pack: parse and schema,
// references, policy and security gates, the tool manifest against the
// expected minimal surface, the golden requests compiled, the packets
// replayed, the evaluators against the targets, the release gates and the
// diff by layer against the baseline — the steps the triggers select.
// A pack that fails is a Report whose Passed is false; the error is for
// options that cannot be used (no pack, an unknown trigger, a golden
// directory that does not load, a baseline that does not verify).
func Test(ctx context.Context, opts TestOptions) (*Report, error) {
	steps, err := StepsFor(opts.Triggers...)
	if err != nil {
		return nil, err
	}
	if len(opts.Pack) == 0 {
		return nil, errors.New("eval: TestOptions.Pack is required")
	}
	cases := slices.Clone(opts.Cases)
	if opts.Golden != "" {
		loaded, err := Load(opts.Golden)
		if err != nil {
			return nil, err
		}
		cases = append(loaded, cases...)
	}
	vo := validation(opts.Validation)
	var base *pack.Pack
	if opts.Baseline != nil {
		if len(opts.Baseline) == 0 {
			return nil, errors.New("eval: baseline: the baseline file is empty (leave TestOptions.Baseline nil for no baseline)")
		}
		if base, err = loadPack(ctx, opts.Baseline, opts.Keys, opts.AllowUnsigned, vo); err != nil {
			return nil, fmt.Errorf("eval: baseline: %w", err)
		}
	}
	t := &tester{ctx: ctx, opts: opts, vo: vo, cases: cases, base: base, steps: steps,
		report: &Report{Triggers: slices.Clone(opts.Triggers), Steps: []StepResult{}, Cases: []CaseResult{}}}
	if base != nil {
		ref, _ := base.Ref()
		t.report.Baseline = ref.String()
	}
	mp := opts.MeterProvider
	if mp == nil {
		mp = noop.NewMeterProvider()
	}
	m, err := opmetrics.New(mp)
	if err != nil {
		return nil, fmt.Errorf("eval: TestOptions.MeterProvider: %w", err)
	}
	t.load()
	for _, s := range steps {
		t.report.Steps = append(t.report.Steps, t.step(s))
	}
	t.recordReleaseGates(m)
	return t.report, nil
}

// recordReleaseGates counts each release gate the candidate was held to,
// once the release-gate step ran.
func (t *tester) recordReleaseGates(m *opmetrics.Metrics) {
	if _, evaluated := t.report.ReleaseGates(); !evaluated || t.report.Scorecard == nil {
		return
	}
	for _, is := range t.report.Scorecard.Intents {
		for _, ms := range is.Metrics {
			if ms.GateHeld != nil {
				m.ReleaseGate(t.ctx, t.report.Pack, ms.Metric, *ms.GateHeld)
			}
		}
	}
}

func validation(v *pack.ValidateOptions) *pack.ValidateOptions {
	if v == nil {
		return nil
	}
	return &pack.ValidateOptions{RedactionRules: slices.Clone(v.RedactionRules)}
}

// isSigned reports a signed pack file (pack.SignedPack has a format).
func isSigned(data []byte) bool {
	var probe struct {
		Format string `json:"format"`
	}
	return json.Unmarshal(data, &probe) == nil && probe.Format != ""
}

// loadPack decodes a plain pack (AllowUnsigned) or verifies a signed one,
// and validates it.
func loadPack(ctx context.Context, data []byte, keys pack.KeyResolver, allowUnsigned bool, vo *pack.ValidateOptions) (*pack.Pack, error) {
	if isSigned(data) {
		v, err := pack.Verify(ctx, data, keys, vo)
		if err != nil {
			return nil, err
		}
		return v.Pack, nil
	}
	if !allowUnsigned {
		return nil, errors.New("the pack is not signed (sign it, or allow unsigned packs)")
	}
	return pack.DecodeAndValidate(data, vo)
}

type tester struct {
	ctx    context.Context
	opts   TestOptions
	vo     *pack.ValidateOptions
	cases  []*Case
	base   *pack.Pack
	steps  []Step // the steps selected
	report *Report

	cand      *pack.Pack
	loadErr   string         // why the candidate cannot be used at all
	validated []pack.Problem // the built-in gates' problems
	warnings  []pack.Problem // the built-in gates' warnings (pack.Warnings)
	ran       bool
	runs      []*Run
	runErr    string
	sc, bsc   *Scorecard
}

// load decodes the candidate (verifying a signed one) and validates it.
func (t *tester) load() {
	data := t.opts.Pack
	if isSigned(data) {
		v, err := pack.Verify(t.ctx, data, t.opts.Keys, t.vo)
		var ve *pack.ValidationError
		switch {
		case err == nil:
			t.cand = v.Pack
		case errors.As(err, &ve):
			t.validated = ve.Problems
			if sp, perr := pack.ParseSigned(data); perr == nil {
				t.cand, _ = pack.Decode(sp.Pack)
			}
			if t.cand == nil {
				t.loadErr = err.Error()
			}
		default:
			t.loadErr = err.Error()
			return
		}
	} else {
		if !t.opts.AllowUnsigned {
			t.loadErr = "the pack is not signed (sign it, or allow unsigned packs)"
			return
		}
		p, err := pack.Decode(data)
		var ve *pack.ValidationError
		if err != nil {
			if errors.As(err, &ve) {
				t.validated = ve.Problems
			} else {
				t.loadErr = err.Error()
			}
			return
		}
		t.cand = p
		if err := pack.Validate(p, t.vo); errors.As(err, &ve) {
			t.validated = ve.Problems
		} else if err != nil {
			t.loadErr = err.Error()
		}
	}
	if t.cand != nil {
		if ref, err := t.cand.Ref(); err == nil {
			t.report.Pack = ref.String()
		}
		t.warnings = pack.Warnings(t.cand)
	}
}

// stepGates are the built-in validation gates each step reports.
var stepGates = map[Step][]string{
	StepSchema:     {pack.GateSchema},
	StepReferences: {pack.GateReferential},
	StepPolicy:     {pack.GatePolicy, pack.GateRisk},
	StepSecurity:   {pack.GateTenancy, pack.GateSecurity},
	StepEvaluators: {pack.GateEvaluation},
}

// uncovered are the validation problems of gates no selected step
// reports: the schema step, which always runs, carries them, so a pack
// failing validation fails whatever steps the triggers select.
func (t *tester) uncovered() []pack.Problem {
	var out []pack.Problem
	for _, p := range t.validated {
		if !slices.ContainsFunc(t.steps, func(s Step) bool { return slices.Contains(stepGates[s], p.Gate) }) {
			out = append(out, p)
		}
	}
	return out
}

func (t *tester) gateProblems(gates ...string) []pack.Problem {
	var out []pack.Problem
	for _, p := range t.validated {
		if slices.Contains(gates, p.Gate) {
			out = append(out, p)
		}
	}
	return out
}

// result is a step's result from its problems.
func result(s Step, probs []pack.Problem) StepResult {
	r := StepResult{Step: s, Status: StepPass, Problems: []pack.Problem{}}
	if len(probs) > 0 {
		r.Status, r.Problems = StepFail, probs
	}
	return r
}

func skipped(s Step, why string) StepResult {
	return StepResult{Step: s, Status: StepSkipped, Reason: why, Problems: []pack.Problem{}}
}

func (t *tester) step(s Step) StepResult {
	r := t.stepResult(s)
	if r.Status != StepSkipped {
		r.Warnings = t.stepWarnings(s)
	}
	return r
}

// stepWarnings are the validation warnings step s reports: those of the
// gates it covers and, for the schema step (which always runs), those of
// gates no selected step covers.
func (t *tester) stepWarnings(s Step) []pack.Problem {
	var out []pack.Problem
	for _, w := range t.warnings {
		covered := slices.ContainsFunc(t.steps, func(x Step) bool { return slices.Contains(stepGates[x], w.Gate) })
		if slices.Contains(stepGates[s], w.Gate) || s == StepSchema && !covered {
			out = append(out, w)
		}
	}
	return out
}

func (t *tester) stepResult(s Step) StepResult {
	if t.loadErr != "" {
		if s == StepSchema {
			return result(s, []pack.Problem{{Gate: pack.GateSchema, Code: pack.CodeDecode, Message: t.loadErr}})
		}
		return skipped(s, "the pack could not be read")
	}
	switch s {
	case StepSchema:
		r := result(s, slices.Concat(t.gateProblems(pack.GateSchema), t.uncovered()))
		if len(t.uncovered()) > 0 {
			r.Reason = "carries the validation problems of gates no selected step covers"
		}
		return r
	case StepReferences:
		return result(s, t.gateProblems(pack.GateReferential))
	case StepPolicy:
		return result(s, t.gateProblems(pack.GatePolicy, pack.GateRisk))
	case StepSecurity:
		return result(s, t.gateProblems(pack.GateTenancy, pack.GateSecurity))
	case StepDiff:
		return t.diff()
	}
	// The golden steps need a valid pack and cases.
	builtin := t.gateProblems(pack.GateEvaluation)
	switch {
	case t.cand == nil || len(t.validated) > 0:
		if s == StepEvaluators && len(builtin) > 0 {
			return result(s, builtin)
		}
		return skipped(s, "the pack fails validation; golden cases run on a valid pack only")
	case len(t.cases) == 0:
		if s == StepReleaseGates && t.base == nil {
			return skipped(s, "no baseline")
		}
		gate := pack.GateReplay
		if s == StepEvaluators || s == StepReleaseGates {
			gate = pack.GateEvaluation
		}
		return result(s, slices.Concat(builtin, []pack.Problem{noCases(gate)}))
	}
	t.run()
	if t.runErr != "" {
		return result(s, []pack.Problem{{Gate: pack.GateReplay, Code: CodeRunner, Message: t.runErr}})
	}
	switch s {
	case StepToolManifest:
		return result(s, t.runProblems(func(_ *Run, code string) bool { return code == CodeToolSurface || code == CodeToolManifest }))
	case StepCompile:
		// A packet that cannot run is a replay failure, not a compile one.
		return result(s, t.runProblems(func(r *Run, code string) bool {
			return code == CodeUnstableCompile || code == CodeBudgetReport || code == CodeCaseError && r.Kind != KindPacket
		}))
	case StepReplay:
		return result(s, t.runProblems(func(r *Run, code string) bool {
			return code == CodeReplayMismatch || code == CodeCaseError && r.Kind == KindPacket
		}))
	case StepEvaluators:
		var probs []pack.Problem
		for _, p := range EvaluationGate(t.sc) {
			if p.Code != CodeReleaseGate {
				probs = append(probs, p)
			}
		}
		return result(s, slices.Concat(builtin, probs))
	case StepReleaseGates:
		if t.bsc == nil {
			return skipped(s, "no baseline")
		}
		var probs []pack.Problem
		for _, p := range EvaluationGate(t.sc) {
			if p.Code == CodeReleaseGate {
				probs = append(probs, p)
			}
		}
		return result(s, probs)
	}
	return skipped(s, "unknown step")
}

func (t *tester) runProblems(keep func(r *Run, code string) bool) []pack.Problem {
	var out []pack.Problem
	for _, r := range t.runs {
		for _, p := range r.Problems() {
			if keep(r, string(p.Code)) {
				out = append(out, p)
			}
		}
	}
	return out
}

// run runs the golden cases on the candidate and the baseline, once.
func (t *tester) run() {
	if t.ran {
		return
	}
	t.ran = true
	var err error
	if t.base != nil {
		var bruns []*Run
		if bruns, err = runCases(t.ctx, t.base, nil, t.cases, t.opts.Ontologies, t.vo); err == nil {
			t.bsc, err = Score(t.base, bruns, ScoreOptions{Evaluators: t.opts.Evaluators, Cases: t.cases})
		}
		if err != nil {
			t.runErr = "the baseline's golden runs: " + err.Error()
			return
		}
		t.report.BaselineScorecard = t.bsc
	}
	if t.runs, err = runCases(t.ctx, t.cand, t.base, t.cases, t.opts.Ontologies, t.vo); err != nil {
		t.runErr = err.Error()
		return
	}
	if t.sc, err = Score(t.cand, t.runs, ScoreOptions{Evaluators: t.opts.Evaluators, Baseline: t.bsc, Cases: t.cases}); err != nil {
		t.runErr = err.Error()
		return
	}
	t.report.Scorecard = t.sc
	for _, r := range t.runs {
		probs := r.Problems()
		t.report.Cases = append(t.report.Cases, CaseResult{Case: r.Case, Intent: r.Intent, Kind: r.Kind, Passed: len(probs) == 0,
			Status: string(r.Status), Outcome: r.Outcome, Problems: orEmpty(probs)})
	}
}

func orEmpty(p []pack.Problem) []pack.Problem {
	if p == nil {
		return []pack.Problem{}
	}
	return p
}

// diff classifies the change from the baseline by layer.
func (t *tester) diff() StepResult {
	if t.base == nil {
		return skipped(StepDiff, "no baseline")
	}
	if t.cand == nil {
		return skipped(StepDiff, "the pack could not be read")
	}
	d := pack.Diff(t.base, t.cand, t.vo)
	byLayer := map[string]*LayerDiff{}
	var order []string
	for _, c := range d.Changes {
		layer := c.Path
		if i := strings.IndexAny(layer, ".["); i >= 0 {
			layer = layer[:i]
		}
		if layer == "" {
			layer = "(pack)"
		}
		l := byLayer[layer]
		if l == nil {
			l = &LayerDiff{Layer: layer, Class: pack.ClassPatch}
			byLayer[layer] = l
			order = append(order, layer)
		}
		l.Changes = append(l.Changes, c)
		if classRank(c.Class) > classRank(l.Class) {
			l.Class = c.Class
		}
	}
	slices.Sort(order)
	r := StepResult{Step: StepDiff, Status: StepPass, Problems: []pack.Problem{}, Layers: []LayerDiff{}, Reason: "class " + string(d.Class)}
	for _, name := range order {
		r.Layers = append(r.Layers, *byLayer[name])
	}
	if d.Class == pack.ClassReject {
		r.Problems = append(r.Problems, pack.Problem{Code: CodeDiff, Path: "", Message: "the change is unsafe or ambiguous (class reject)"})
	}
	if !d.VersionOK {
		r.Problems = append(r.Problems, pack.Problem{Code: CodeDiff, Path: "pack_meta.pack_version", Message: d.Version})
	}
	if len(r.Problems) > 0 {
		r.Status = StepFail
	}
	return r
}

func classRank(c pack.Class) int {
	return slices.Index([]pack.Class{pack.ClassPatch, pack.ClassMinor, pack.ClassMajor, pack.ClassReject}, c)
}
