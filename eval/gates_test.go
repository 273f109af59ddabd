package eval

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/contextos/contextos/pack"
)

// TestPackGate: with the golden gates in ValidateOptions, signing and
// storing refuse a candidate that fails them.
func TestPackGate(t *testing.T) {
	t.Parallel()
	cases, err := Load(goldenDir)
	if err != nil {
		t.Fatal(err)
	}
	base := loadTestPack(t, baselineFile)
	opts := &pack.ValidateOptions{Gates: []pack.GateFunc{PackGate(cases, GateOptions{Baseline: base})}}
	key := ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize))
	tests := []struct {
		name  string
		file  string
		codes []string
	}{
		{"baseline", baselineFile, nil},
		{"policy regression", "testdata/packs/support-2.0.0-policy-regression.json", []string{CodeTargetMissed, CodeReleaseGate}},
		{"manifest change", "testdata/packs/support-1.1.0-new-tool.json", []string{CodeToolSurface, CodeBudgetReport}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := loadTestPack(t, tc.file)
			signed, err := pack.Sign(p, "kid_test", key, opts)
			if tc.codes == nil {
				if err != nil {
					t.Fatalf("Sign: %v", err)
				}
				if _, err := pack.NewMemoryRegistry(opts).Put(context.Background(), signed); err != nil {
					t.Fatalf("Put: %v", err)
				}
				return
			}
			var ve *pack.ValidationError
			if !errors.Is(err, pack.ErrInvalid) || !errors.As(err, &ve) {
				t.Fatalf("Sign = %v, want ErrInvalid", err)
			}
			for _, code := range tc.codes {
				if !ve.Has(pack.Code(code)) {
					t.Errorf("no %s problem in %v", code, ve.Problems)
				}
			}
			for _, p := range ve.Problems {
				if p.Gate != pack.GateReplay && p.Gate != pack.GateEvaluation {
					t.Errorf("problem of gate %q: %v", p.Gate, p)
				}
			}
			plain, err := pack.Sign(p, "kid_test", key, nil)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := pack.NewMemoryRegistry(opts).Put(context.Background(), plain); !errors.Is(err, pack.ErrInvalid) {
				t.Errorf("Put = %v, want ErrInvalid", err)
			}
		})
	}
}

// TestReplayGate: a pack whose content changed under the same ref no
// longer replays the recorded packets; the scripted runs still replay
// their own.
func TestReplayGate(t *testing.T) {
	p := loadTestPack(t, baselineFile)
	p.ContractMeta.Description = "changed without a new version"
	r, err := NewRunner(RunnerOptions{Pack: p})
	if err != nil {
		t.Fatal(err)
	}
	cases, err := Load(goldenDir)
	if err != nil {
		t.Fatal(err)
	}
	runs := r.RunAll(context.Background(), cases)
	var failed []string
	for _, prob := range ReplayGate(runs) {
		if prob.Gate != pack.GateReplay || prob.Code != CodeReplayMismatch {
			t.Errorf("unexpected problem %v", prob)
		}
		failed = append(failed, prob.Path)
	}
	want := []string{"correction-flow3.expect.replay_equal", "flow4-replay.expect.replay_equal", "incident-refund-failed.expect.replay_equal"}
	if !slices.Equal(failed, want) {
		t.Errorf("replay gate failed %v, want %v", failed, want)
	}
}

// TestRunMeasures: the simulated clock measures the scripted latencies
// and the cost is the record's.
func TestRunMeasures(t *testing.T) {
	r, err := NewRunner(RunnerOptions{Pack: loadTestPack(t, baselineFile)})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		duration int64
		cost     float64
		pauses   []string
		calls    int
	}{
		// two planner turns of 600 ms, lookup 120, policy 80, refund 450
		{"flow1-high-value-approved", 1850, 0.9, []string{"GATE_FINANCE_APPROVAL"}, 3},
		{"flow2-unverified-denied", 1400, 0.5, nil, 2},
		{"fraud-escalation", 0, 0, nil, 0},
		{"flow4-replay", 1850, 0.9, []string{"GATE_FINANCE_APPROVAL"}, 3},
	}
	for _, tc := range tests {
		run := r.Run(context.Background(), loadCase(t, tc.name))
		if run.Err != "" {
			t.Fatalf("%s: %s", tc.name, run.Err)
		}
		if run.DurationMS != tc.duration || run.CostCents != tc.cost || !slices.Equal(run.Pauses, tc.pauses) || len(run.Calls) != tc.calls {
			t.Errorf("%s: duration %d cost %v pauses %v calls %d; want %d %v %v %d", tc.name, run.DurationMS, run.CostCents, run.Pauses, len(run.Calls),
				tc.duration, tc.cost, tc.pauses, tc.calls)
		}
		if !run.Stable || !run.ReplayEqual || len(run.Problems()) != 0 {
			t.Errorf("%s: stable %t replay_equal %t problems %v", tc.name, run.Stable, run.ReplayEqual, run.Problems())
		}
	}
	if _, err := NewRunner(RunnerOptions{}); err == nil {
		t.Error("NewRunner without a pack: no error")
	}
}

// A scripted result that fails after spending (a paid call, an agent's
// tokens) is charged like a live adapter's failed attempt: its cost
// reaches the record and the run replays equal.
func TestScriptedFailureIsCharged(t *testing.T) {
	r, err := NewRunner(RunnerOptions{Pack: loadTestPack(t, baselineFile)})
	if err != nil {
		t.Fatal(err)
	}
	run := func(cost float64, tokens int) *Run {
		c := loadCase(t, "refund-tool-fails")
		rs := c.Tools["adp_payments.issue_refund"]
		rs[0].CostCents, rs[0].Tokens = cost, tokens
		got := r.Run(context.Background(), c)
		if got.Err != "" || !got.ReplayEqual || !got.Stable {
			t.Fatalf("run: %s, replay equal %t, stable %t", got.Err, got.ReplayEqual, got.Stable)
		}
		return got
	}
	free, paid := run(0, 0), run(0.75, 300)
	if d := paid.CostCents - free.CostCents; d != 0.75 {
		t.Errorf("the failed refund's 0.75 cents added %v cents to the record", d)
	}
	path := filepath.Join(goldenDir, "refund-tool-fails.json")
	var doc map[string]any
	if err := json.Unmarshal(readTestFile(t, path), &doc); err != nil {
		t.Fatal(err)
	}
	doc["tools"].(map[string]any)["adp_payments.issue_refund"].([]any)[0].(map[string]any)["tokens"] = -1
	b, _ := json.Marshal(doc)
	if _, err := DecodeCase(path, b); !errors.Is(err, ErrCase) || !strings.Contains(err.Error(), "tokens") {
		t.Errorf("negative tokens: %v, want ErrCase naming tokens", err)
	}
}
