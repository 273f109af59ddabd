package eval

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/pack"
	"github.com/contextos/contextos/replay"
)

// candidatePack is support 1.0.0 as version 2.0.0, changed by f.
func candidatePack(t *testing.T, f func(m map[string]any)) *pack.Pack {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(readTestFile(t, baselineFile), &m); err != nil {
		t.Fatal(err)
	}
	m["pack_meta"].(map[string]any)["pack_version"] = "2.0.0"
	f(m)
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	p, err := pack.DecodeAndValidate(b, nil)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func noMustRefuse(m map[string]any) {
	m["policy_layer"].(map[string]any)["guardrails"].(map[string]any)["must_refuse"] = []any{}
}

// noFinanceGate disables GATE_FINANCE_APPROVAL: the policy rules no
// longer raise it and its own condition never holds (a destructive
// capability's permission must still name a gate).
func noFinanceGate(m map[string]any) {
	pl := m["policy_layer"].(map[string]any)
	g := pl["approval_gates"].([]any)[0].(map[string]any)
	g["when"] = map[string]any{">": []any{map[string]any{"var": "request.context.refund_amount"}, 1e12}}
	var strip func(v any)
	strip = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			delete(v, "requires_approval_gate")
			for _, x := range v {
				strip(x)
			}
		case []any:
			for _, x := range v {
				strip(x)
			}
		}
	}
	strip(pl)
}

// unverifiedPacketCase captures the unverified-identity case's run on
// 1.0.0 as an incident packet (quality_replay_case) in a fresh golden
// directory, with a packet case expecting it REJECTED.
func unverifiedPacketCase(t *testing.T) *Case {
	t.Helper()
	r, err := NewRunner(RunnerOptions{Pack: loadTestPack(t, baselineFile)})
	if err != nil {
		t.Fatal(err)
	}
	s, _, err := loadCase(t, "unverified-identity-refused").script()
	if err != nil {
		t.Fatal(err)
	}
	l, err := r.execute(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	p, err := l.rt.Capture(context.Background(), l.res.RunID, replay.SourceQualityReplayCase)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "packets", "unverified.packet.json"), b)
	path := filepath.Join(dir, "incident-unverified.json")
	writeFile(t, path, []byte(`{"packet":"packets/unverified.packet.json","expect":{"status":"REJECTED"}}`))
	c, err := DecodeCase(path, readTestFile(t, path))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func codes(r *Run) []string {
	var out []string
	for _, p := range r.Problems() {
		out = append(out, string(p.Code))
	}
	return out
}

// Packet cases re-run their recorded inputs on the pack under test: a
// candidate that changes the recorded run's outcome fails them, with or
// without the pinned version in the registry; the pinned replay still
// runs (and must be equal) when the registry has it.
func TestPacketCasesRunTheCandidate(t *testing.T) {
	base := loadTestPack(t, baselineFile)
	// flow4-replay as shipped leaves expect.pauses out; the finance pause
	// is what a candidate disabling the gate changes.
	flow4 := loadCase(t, "flow4-replay")
	flow4.Expect.Pauses = []string{"GATE_FINANCE_APPROVAL"}
	gold := []*Case{flow4, loadCase(t, "correction-flow3"), loadCase(t, "incident-refund-failed"), unverifiedPacketCase(t)}
	for _, tc := range []struct {
		name string
		pack *pack.Pack
		// fail maps the cases that must fail to a code they must report.
		fail map[string]string
	}{
		{"support-1.0.0", base, nil},
		{"support-1.1.0 (a new tool)", loadTestPack(t, "testdata/packs/support-1.1.0-new-tool.json"), nil},
		{"finance gate disabled", candidatePack(t, noFinanceGate), map[string]string{"flow4-replay": CodePauses}},
		{"must_refuse removed", candidatePack(t, noMustRefuse), map[string]string{"incident-unverified": CodeStatus}},
	} {
		for _, withBase := range []bool{true, false} {
			opts := RunnerOptions{Pack: tc.pack}
			if withBase {
				opts.Extra = []*pack.Pack{base}
			}
			r, err := NewRunner(opts)
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range gold {
				run := r.Run(context.Background(), c)
				got := codes(run)
				want, mustFail := tc.fail[c.Name]
				switch {
				case run.Err != "":
					t.Errorf("%s (baseline %t) %s: %s", tc.name, withBase, c.Name, run.Err)
				case mustFail && !slices.Contains(got, want):
					t.Errorf("%s (baseline %t) %s: problems %v, want %s", tc.name, withBase, c.Name, got, want)
				case !mustFail && len(got) > 0:
					t.Errorf("%s (baseline %t) %s: problems %v, want none", tc.name, withBase, c.Name, run.Problems())
				case slices.Contains(got, CodeReplayMismatch):
					t.Errorf("%s (baseline %t) %s: the packet (pinned or re-run) must replay equal: %v", tc.name, withBase, c.Name, run.ReplayDiffs)
				}
			}
		}
	}
}

