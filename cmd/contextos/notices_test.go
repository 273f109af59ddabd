package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/compiler"
	"github.com/contextos/contextos/runcontext"
	"github.com/google/go-cmp/cmp"
)

// editJSON writes the JSON file src, changed by edit, into dir as name,
// and returns its path.
func editJSON(t *testing.T, dir, name, src string, edit func(doc map[string]any)) string {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	edit(doc)
	if b, err = json.Marshal(doc); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// contextos run under the read_only safety mode says which tools it
// withholds, in its output and on stderr; a capability whose permission
// declares a read-only mode on an adapter that can write is not withheld
// and its call runs as a read.
func TestRunSaysWhatTheSafetyModeWithholds(t *testing.T) {
	t.Parallel()
	tooling := func(doc map[string]any) (adapters, perms []any) {
		tl := doc["tooling_layer"].(map[string]any)
		return tl["adapter_registry"].([]any), tl["permissions"].([]any)
	}
	refund := compiler.ModeWithheld{Capability: "adp_payments.issue_refund", ApprovalMode: runcontext.Destructive}
	tests := []struct {
		name       string
		edit       func(doc map[string]any)
		withheld   []compiler.ModeWithheld
		message    string
		lookupRuns bool
	}{
		{"lookup declared read_only on an adapter that can write", func(doc map[string]any) {
			adapters, perms := tooling(doc)
			adapters[0].(map[string]any)["approval_mode"] = "local_write"
			perms[0].(map[string]any)["approval_mode"] = "read_only"
		}, []compiler.ModeWithheld{refund},
			"safety_mode read_only withholds a capability the pack allows: adp_payments.issue_refund (destructive); the planner is not offered it and its calls are refused. A run context with safety_mode destructive surfaces it",
			true},
		{"lookup at its adapter's local_write", func(doc map[string]any) {
			adapters, perms := tooling(doc)
			adapters[0].(map[string]any)["approval_mode"] = "local_write"
			perms[0].(map[string]any)["arg_constraints"] = map[string]any{"idempotency_key": map[string]any{"required": true}}
		}, []compiler.ModeWithheld{{Capability: "adp_orders.lookup", ApprovalMode: runcontext.LocalWrite}, refund},
			"safety_mode read_only withholds 2 capabilities the pack allows: adp_orders.lookup (local_write), adp_payments.issue_refund (destructive); the planner is not offered them and their calls are refused. A run context with safety_mode destructive surfaces them",
			false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			packFile := editJSON(t, dir, "pack.json", testFile("ctxpack.support-1.0.0.json"), tc.edit)
			rcFile := editJSON(t, dir, "run-context.json", testFile("run-context.support.json"), func(doc map[string]any) {
				doc["safety_mode"] = "read_only" // the runtime's default
			})
			plan := filepath.Join(dir, "plan.json")
			os.WriteFile(plan, []byte(`[{"steps": [{"capability_id": "adp_orders.lookup", "args": {"order_id": "ord_881"}}]}]`), 0o644)
			code, out, errs := runCLI(t, "", "run", "--pack", packFile, "--allow-unsigned", "--request", testFile("invoke.support-refund.json"),
				"--run-context", rcFile, "--plan", plan, "--tools", testFile("tools.refund.json"), "--evidence", testFile("evidence.support.json"),
				"--ontology", "ont.support@1.0.0", "--now", "2026-05-04T09:31:00Z")
			if code != exitOK {
				t.Fatalf("run: %d %s", code, errs)
			}
			var o struct {
				Notices     []contextos.Notice `json:"notices"`
				ToolResults []struct {
					CapabilityID string `json:"capability_id"`
					Status       string `json:"status"`
				} `json:"tool_results"`
			}
			if err := json.Unmarshal([]byte(out), &o); err != nil {
				t.Fatal(err)
			}
			want := []contextos.Notice{{Code: contextos.NoticeToolsWithheld, Message: tc.message, SafetyMode: runcontext.ReadOnly, Withheld: tc.withheld}}
			if diff := cmp.Diff(want, o.Notices); diff != "" {
				t.Errorf("notices (-want +got):\n%s", diff)
			}
			if wantErr := "contextos run: notice: " + tc.message + "\n"; errs != wantErr {
				t.Errorf("stderr = %q, want %q", errs, wantErr)
			}
			ran := len(o.ToolResults) == 1 && o.ToolResults[0].CapabilityID == "adp_orders.lookup" && o.ToolResults[0].Status == "ok"
			if ran != tc.lookupRuns {
				t.Errorf("lookup ran %v, want %v: %+v", ran, tc.lookupRuns, o.ToolResults)
			}
		})
	}
}
