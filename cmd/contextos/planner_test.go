package main

import (
	"encoding/json"
	"math"
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
		"both":                   {slices.Concat(runArgs(), []string{"--planner", "openai:gpt-test"}), "alternatives"},
		"no provider":            {slices.Concat(noPlan, []string{"--planner", "gpt-test"}), "want openai:MODEL"},
		"unknown":                {slices.Concat(noPlan, []string{"--planner", "gemini:pro"}), "openai or anthropic"},
		"no openai key":          {slices.Concat(noPlan, []string{"--planner", "openai:gpt-test"}), "OPENAI_API_KEY"},
		"no claude key":          {slices.Concat(noPlan, []string{"--planner", "anthropic:claude-x"}), "ANTHROPIC_API_KEY"},
		"neither":                {noPlan, "--plan (or --planner)"},
		"price without planner":  {slices.Concat(runArgs(), []string{"--price", "gpt-test=2/8"}), "give --planner"},
		"bad price":              {slices.Concat(noPlan, []string{"--planner", "openai:gpt-test", "--price", "gpt-test=2"}), "--price"},
		"price of another model": {slices.Concat(noPlan, []string{"--planner", "openai:gpt-test", "--price", "gpt-other=2/8"}), "--planner plans with"},
		"resume both":            {[]string{"resume", "run_1", "--store", "sqlite:" + filepath.Join(t.TempDir(), "x.db"), "--approve", "G=a:b", "--plan", "p", "--planner", "openai:m", "--tools", "t", "--pack", "p"}, "alternatives"},
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

// --price prices the model's turns: they are charged to the cost budget,
// and a price that makes the first turn cost more than max_cost_cents
// (25 cents in the run context) stops the run before any tool call.
// Without --price the turns cost nothing, and run says so.
func TestRunModelPlannerPrice(t *testing.T) {
	for _, tc := range []struct {
		name       string
		price      []string
		status     string
		wantCents  float64
		wantCalls  int
		wantReason string
		wantWarn   bool
	}{
		// Each turn: 1200 prompt tokens (1000 cached) and 60 completion
		// tokens; 3 turns at 2/8/0.5 USD per million tokens.
		{name: "priced", price: []string{"--price", "gpt-test=2/8/0.5"}, status: "DECIDED", wantCents: 3 * (200*2 + 1000*0.5 + 60*8) / 1e4, wantCalls: 3},
		{name: "over the cost budget", price: []string{"--price", "gpt-test=1000/1000"}, status: "ESCALATED", wantCents: 126, wantReason: "budget_exceeded"},
		{name: "no price", status: "DECIDED", wantCalls: 3, wantWarn: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			model := &refundmodel.OpenAI{APIKey: "sk-cli-test"}
			srv := httptest.NewServer(model)
			defer srv.Close()
			t.Setenv("OPENAI_BASE_URL", srv.URL)
			t.Setenv("OPENAI_API_KEY", "sk-cli-test")
			args := slices.Concat(withoutFlag(runArgs("--approve", "GATE_FINANCE_APPROVAL=user_finance_lead_77:finance_lead"), "--plan"), []string{"--planner", "openai:gpt-test"}, tc.price)
			code, out, errs := runCLI(t, "", args...)
			if code != exitOK {
				t.Fatalf("run: %d %s", code, errs)
			}
			var o struct {
				Status string `json:"status"`
				Record struct {
					BudgetUsage struct {
						CostUSDCents float64 `json:"cost_usd_cents"`
					} `json:"budget_usage"`
					Rationale struct {
						Summary string `json:"summary"`
					} `json:"rationale"`
				} `json:"decision_record"`
				ToolResults []json.RawMessage `json:"tool_results"`
			}
			if err := json.Unmarshal([]byte(out), &o); err != nil {
				t.Fatal(err)
			}
			if o.Status != tc.status || len(o.ToolResults) != tc.wantCalls || !strings.Contains(o.Record.Rationale.Summary, tc.wantReason) {
				t.Errorf("status %s, %d tool results, rationale %q; want %s, %d, %q", o.Status, len(o.ToolResults), o.Record.Rationale.Summary, tc.status, tc.wantCalls, tc.wantReason)
			}
			if got := o.Record.BudgetUsage.CostUSDCents; math.Abs(got-tc.wantCents) > 1e-6 {
				t.Errorf("cost charged %v cents, want %v", got, tc.wantCents)
			}
			if warned := strings.Contains(errs, "no --price"); warned != tc.wantWarn {
				t.Errorf("stderr %q: warned %v, want %v", errs, warned, tc.wantWarn)
			}
		})
	}
}
