package eval

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/contextos/contextos/internal/canon"
	"github.com/contextos/contextos/internal/problem"
	"github.com/contextos/contextos/pack"
)

// Bounds of an eval target.
const (
	BoundFloor   = "floor"   // the value must be ≥ the target
	BoundCeiling = "ceiling" // the value must be ≤ the target
)

// Scorecard is a pack version's scores per intent against the eval
// targets it is held to and, given a baseline, each metric's delta against
// the release gates. HeldTo is that bar: the pack's own evaluation layer
// or, given a baseline scorecard, the stricter of the baseline's bar and
// the pack's own (Bar) — a candidate cannot grade itself by relaxing its
// own targets or gates. PackHash is the pack's content hash and
// CaseDigests the sorted digests of the golden cases scored (CaseDigest);
// Problems are what keeps the scores from meeting the bar besides a missed
// target or a regression (an intent with targets but no runs, a run whose
// intent has no target, a score that is not a number, a release gate on a
// metric no evaluator scores). Hash is sha256 over the RFC 8785 form of
// the scorecard without the hash: it covers the pack, the cases, the bar
// and the baseline scorecard (BaselineHash) that produced it.
type Scorecard struct {
	PackRef      string               `json:"pack_ref"`
	PackHash     string               `json:"pack_hash"`
	BaselineRef  string               `json:"baseline_ref,omitempty"`
	BaselineHash string               `json:"baseline_scorecard_hash,omitempty"`
	CaseDigests  []string             `json:"case_digests"`
	HeldTo       pack.EvaluationLayer `json:"held_to"`
	Intents      []IntentScore        `json:"intents"`
	Problems     []pack.Problem       `json:"problems,omitempty"`
	Hash         string               `json:"scorecard_hash,omitempty"`
}

// IntentScore is one intent's metrics, in evaluator order.
type IntentScore struct {
	Intent  string        `json:"intent"`
	Runs    int           `json:"runs"`
	Metrics []MetricScore `json:"metrics"`
}

// MetricScore is one metric of one intent.
type MetricScore struct {
	Metric string  `json:"metric"`
	Value  float64 `json:"value"`
	// Invalid says why the evaluator gave no number (NaN, ±Inf, a panic);
	// Value is then 0, TargetMet false and a release gate on the metric
	// does not hold.
	Invalid string `json:"invalid,omitempty"`
	// Target is the eval target the pack is held to for the metric, if
	// any; Bound says whether it is a floor or a ceiling; TargetMet is
	// true without one.
	Target    *float64 `json:"target,omitempty"`
	Bound     string   `json:"bound"`
	TargetMet bool     `json:"target_met"`
	// Baseline is the baseline scorecard's value and Delta this value
	// minus it; MaxDelta and GateHeld are set when a release gate names
	// the metric (a regression — in the metric's bad direction — larger
	// than max_delta fails it, and so does a value or baseline value that
	// is not a number).
	Baseline *float64 `json:"baseline,omitempty"`
	Delta    *float64 `json:"delta,omitempty"`
	MaxDelta *float64 `json:"max_delta,omitempty"`
	GateHeld *bool    `json:"release_gate_held,omitempty"`
}

// Problem codes of scorecards.
const (
	CodeNoCases       = "no_cases"       // there are no golden cases: nothing was evaluated
	CodeNoRuns        = "no_runs"        // an intent with eval targets has no runs
	CodeNoTarget      = "no_target"      // a run's intent has no eval target
	CodeInvalidScore  = "invalid_score"  // an evaluator gave NaN or ±Inf, or panicked
	CodeUnknownMetric = "unknown_metric" // a release gate names a metric no evaluator scores
)

// ScoreOptions configure Score.
type ScoreOptions struct {
	// Evaluators score the runs; nil is NewEvaluators().
	Evaluators *Evaluators
	// Baseline is the baseline version's scorecard: the deltas are taken
	// against it, and its bar (HeldTo) tightens the pack's own (Bar).
	// Nil holds the pack to its own evaluation layer, without deltas.
	Baseline *Scorecard
	// Cases are the golden cases the runs ran, recorded as CaseDigests.
	Cases []*Case
}

