package eval

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/contextos/contextos/internal/canon"
	"github.com/contextos/contextos/pack"
)

// Bounds of an eval target.
const (
	BoundFloor   = "floor"   // the value must be ≥ the target
	BoundCeiling = "ceiling" // the value must be ≤ the target
)

// Scorecard is a pack version's scores per intent against its eval
// targets and, given a baseline, each metric's delta against the release
// gates. Hash is sha256 over the RFC 8785 form of the scorecard without
// the hash.
type Scorecard struct {
	PackRef     string        `json:"pack_ref"`
	BaselineRef string        `json:"baseline_ref,omitempty"`
	Intents     []IntentScore `json:"intents"`
	Hash        string        `json:"scorecard_hash,omitempty"`
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
	// Target is the pack's eval target for the metric, if any; Bound says
	// whether it is a floor or a ceiling; TargetMet is true without one.
	Target    *float64 `json:"target,omitempty"`
	Bound     string   `json:"bound"`
	TargetMet bool     `json:"target_met"`
	// Baseline is the baseline scorecard's value and Delta this value
	// minus it; MaxDelta and GateHeld are set when a release gate names
	// the metric (a regression — in the metric's bad direction — larger
	// than max_delta fails it).
	Baseline *float64 `json:"baseline,omitempty"`
	Delta    *float64 `json:"delta,omitempty"`
	MaxDelta *float64 `json:"max_delta,omitempty"`
	GateHeld *bool    `json:"release_gate_held,omitempty"`
}

// Score scores the runs of pack p, grouped by intent (sorted), with the
// evaluators (nil: the built-ins), against p's eval targets and, when
// baseline is not nil, against it with p's release gates.
func Score(p *pack.Pack, runs []*Run, evs *Evaluators, baseline *Scorecard) (*Scorecard, error) {
	if p == nil {
		return nil, fmt.Errorf("eval: Score needs the pack")
	}
	ref, err := p.Ref()
	if err != nil {
		return nil, err
	}
	sc := &Scorecard{PackRef: ref.String(), Intents: []IntentScore{}}
	if baseline != nil {
		sc.BaselineRef = baseline.PackRef
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
	for _, intent := range intents {
		rs := byIntent[intent]
		// Evaluators are pure functions of the set: give them a canonical
		// order all the same.
		rs = slices.Clone(rs)
		slices.SortStableFunc(rs, func(a, b *Run) int { return cmp.Compare(a.Case, b.Case) })
		is := IntentScore{Intent: intent, Runs: len(rs), Metrics: []MetricScore{}}
		target := targetOf(p, intent)
		for _, ev := range evs.List() {
			m := MetricScore{Metric: ev.Name, Value: round(ev.Score(rs)), Bound: BoundFloor, TargetMet: true}
			if ev.Direction == LowerIsBetter {
				m.Bound = BoundCeiling
			}
			if t := targetValue(target, ev.Name); t != nil {
				m.Target = t
				if ev.Direction == LowerIsBetter {
					m.TargetMet = m.Value <= *t+1e-9
				} else {
					m.TargetMet = m.Value >= *t-1e-9
				}
			}
			if b := baseline.value(intent, ev.Name); b != nil {
				m.Baseline = b
				d := round(m.Value - *b)
				m.Delta = &d
				if g := releaseGate(p, ev.Name); g != nil {
					md := g.MaxDelta
					regression := *b - m.Value
					if ev.Direction == LowerIsBetter {
						regression = m.Value - *b
					}
					held := round(regression) <= md+1e-9
					m.MaxDelta, m.GateHeld = &md, &held
				}
			}
			is.Metrics = append(is.Metrics, m)
		}
		sc.Intents = append(sc.Intents, is)
	}
	if sc.Hash, err = sc.digest(); err != nil {
		return nil, err
	}
	return sc, nil
}

func targetOf(p *pack.Pack, intent string) *pack.EvalTarget {
	for i := range p.EvaluationLayer.EvalTargets {
		if p.EvaluationLayer.EvalTargets[i].Intent == intent {
			return &p.EvaluationLayer.EvalTargets[i]
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

func releaseGate(p *pack.Pack, metric string) *pack.ReleaseGate {
	for i := range p.EvaluationLayer.ReleaseGates {
		if p.EvaluationLayer.ReleaseGates[i].Metric == metric {
			return &p.EvaluationLayer.ReleaseGates[i]
		}
	}
	return nil
}

func (s *Scorecard) value(intent, metric string) *float64 {
	if s == nil {
		return nil
	}
	for _, is := range s.Intents {
		if is.Intent != intent {
			continue
		}
		for _, m := range is.Metrics {
			if m.Metric == metric {
				v := m.Value
				return &v
			}
		}
	}
	return nil
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

// TargetsMet reports whether every metric with a target meets it.
func (s *Scorecard) TargetsMet() bool {
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
			fmt.Fprintf(w, "%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", is.Intent, is.Runs, m.Metric, num(m.Value), target,
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
