package eval

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/contextos/contextos/pack"
)

// ReplayGate is the replay gate over golden runs: every case ran, compiled
// twice to the same hash, tool manifest and budget report, surfaced the
// expected tools and gave the expected manifest and budget report, and
// its packet replayed as expected (replay_equal). Problems have Gate
// pack.GateReplay.
func ReplayGate(runs []*Run) []pack.Problem {
	var out []pack.Problem
	for _, r := range runs {
		for _, p := range r.Problems() {
			if p.Gate == pack.GateReplay {
				out = append(out, p)
			}
		}
	}
	return out
}

// EvaluationGate is the evaluation gate over a scorecard: the scorecard
// has no problems of its own (Scorecard.Problems), every score is a
// number, every metric meets the target it is held to and every release
// gate evaluated against the baseline held. Problems have Gate
// pack.GateEvaluation; a metric's path is "<intent>.<metric>".
func EvaluationGate(sc *Scorecard) []pack.Problem {
	if sc == nil {
		return nil
	}
	out := slices.Clone(sc.Problems)
	for _, is := range sc.Intents {
		for _, m := range is.Metrics {
			path := is.Intent + "." + m.Metric
			switch {
			case m.Invalid != "":
				out = append(out, pack.Problem{Gate: pack.GateEvaluation, Code: CodeInvalidScore, Path: path,
					Message: fmt.Sprintf("%s has no value over %d run(s): %s", m.Metric, is.Runs, m.Invalid)})
			case !m.TargetMet:
				op := "at least"
				if m.Bound == BoundCeiling {
					op = "at most"
				}
				out = append(out, pack.Problem{Gate: pack.GateEvaluation, Code: CodeTargetMissed, Path: path,
					Message: fmt.Sprintf("%s is %s over %d run(s); the target is %s %s", m.Metric, num(m.Value), is.Runs, op, optNum(m.Target))})
			}
			if m.GateHeld == nil || *m.GateHeld {
				continue
			}
			msg := fmt.Sprintf("%s moved from %s to %s (delta %s); the release gate allows a regression of at most %s", m.Metric, optNum(m.Baseline), num(m.Value), optNum(m.Delta), optNum(m.MaxDelta))
			if m.Invalid != "" || m.Baseline == nil {
				msg = fmt.Sprintf("%s cannot be compared with the baseline (a value is not a number); the release gate fails closed", m.Metric)
			}
			out = append(out, pack.Problem{Gate: pack.GateEvaluation, Code: CodeReleaseGate, Path: path, Message: msg})
		}
	}
	return out
}

// GateOptions configure PackGate.
type GateOptions struct {
	// Baseline is the version the release gates compare against; nil
	// checks the eval targets only.
	Baseline *pack.Pack
	// Ontologies, Validation: as RunnerOptions.
	Ontologies []string
	Validation *pack.ValidateOptions
	// Evaluators: nil is NewEvaluators().
	Evaluators *Evaluators
}

// PackGate returns the replay and evaluation gates over the golden cases
// as a pack.GateFunc, for pack.ValidateOptions.Gates: validating (signing,
// storing) a pack then runs the cases on it and refuses it when a gate
// fails. Given a baseline, the pack is held to the stricter of the
// baseline's eval targets and release gates and its own (Bar); the
// baseline's scorecard is computed once. No cases is a problem (code
// no_cases): a gate with nothing to run on refuses every pack.
func PackGate(cases []*Case, opts GateOptions) pack.GateFunc {
	var (
		once     sync.Once
		baseline *Scorecard
		baseErr  error
	)
	return func(p *pack.Pack) []pack.Problem {
		if len(cases) == 0 {
			return []pack.Problem{noCases(pack.GateReplay)}
		}
		ctx := context.Background()
		if opts.Baseline != nil {
			once.Do(func() {
				var runs []*Run
				if runs, baseErr = runCases(ctx, opts.Baseline, nil, cases, opts.Ontologies, opts.Validation); baseErr == nil {
					baseline, baseErr = Score(opts.Baseline, runs, ScoreOptions{Evaluators: opts.Evaluators, Cases: cases})
				}
			})
			if baseErr != nil {
				return []pack.Problem{{Gate: pack.GateEvaluation, Code: CodeRunner, Message: "the baseline's golden runs failed: " + baseErr.Error()}}
			}
		}
		runs, err := runCases(ctx, p, opts.Baseline, cases, opts.Ontologies, opts.Validation)
		if err != nil {
			return []pack.Problem{{Gate: pack.GateReplay, Code: CodeRunner, Message: "the golden runs could not be set up: " + err.Error()}}
		}
		sc, err := Score(p, runs, ScoreOptions{Evaluators: opts.Evaluators, Baseline: baseline, Cases: cases})
		if err != nil {
			return []pack.Problem{{Gate: pack.GateEvaluation, Code: CodeRunner, Message: err.Error()}}
		}
		return slices.Concat(ReplayGate(runs), EvaluationGate(sc))
	}
}

