package claudecode

import (
	"path/filepath"
	"testing"

	"github.com/contextos/contextos/agent"
	"github.com/contextos/contextos/agent/agenttest"
)

// TestConformance runs agenttest's suite against the backend driving the
// fake claude.
func TestConformance(t *testing.T) {
	scenarios := map[agenttest.Scenario]string{
		agenttest.ScenarioNormal:      "tool_roundtrip",
		agenttest.ScenarioNonZeroExit: "exit3",
		agenttest.ScenarioMalformed:   "conformance_malformed",
		agenttest.ScenarioSlow:        "slow",
		agenttest.ScenarioHugeText:    "huge_text",
		agenttest.ScenarioLeakedKey:   "leaked_key",
	}
	agenttest.RunBackendTests(t, func(t *testing.T, s agenttest.Scenario) agent.Backend {
		if s == agenttest.ScenarioSpawnFailure {
			return New(Config{Binary: filepath.Join(t.TempDir(), "no-such-claude-"+agenttest.Secret)})
		}
		name, ok := scenarios[s]
		if !ok {
			t.Fatalf("no fake claude scenario for %q", s)
		}
		return newFake(t, name, Config{})
	})
}
