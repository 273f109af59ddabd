package main

import (
	"encoding/json"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/contextos/contextos/internal/refundmodel"
)

// run --planner openai:MODEL plans with a model behind an OpenAI-compatible
// server (the key and base URL from the environment) instead of --plan:
// the refund pauses at the finance gate, --approve answers it and the run
// is DECIDED approved; replaying its packet asks the model nothing.
func TestRunWithModelPlanner(t *testing.T) {
	model := &refundmodel.OpenAI{APIKey: "sk-cli-test"}
	srv := httptest.NewServer(model)
	defer srv.Close()
	t.Setenv("OPENAI_BASE_URL", srv.URL)
	t.Setenv("OPENAI_API_KEY", "sk-cli-test")
	packet := filepath.Join(t.TempDir(), "packet.json")
	args := append(withoutFlag(runArgs("--approve", "GATE_FINANCE_APPROVAL=user_finance_lead_77:finance_lead", "--replay-packet", packet), "--plan"), "--planner", "openai:gpt-test")
	code, out, errs := runCLI(t, "", args...)
	if code != exitOK {
		t.Fatalf("run: %d %s", code, errs)
	}
	var o runOut
	if err := json.Unmarshal([]byte(out), &o); err != nil {
		t.Fatal(err)
	}
	if o.Status != "DECIDED" || o.Record.Outcome != "approved" || len(o.Record.Approvals) != 1 || len(o.ToolResults) != 3 {
		t.Errorf("output = %+v", o)
	}
	if model.Requests() != 3 {
		t.Errorf("the model was asked %d times, want 3", model.Requests())
	}
	if strings.Contains(out, "sk-cli-test") || strings.Contains(errs, "sk-cli-test") {
		t.Error("the output shows the API key")
	}
	code, out, errs = runCLI(t, "", "replay", "--pack", testFile("ctxpack.support-1.0.0.json"), "--allow-unsigned", "--ontology", "ont.support@1.0.0", packet)
	if code != exitOK || !strings.Contains(out, "replay_equal") {
		t.Fatalf("replay: %d %s %s", code, out, errs)
	}
	if model.Requests() != 3 {
		t.Errorf("the replay asked the model (%d requests)", model.Requests())
	}
}

// --planner errors are usage errors that name the flag and never print a
// key.
func TestRunModelPlannerFlagErrors(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "")
	t.Setenv("OPENAI_BASE_URL", "")
	t.Setenv("ANTHROPIC_API_KEY", "")
	t.Setenv("ANTHROPIC_BASE_URL", "")
	noPlan := withoutFlag(runArgs(), "--plan")
	tests := map[string]struct {
		args []string
		want string
	}{
		"both":          {slices.Concat(runArgs(), []string{"--planner", "openai:gpt-test"}), "alternatives"},
		"no provider":   {slices.Concat(noPlan, []string{"--planner", "gpt-test"}), "want openai:MODEL"},
		"unknown":       {slices.Concat(noPlan, []string{"--planner", "gemini:pro"}), "openai or anthropic"},
		"no openai key": {slices.Concat(noPlan, []string{"--planner", "openai:gpt-test"}), "OPENAI_API_KEY"},
		"no claude key": {slices.Concat(noPlan, []string{"--planner", "anthropic:claude-x"}), "ANTHROPIC_API_KEY"},
		"neither":       {noPlan, "--plan (or --planner)"},
		"resume both":   {[]string{"resume", "run_1", "--store", "sqlite:" + filepath.Join(t.TempDir(), "x.db"), "--approve", "G=a:b", "--plan", "p", "--planner", "openai:m", "--tools", "t", "--pack", "p"}, "alternatives"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			code, _, errs := runCLI(t, "", tc.args...)
			if code != exitUsage || !strings.Contains(errs, tc.want) {
				t.Errorf("exit %d, stderr %q; want %d and %q", code, errs, exitUsage, tc.want)
			}
		})
	}
}