// noCases is the problem of a golden step with no cases to run.
func noCases(gate string) pack.Problem {
	return pack.Problem{Gate: gate, Code: CodeNoCases, Message: "there are no golden cases: nothing was compiled, replayed or scored (give a golden case directory or cases)"}
}

// runCases runs the cases on p, with extra in the registry.
func runCases(ctx context.Context, p, extra *pack.Pack, cases []*Case, ontologies []string, v *pack.ValidateOptions) ([]*Run, error) {
	o := RunnerOptions{Pack: p, Ontologies: ontologies, Validation: v}
	if extra != nil {
		o.Extra = []*pack.Pack{extra}
	}
	r, err := NewRunner(o)
	if err != nil {
		return nil, err
	}
	return r.RunAll(ctx, cases), nil
}

// VerifierOptions configure Verifier.
type VerifierOptions struct {
	// Ontologies, Validation: as RunnerOptions.
	Ontologies []string
	Validation *pack.ValidateOptions
}

// ErrVerify is a golden replay that did not hold for a version being
// promoted or restored; the error is a *VerifyError.
var ErrVerify = errors.New("eval: golden replay does not hold")

// VerifyError lists the replay problems of the version verified.
type VerifyError struct {
	Ref      pack.Ref
	Problems []pack.Problem
}

func (e *VerifyError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: golden replay of %s: %d problem(s)", ErrVerify.Error(), e.Ref, len(e.Problems))
	for i, p := range e.Problems {
		if i == 3 {
			fmt.Fprintf(&b, "; …")
			break
		}
		fmt.Fprintf(&b, "; %s: %s", p.Path, p.Message)
	}
	return b.String()
}

// Unwrap makes a VerifyError match ErrVerify.
func (e *VerifyError) Unwrap() error { return ErrVerify }

// Verifier returns the golden replay a registry's Deployments run before
// promoting a pinned version and after rolling back to one
// (pack.VerifyFunc): it reads the version from reg, runs the golden cases
// on it and fails with a *VerifyError when the replay gate does (a compile
// that is not stable, a tool manifest or budget report other than the
// case expects, a packet that does not replay equal). No cases fails too
// (code no_cases): a promotion through it is blocked, and a rollback
// through it re-pins and reports pack.ErrRollbackUnverified. The
// environment does not change the cases.
func Verifier(reg pack.Registry, cases []*Case, opts VerifierOptions) pack.VerifyFunc {
	return func(ctx context.Context, _ string, ref pack.Ref) error {
		if len(cases) == 0 {
			// Nothing replayed is nothing verified: a promotion never
			// passes without evidence.
			return &VerifyError{Ref: ref, Problems: []pack.Problem{noCases(pack.GateReplay)}}
		}
		e, err := reg.Get(ctx, ref)
		if err != nil {
			return err
		}
		doc := e.Document
		if e.Signed {
			sp, err := pack.ParseSigned(doc)
			if err != nil {
				return err
			}
			doc = sp.Pack
		}
		p, err := pack.DecodeAndValidate(doc, validation(opts.Validation))
		if err != nil {
			return err
		}
		runs, err := runCases(ctx, p, nil, cases, opts.Ontologies, opts.Validation)
		if err != nil {
			return err
		}
		if probs := ReplayGate(runs); len(probs) > 0 {
			return &VerifyError{Ref: ref, Problems: probs}
		}
		return nil
	}
}
