package codex

import (
	"path/filepath"
	"testing"

	"github.com/contextos/contextos/agent"
	"github.com/contextos/contextos/agent/agenttest"
)

// TestConformance runs agent/agenttest's suite against the backend driving
// the fake CLI. Not parallel: the suite checks for leaked goroutines.
func TestConformance(t *testing.T) {
	agenttest.RunBackendTests(t, func(t *testing.T, s agenttest.Scenario) agent.Backend {
		scenario := map[agenttest.Scenario]string{
			agenttest.ScenarioNormal:       "tool_run",
			agenttest.ScenarioNonZeroExit:  "agenttest_nonzero",
			agenttest.ScenarioMalformed:    "agenttest_malformed",
			agenttest.ScenarioSlow:         "slow",
			agenttest.ScenarioSpawnFailure: "must_not_spawn",
			agenttest.ScenarioHugeText:     "huge_text",
			agenttest.ScenarioLeakedKey:    "agenttest_leaked_key",
		}[s]
		if scenario == "" {
			t.Skipf("no fake CLI scenario for %q", s)
		}
		f := newFake(t, scenario)
		if s == agenttest.ScenarioSpawnFailure {
			f.cfg.Binary = filepath.Join(t.TempDir(), "missing-codex-"+agenttest.Secret)
		}
		return New(f.cfg)
	})
}