// Score scores the runs of pack p, grouped by intent (sorted), with the
// evaluators, against the bar p is held to (its own evaluation layer, or
// Bar of it and the baseline scorecard's) and, given a baseline, each
// metric's delta under the bar's release gates.
func Score(p *pack.Pack, runs []*Run, opts ScoreOptions) (*Scorecard, error) {
	if p == nil {
		return nil, fmt.Errorf("eval: Score needs the pack")
	}
	ref, err := p.Ref()
	if err != nil {
		return nil, err
	}
	ph, err := pack.ContentHash(p)
	if err != nil {
		return nil, err
	}
	baseline := opts.Baseline
	sc := &Scorecard{PackRef: ref.String(), PackHash: ph, CaseDigests: []string{}, Intents: []IntentScore{}}
	sc.HeldTo = Bar(p.EvaluationLayer, nil)
	if baseline != nil {
		sc.BaselineRef, sc.BaselineHash = baseline.PackRef, baseline.Hash
		sc.HeldTo = Bar(p.EvaluationLayer, &baseline.HeldTo)
	}
	for _, c := range opts.Cases {
		d, err := CaseDigest(c)
		if err != nil {
			return nil, err
		}
		sc.CaseDigests = append(sc.CaseDigests, d)
	}
	slices.Sort(sc.CaseDigests)
	evs := opts.Evaluators.List()
	for _, g := range sc.HeldTo.ReleaseGates {
		if !slices.ContainsFunc(evs, func(e Evaluator) bool { return e.Name == g.Metric }) {
			sc.Problems = append(sc.Problems, pack.Problem{Gate: pack.GateEvaluation, Code: CodeUnknownMetric, Path: "release_gates." + problem.Clip(g.Metric),
				Message: fmt.Sprintf("a release gate names metric %q, which no evaluator scores", problem.Clip(g.Metric))})
		}
	}
	byIntent := map[string][]*Run{}
	for _, r := range runs {
		byIntent[r.Intent] = append(byIntent[r.Intent], r)
	}
	intents := make([]string, 0, len(byIntent))
	for k := range byIntent {
		intents = append(intents, k)
	}
	slices.Sort(intents)
	for _, t := range sc.HeldTo.EvalTargets {
		if _, ok := byIntent[t.Intent]; !ok {
			sc.Problems = append(sc.Problems, pack.Problem{Gate: pack.GateEvaluation, Code: CodeNoRuns, Path: problem.Clip(t.Intent),
				Message: fmt.Sprintf("intent %q has eval targets but no golden case runs under it", problem.Clip(t.Intent))})
		}
	}
	for _, intent := range intents {
		rs := byIntent[intent]
		// Evaluators are pure functions of the set: give them a canonical
		// order all the same.
		rs = slices.Clone(rs)
		slices.SortStableFunc(rs, func(a, b *Run) int { return cmp.Compare(a.Case, b.Case) })
		is := IntentScore{Intent: intent, Runs: len(rs), Metrics: []MetricScore{}}
		target := targetOf(sc.HeldTo, intent)
		if target == nil {
			for _, r := range rs {
				sc.Problems = append(sc.Problems, pack.Problem{Gate: pack.GateEvaluation, Code: CodeNoTarget, Path: r.Case + ".intent",
					Message: fmt.Sprintf("case %s runs under intent %q, which has no eval target", r.Case, problem.Clip(intent))})
			}
		}
		for _, ev := range evs {
			is.Metrics = append(is.Metrics, scoreMetric(ev, rs, intent, target, sc.HeldTo, baseline))
		}
		sc.Intents = append(sc.Intents, is)
	}
	if sc.Hash, err = sc.digest(); err != nil {
		return nil, err
	}
	return sc, nil
}

// scoreMetric scores one metric of one intent against its target and,
// given a baseline, the bar's release gate.
func scoreMetric(ev Evaluator, rs []*Run, intent string, target *pack.EvalTarget, bar pack.EvaluationLayer, baseline *Scorecard) MetricScore {
	m := MetricScore{Metric: ev.Name, Bound: BoundFloor, TargetMet: true}
	if ev.Direction == LowerIsBetter {
		m.Bound = BoundCeiling
	}
	v, invalid := safeScore(ev, rs)
	if invalid != "" {
		m.Invalid, m.TargetMet = invalid, false
	} else {
		m.Value = round(v)
	}
	if t := targetValue(target, ev.Name); t != nil {
		m.Target = t
		switch {
		case invalid != "":
		case ev.Direction == LowerIsBetter:
			m.TargetMet = m.Value <= *t+1e-9
		default:
			m.TargetMet = m.Value >= *t-1e-9
		}
	}
	b, bInvalid := baseline.value(intent, ev.Name)
	if b == nil && !bInvalid {
		return m
	}
	if b != nil {
		m.Baseline = b
		if invalid == "" {
			d := round(m.Value - *b)
			m.Delta = &d
		}
	}
	if g := releaseGate(bar, ev.Name); g != nil {
		md := g.MaxDelta
		held := false
		if invalid == "" && b != nil {
			regression := *b - m.Value
			if ev.Direction == LowerIsBetter {
				regression = m.Value - *b
			}
			held = round(regression) <= md+1e-9
		}
		m.MaxDelta, m.GateHeld = &md, &held
	}
	return m
}