// The pinned replay is held too: a pinned version whose content differs
// from the packet's pin is a replay mismatch, and a candidate re-run on
// the pack under test cannot hide it.
func TestPacketPinnedReplayHeld(t *testing.T) {
	base := loadTestPack(t, baselineFile)
	changed := loadTestPack(t, baselineFile)
	changed.PackMeta.Description += " (changed)"
	// The registry's 1.0.0 is not the one the packet pins; the candidate
	// is a clean copy under another version.
	r, err := NewRunner(RunnerOptions{Pack: candidatePack(t, func(map[string]any) {}), Extra: []*pack.Pack{changed}})
	if err != nil {
		t.Fatal(err)
	}
	run := r.Run(context.Background(), loadCase(t, "flow4-replay"))
	if run.Err != "" || run.ReplayEqual || !slices.Contains(codes(run), CodeReplayMismatch) {
		t.Errorf("err %q replay_equal %t problems %v: want a replay mismatch", run.Err, run.ReplayEqual, run.Problems())
	}
	r, err = NewRunner(RunnerOptions{Pack: candidatePack(t, func(map[string]any) {}), Extra: []*pack.Pack{base}})
	if err != nil {
		t.Fatal(err)
	}
	if run := r.Run(context.Background(), loadCase(t, "flow4-replay")); !run.ReplayEqual || len(run.Problems()) > 0 {
		t.Errorf("a clean copy with the pinned version: %v", run.Problems())
	}
}

// A packet that cannot run is a problem of gate replay that names the
// packet and never quotes its content.
func TestPacketUnrunnable(t *testing.T) {
	t.Parallel()
	packet := readTestFile(t, filepath.Join(goldenDir, "packets", "flow1.packet.json"))
	for _, tc := range []struct {
		name  string
		write func(dir string)
		want  string
	}{
		{"missing", func(string) {}, "does not exist"},
		{"not JSON", func(dir string) {
			writeFile(t, filepath.Join(dir, "p.json"), []byte("root:x:0:0:root:/root:/bin/bash\n"))
		}, "invalid JSON (at byte"},
		{"duplicate member", func(dir string) {
			writeFile(t, filepath.Join(dir, "p.json"), []byte(strings.Replace(string(packet), `"trace_id":`, `"trace_id": "x", "trace_id":`, 1)))
		}, "trace_id: member name appears more than once"},
		{"unknown member", func(dir string) {
			writeFile(t, filepath.Join(dir, "p.json"), []byte(strings.Replace(string(packet), `"trace_id":`, `"trace_ids": "x", "trace_id":`, 1)))
		}, `unknown field "trace_ids"`},
		{"tampered", func(dir string) {
			writeFile(t, filepath.Join(dir, "p.json"), []byte(strings.Replace(string(packet), `"user_finance_lead_77"`, `"user_finance_lead_78"`, 1)))
		}, "tamper"},
		{"a link out of the directory", func(dir string) {
			if err := os.Symlink("/etc/passwd", filepath.Join(dir, "p.json")); err != nil {
				t.Skip(err)
			}
		}, "a link leading out of it is refused"},
		{"a directory", func(dir string) {
			if err := os.Mkdir(filepath.Join(dir, "p.json"), 0o755); err != nil {
				t.Fatal(err)
			}
		}, "is not a regular file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			tc.write(dir)
			c, err := DecodeCase(filepath.Join(dir, "c.json"), []byte(`{"packet":"p.json","expect":{"status":"DECIDED"}}`))
			if err != nil {
				t.Fatal(err)
			}
			for _, extra := range [][]*pack.Pack{nil, {loadTestPack(t, baselineFile)}} {
				r, err := NewRunner(RunnerOptions{Pack: candidatePack(t, func(map[string]any) {}), Extra: extra})
				if err != nil {
					t.Fatal(err)
				}
				run := r.Run(context.Background(), c)
				probs := run.Problems()
				if len(probs) != 1 || probs[0].Gate != pack.GateReplay || string(probs[0].Code) != CodeCaseError ||
					!strings.Contains(probs[0].Message, "p.json") || !strings.Contains(probs[0].Message, tc.want) {
					t.Fatalf("problems %v, want one replay case_error naming p.json: %s", probs, tc.want)
				}
				if strings.Contains(probs[0].Message, "'r'") || strings.Contains(probs[0].Message, "root:") {
					t.Errorf("the error quotes the file: %s", probs[0].Message)
				}
			}
		})
	}
}

