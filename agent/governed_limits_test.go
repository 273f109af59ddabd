package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/agent"
	"github.com/contextos/contextos/agent/agenttest"
	"github.com/contextos/contextos/contextostest"
	"github.com/contextos/contextos/gateway"
)

// The keys of the limits tests' backend: a sandbox mode of its own beside
// the universal keys.
const sandboxKey = "backend.coder.exec.sandbox_mode"

var limitCaps = agent.NewCapabilities(agent.CapNonInteractive, agent.CapModel, agent.CapAddDirs, agent.CapExternalSandbox, sandboxKey)

func limitBackend() *agenttest.Backend {
	return agenttest.New("coder", limitCaps, agenttest.Script{Defaults: agent.Defaults{Keys: []string{sandboxKey}},
		Completion: agent.Completion{FinalText: "done"}})
}

func raw(vs ...string) []json.RawMessage {
	out := make([]json.RawMessage, len(vs))
	for i, v := range vs {
		out[i] = json.RawMessage(v)
	}
	return out
}

// A governed call's arguments are a model's choice: it cannot widen what
// the host configured. Every run option that widens what the agent may
// touch — its working directory, extra writable directories, the sandbox
// mode, a dangerous extension — is refused before the backend is asked to
// run, with a *LimitError naming the argument, unless the host's options
// allow that very value; with nothing configured the run gets the host's
// working directory, no extra directory and the backend's defaults.
func TestGovernedCallCannotWidenTheHostLimits(t *testing.T) {
	t.Parallel()
	host, other, extra := t.TempDir(), t.TempDir(), t.TempDir()
	sub := filepath.Join(host, "sub")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	none := &agent.AdapterOptions{}
	allowing := &agent.AdapterOptions{Allow: agent.CallLimits{
		WorkingDirs: []string{host},
		AddDirs:     []string{extra, sub},
		Extensions: map[string][]json.RawMessage{
			sandboxKey:     raw(`"read-only"`, `"workspace-write"`),
			agent.CapModel: raw(`"gpt-test"`),
		},
	}}
	fixed := &agent.AdapterOptions{WorkingDir: host, Extensions: map[string]json.RawMessage{sandboxKey: json.RawMessage(`"read-only"`)},
		Allow: agent.CallLimits{AddDirs: []string{sub}, WorkingDirs: []string{other}}}
	type refusal struct {
		Field, Key string
		Fixed      bool
	}
	for _, tc := range []struct {
		name string
		opts *agent.AdapterOptions
		args map[string]any
		want *refusal // nil: the call runs
		// what the run got when it runs
		wantDir  string
		wantAdd  []string
		wantExts map[string]string
	}{
		{name: "nothing configured runs with the defaults", opts: none, args: map[string]any{}, wantDir: ""},
		{name: "nothing configured: another working dir", opts: none, args: map[string]any{"working_dir": other}, want: &refusal{"working_dir", "", false}},
		{name: "nothing configured: the process's own dir named", opts: none, args: map[string]any{"working_dir": "."}, want: &refusal{"working_dir", "", false}},
		{name: "nothing configured: danger-full-access", opts: none, args: map[string]any{"extensions": map[string]any{sandboxKey: "danger-full-access"}}, want: &refusal{"extensions", sandboxKey, false}},
		{name: "nothing configured: an extra writable dir", opts: none, args: map[string]any{"extensions": map[string]any{agent.CapAddDirs: map[string]any{"dirs": []any{extra}}}}, want: &refusal{"extensions", agent.CapAddDirs, false}},
		{name: "nothing configured: the dangerous external sandbox", opts: none, args: map[string]any{"extensions": map[string]any{agent.CapExternalSandbox: true}}, want: &refusal{"extensions", agent.CapExternalSandbox, false}},
		{name: "nothing configured: interactive", opts: none, args: map[string]any{"extensions": map[string]any{agent.CapNonInteractive: false}}, want: &refusal{"extensions", agent.CapNonInteractive, false}},
		{name: "nothing configured: a model", opts: none, args: map[string]any{"extensions": map[string]any{agent.CapModel: "gpt-test"}}, want: &refusal{"extensions", agent.CapModel, false}},

		{name: "allowed working dir", opts: allowing, args: map[string]any{"working_dir": host + "/./sub/.."}, wantDir: host},
		{name: "working dir not allowed", opts: allowing, args: map[string]any{"working_dir": other}, want: &refusal{"working_dir", "", false}},
		{name: "allowed extra dirs and values", opts: allowing,
			args:    map[string]any{"working_dir": host, "extensions": map[string]any{agent.CapAddDirs: map[string]any{"dirs": []any{extra, "sub"}}, sandboxKey: "workspace-write", agent.CapModel: "gpt-test"}},
			wantDir: host, wantAdd: []string{extra, sub}, wantExts: map[string]string{sandboxKey: `"workspace-write"`, agent.CapModel: `"gpt-test"`}},
		{name: "one extra dir not allowed", opts: allowing, args: map[string]any{"extensions": map[string]any{agent.CapAddDirs: map[string]any{"dirs": []any{extra, other}}}}, want: &refusal{"extensions", agent.CapAddDirs, false}},
		{name: "a relative extra dir with no working dir", opts: allowing, args: map[string]any{"extensions": map[string]any{agent.CapAddDirs: map[string]any{"dirs": []any{"sub"}}}}, want: &refusal{"extensions", agent.CapAddDirs, false}},
		{name: "a malformed extra dirs value", opts: allowing, args: map[string]any{"extensions": map[string]any{agent.CapAddDirs: []any{extra}}}, want: &refusal{"extensions", agent.CapAddDirs, false}},
		{name: "sandbox value not allowed", opts: allowing, args: map[string]any{"extensions": map[string]any{sandboxKey: "danger-full-access"}}, want: &refusal{"extensions", sandboxKey, false}},
		{name: "dangerous key not listed", opts: allowing, args: map[string]any{"extensions": map[string]any{agent.CapExternalSandbox: true}}, want: &refusal{"extensions", agent.CapExternalSandbox, false}},

		{name: "fixed working dir repeated", opts: fixed, args: map[string]any{"working_dir": host + "/", "extensions": map[string]any{sandboxKey: "read-only"}},
			wantDir: host, wantExts: map[string]string{sandboxKey: `"read-only"`}},
		{name: "fixed working dir changed (Allow.WorkingDirs unused)", opts: fixed, args: map[string]any{"working_dir": other}, want: &refusal{"working_dir", "", true}},
		{name: "fixed sandbox changed", opts: fixed, args: map[string]any{"extensions": map[string]any{sandboxKey: "workspace-write"}}, want: &refusal{"extensions", sandboxKey, true}},
		{name: "extra dir relative to the fixed working dir", opts: fixed, args: map[string]any{"extensions": map[string]any{agent.CapAddDirs: map[string]any{"dirs": []any{"sub"}}}},
			wantDir: host, wantAdd: []string{sub}, wantExts: map[string]string{sandboxKey: `"read-only"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			be := limitBackend()
			opts := *tc.opts
			opts.AdapterID, opts.Scopes = "adp_coder", []string{"repo.write"}
			ad := agent.NewAdapter(be, &opts)
			args := map[string]any{"prompt": fixPrompt}
			for k, v := range tc.args {
				args[k] = v
			}
			out, err := callAdapter(context.Background(), ad, args)
			if tc.want != nil {
				if n := be.Runs(); n != 0 {
					t.Fatalf("the backend ran %d times", n)
				}
				var le *agent.LimitError
				if out != nil || !errors.Is(err, agent.ErrNotAllowed) || !errors.As(err, &le) {
					t.Fatalf("Call = %v, %v; want a *LimitError", out, err)
				}
				if diff := cmp.Diff(*tc.want, refusal{le.Field, le.Key, le.Fixed}); diff != "" {
					t.Errorf("refusal (-want +got):\n%s", diff)
				}
				var te *gateway.ToolError
				if !errors.As(err, &te) || te.Code != gateway.CodeInvalidInput || te.Retryable || te.Details["field"] != tc.want.Field {
					t.Errorf("tool error %+v, want a non-retryable invalid_input naming %s", te, tc.want.Field)
				}
				return
			}
			if err != nil {
				t.Fatalf("Call: %v", err)
			}
			reqs := be.Requests()
			if len(reqs) != 1 {
				t.Fatalf("%d runs", len(reqs))
			}
			p := reqs[0]
			exts := map[string]string{}
			for k, v := range p.Extensions {
				if k != agent.CapAddDirs {
					exts[k] = string(v)
				}
			}
			if len(exts) == 0 {
				exts = nil
			}
			got := struct {
				Dir  string
				Add  []string
				Exts map[string]string
			}{p.WorkingDir, p.AddDirs, exts}
			want := struct {
				Dir  string
				Add  []string
				Exts map[string]string
			}{tc.wantDir, tc.wantAdd, tc.wantExts}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("the run got (-want +got):\n%s", diff)
			}
		})
	}
}

// Through the runtime: a plan (the model's choice) asking the agent for
// danger-full-access and another working directory gets the call
// rejected as invalid_input naming the field; the agent never runs.
// plainPrompt asks for a change the code review gate does not hold (the
// pack's per-call gate holds a prompt that mentions refunds), so the call
// reaches the adapter's own checks without an approval.
const plainPrompt = "Fix the rounding bug in internal/calc/round.go and add a test."

func TestGovernedPlanCannotPickTheSandbox(t *testing.T) {
	t.Parallel()
	for name, args := range map[string]map[string]any{
		"sandbox":     {"prompt": plainPrompt, "extensions": map[string]any{sandboxKey: "danger-full-access"}},
		"working_dir": {"prompt": plainPrompt, "working_dir": "/"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			be := limitBackend()
			ad := agent.NewAdapter(be, &agent.AdapterOptions{AdapterID: "adp_coder", Scopes: []string{"repo.write"}})
			bad := fixPlan(args)
			bad.Decision = nil
			planner := contextostest.NewPlanner(bad, &contextos.Plan{Decision: &contextos.DecisionProposal{DecisionKey: "code.change.apply", Outcome: "abandoned", Rationale: "refused"}})
			h := newHarness(t, planner, ad.Registration())
			req, rc := planRequest(t)
			res := h.Invoke(req, rc)
			r := res.ToolResults[0]
			if r.Status != gateway.StatusError || r.Error == nil || r.Error.Code != gateway.CodeInvalidInput {
				t.Fatalf("result %s %+v, want invalid_input", r.Status, r.Error)
			}
			if field := name; r.Error.Details["field"] != map[string]string{"sandbox": "extensions", "working_dir": "working_dir"}[field] {
				t.Errorf("details %v", r.Error.Details)
			}
			if n := be.Runs(); n != 0 {
				t.Errorf("the agent ran %d times", n)
			}
		})
	}
}