// safeScore runs the evaluator, turning a value that is not a number or a
// panic into a reason.
func safeScore(ev Evaluator, rs []*Run) (v float64, invalid string) {
	defer func() {
		if r := recover(); r != nil {
			v, invalid = 0, "the evaluator panicked"
		}
	}()
	v = ev.Score(rs)
	switch {
	case math.IsNaN(v):
		return 0, "the evaluator gave NaN"
	case math.IsInf(v, 1):
		return 0, "the evaluator gave +Inf"
	case math.IsInf(v, -1):
		return 0, "the evaluator gave -Inf"
	}
	return v, ""
}

// Bar returns the evaluation layer a candidate is held to: its own
// (own), and given the baseline's (base) the stricter of the two per
// intent and metric — for the floors (policy, safety, utility) the larger
// target, for the ceilings (latency_p99_ms, economics_cents_per_decision)
// the smaller — and the union of the release gates by metric, with the
// smaller max_delta where both gate a metric. Intents and gates are
// sorted.
func Bar(own pack.EvaluationLayer, base *pack.EvaluationLayer) pack.EvaluationLayer {
	layers := []pack.EvaluationLayer{own}
	if base != nil {
		layers = append(layers, *base)
	}
	targets := map[string]*pack.EvalTarget{}
	gates := map[string]float64{}
	for _, l := range layers {
		for _, t := range l.EvalTargets {
			cur := targets[t.Intent]
			if cur == nil {
				cur = &pack.EvalTarget{Intent: t.Intent}
				targets[t.Intent] = cur
			}
			cur.Policy = stricter(cur.Policy, t.Policy, false)
			cur.Safety = stricter(cur.Safety, t.Safety, false)
			cur.Utility = stricter(cur.Utility, t.Utility, false)
			cur.LatencyP99MS = stricter(cur.LatencyP99MS, t.LatencyP99MS, true)
			cur.EconomicsCentsPerDecision = stricter(cur.EconomicsCentsPerDecision, t.EconomicsCentsPerDecision, true)
		}
		for _, g := range l.ReleaseGates {
			if md, ok := gates[g.Metric]; !ok || g.MaxDelta < md {
				gates[g.Metric] = g.MaxDelta
			}
		}
	}
	out := pack.EvaluationLayer{EvalTargets: []pack.EvalTarget{}, ReleaseGates: []pack.ReleaseGate{}}
	for _, k := range slices.Sorted(maps.Keys(targets)) {
		out.EvalTargets = append(out.EvalTargets, *targets[k])
	}
	for _, k := range slices.Sorted(maps.Keys(gates)) {
		out.ReleaseGates = append(out.ReleaseGates, pack.ReleaseGate{Metric: k, MaxDelta: gates[k]})
	}
	return out
}

// stricter returns a copy of the stricter of two targets (the smaller for
// a ceiling, the larger for a floor); nil when neither is set.
func stricter(a, b *float64, ceiling bool) *float64 {
	var v float64
	switch {
	case a == nil && b == nil:
		return nil
	case a == nil:
		v = *b
	case b == nil:
		v = *a
	case ceiling:
		v = min(*a, *b)
	default:
		v = max(*a, *b)
	}
	return &v
}

// CaseDigest is the digest of a golden case as a scorecard records it:
// sha256 over the RFC 8785 form of its name and its members (a packet
// case's packet path, not the packet's bytes).
func CaseDigest(c *Case) (string, error) {
	if c == nil {
		return "", errors.New("eval: CaseDigest of a nil case")
	}
	return canon.Digest(struct {
		Name string `json:"name"`
		Case *Case  `json:"case"`
	}{c.Name, c})
}