// usageFailingPlanner fails its first turn after the model answered
// (usage reported with the error), then plans as next does.
type usageFailingPlanner struct {
	next  contextos.Planner
	calls int
}

func (p *usageFailingPlanner) Plan(ctx context.Context, req *contextos.PlanRequest) (*contextos.Plan, error) {
	p.calls++
	if p.calls == 1 {
		return nil, &contextos.PlanUsageError{Usage: contextos.PlanUsage{Tokens: 700, CostCents: 5}, Err: errors.New("stream cut")}
	}
	return p.next.Plan(ctx, req)
}

// A packet whose run failed a turn the model had answered re-runs on the
// pack under test charged that turn's usage, as the recorded run was.
func TestPacketFailedTurnUsageCharged(t *testing.T) {
	r, err := NewRunner(RunnerOptions{Pack: loadTestPack(t, baselineFile)})
	if err != nil {
		t.Fatal(err)
	}
	s, _, err := loadCase(t, "flow3-low-value-decided").script()
	if err != nil {
		t.Fatal(err)
	}
	s.planner = &usageFailingPlanner{next: s.planner}
	l, err := r.execute(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	if l.res.Record == nil || l.res.Record.BudgetUsage.CostUSDCents < 5 {
		t.Fatalf("the live run's record %+v: want the failed turn's 5 cents charged", l.res.Record)
	}
	p, err := l.rt.Capture(context.Background(), l.res.RunID, replay.SourceQualityReplayCase)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.PlannerErrors) != 1 || p.PlannerErrors[0].Tokens != 700 || p.PlannerErrors[0].CostCents != 5 {
		t.Fatalf("packet planner errors %+v", p.PlannerErrors)
	}
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "packets", "failed-turn.packet.json"), b)
	path := filepath.Join(dir, "incident-failed-turn.json")
	writeFile(t, path, []byte(`{"packet":"packets/failed-turn.packet.json","expect":{"status":"`+string(l.res.Record.Status)+`"}}`))
	c, err := DecodeCase(path, readTestFile(t, path))
	if err != nil {
		t.Fatal(err)
	}
	run := r.Run(context.Background(), c)
	if run.Err != "" || len(run.Problems()) > 0 {
		t.Fatalf("packet case: err %q problems %v", run.Err, run.Problems())
	}
	if run.CostCents != l.res.Record.BudgetUsage.CostUSDCents {
		t.Errorf("the packet's run on the pack under test charged %v cents, the recorded run %v", run.CostCents, l.res.Record.BudgetUsage.CostUSDCents)
	}
}