func targetOf(bar pack.EvaluationLayer, intent string) *pack.EvalTarget {
	for i := range bar.EvalTargets {
		if bar.EvalTargets[i].Intent == intent {
			return &bar.EvalTargets[i]
		}
	}
	return nil
}

func targetValue(t *pack.EvalTarget, metric string) *float64 {
	if t == nil {
		return nil
	}
	var v *float64
	switch metric {
	case MetricPolicy:
		v = t.Policy
	case MetricSafety:
		v = t.Safety
	case MetricUtility:
		v = t.Utility
	case MetricLatencyP99:
		v = t.LatencyP99MS
	case MetricEconomics:
		v = t.EconomicsCentsPerDecision
	}
	if v == nil {
		return nil
	}
	c := *v
	return &c
}

func releaseGate(bar pack.EvaluationLayer, metric string) *pack.ReleaseGate {
	for i := range bar.ReleaseGates {
		if bar.ReleaseGates[i].Metric == metric {
			return &bar.ReleaseGates[i]
		}
	}
	return nil
}

// value is the metric's value in the scorecard, or invalid when the
// scorecard has it but not as a number.
func (s *Scorecard) value(intent, metric string) (v *float64, invalid bool) {
	if s == nil {
		return nil, false
	}
	for _, is := range s.Intents {
		if is.Intent != intent {
			continue
		}
		for _, m := range is.Metrics {
			if m.Metric == metric {
				if m.Invalid != "" {
					return nil, true
				}
				v := m.Value
				return &v, false
			}
		}
	}
	return nil, false
}

func (s *Scorecard) digest() (string, error) {
	c := *s
	c.Hash = ""
	return canon.Digest(c)
}

// Verify reports whether Hash is the scorecard's hash.
func (s *Scorecard) Verify() bool {
	h, err := s.digest()
	return err == nil && h == s.Hash
}

// JSON is the scorecard's RFC 8785 canonical JSON (members sorted,
// numbers in their shortest form), hash included.
func (s *Scorecard) JSON() ([]byte, error) { return canon.JSON(s) }

// TargetsMet reports whether every metric with a target meets it, every
// score is a number and the scorecard has no problems of its own.
func (s *Scorecard) TargetsMet() bool {
	if len(s.Problems) > 0 {
		return false
	}
	for _, is := range s.Intents {
		for _, m := range is.Metrics {
			if !m.TargetMet {
				return false
			}
		}
	}
	return true
}

// ReleaseGatesHeld reports whether every release gate evaluated held
// (true when none was: no baseline).
func (s *Scorecard) ReleaseGatesHeld() bool {
	for _, is := range s.Intents {
		for _, m := range is.Metrics {
			if m.GateHeld != nil && !*m.GateHeld {
				return false
			}
		}
	}
	return true
}

// Text renders the scorecard as a table, one row per intent and metric.
func (s *Scorecard) Text() string {
	var b strings.Builder
	fmt.Fprintf(&b, "scorecard %s", s.PackRef)
	if s.BaselineRef != "" {
		fmt.Fprintf(&b, " against baseline %s", s.BaselineRef)
	}
	fmt.Fprintf(&b, "\n%s\n", s.Hash)
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "INTENT\tRUNS\tMETRIC\tVALUE\tTARGET\tMET\tBASELINE\tDELTA\tMAX_DELTA\tRELEASE_GATE")
	for _, is := range s.Intents {
		for _, m := range is.Metrics {
			target := "-"
			if m.Target != nil {
				op := ">="
				if m.Bound == BoundCeiling {
					op = "<="
				}
				target = op + " " + num(*m.Target)
			}
			gate := "-"
			if m.GateHeld != nil {
				gate = map[bool]string{true: "held", false: "FAILED"}[*m.GateHeld]
			}
			value := num(m.Value)
			if m.Invalid != "" {
				value = "invalid"
			}
			fmt.Fprintf(w, "%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", is.Intent, is.Runs, m.Metric, value, target,
				map[bool]string{true: "yes", false: "NO"}[m.TargetMet], optNum(m.Baseline), optNum(m.Delta), optNum(m.MaxDelta), gate)
		}
	}
	_ = w.Flush()
	return b.String()
}

func num(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

func optNum(v *float64) string {
	if v == nil {
		return "-"
	}
	return num(*v)
}
