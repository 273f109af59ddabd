package codex

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"testing"

	"github.com/contextos/contextos/agent"
	"github.com/contextos/contextos/gateway"
)

// governedCall is one call of the agent.Adapter over b, with the
// arguments a planner chose.
func governedCall(ad *agent.Adapter, args map[string]any) (*gateway.Outcome, error) {
	return ad.Call(context.Background(), &gateway.Call{
		Envelope:       &gateway.ToolCallEnvelope{ToolCallID: "tc_1", CapabilityID: ad.CapabilityID(), Args: args},
		Capability:     agent.AdapterCapability,
		Attempt:        1,
		IdempotencyKey: "idem_1",
	})
}

// A governed codex call with nothing configured runs the CLI sandboxed
// workspace-write in the host's working directory (the backend's
// configured one) with no extra
// directory; a call whose arguments ask for danger-full-access, another
// working directory or an extra writable directory starts no process.
func TestGovernedCodexStaysInsideTheHostLimits(t *testing.T) {
	t.Run("defaults", func(t *testing.T) {
		f := newFake(t, "tool_run")
		cwd := f.cfg.DefaultWorkingDir // the host configured the backend's directory
		if _, err := governedCall(agent.NewAdapter(New(f.cfg), nil), map[string]any{"prompt": "fix it"}); err != nil {
			t.Fatal(err)
		}
		recs := f.records(t)
		if len(recs) != 1 {
			t.Fatalf("%d codex processes", len(recs))
		}
		args := recs[0].Args
		if !slices.Equal(args[:4], []string{"--ask-for-approval", "never", "--sandbox", "workspace-write"}) ||
			slices.Contains(args, "--add-dir") || slices.Contains(args, "danger-full-access") || recs[0].Cwd != cwd {
			t.Fatalf("codex ran with %q in %s, want the workspace-write sandbox, no extra dir, in %s", args, recs[0].Cwd, cwd)
		}
	})
	for name, args := range map[string]map[string]any{
		"danger-full-access": {"extensions": map[string]any{keySandboxMode: "danger-full-access"}},
		"working dir":        {"working_dir": t.TempDir()},
		"extra dir":          {"extensions": map[string]any{agent.CapAddDirs: map[string]any{"dirs": []any{t.TempDir()}}}},
		"approval policy":    {"extensions": map[string]any{agent.CapNonInteractive: false, keyApprovalPolicy: "on-request"}},
	} {
		t.Run(name, func(t *testing.T) {
			f := newFake(t, "must_not_spawn")
			args["prompt"] = "fix it"
			out, err := governedCall(agent.NewAdapter(New(f.cfg), nil), args)
			var le *agent.LimitError
			if out != nil || !errors.As(err, &le) || !errors.Is(err, agent.ErrNotAllowed) {
				t.Fatalf("Call = %v, %v; want a *LimitError", out, err)
			}
			if n := len(f.records(t)); n != 0 {
				t.Fatalf("%d codex processes started", n)
			}
		})
	}
	t.Run("allowed by the host", func(t *testing.T) {
		f := newFake(t, "tool_run")
		ad := agent.NewAdapter(New(f.cfg), &agent.AdapterOptions{Allow: agent.CallLimits{
			Extensions: map[string][]json.RawMessage{keySandboxMode: {json.RawMessage(`"read-only"`)}}}})
		if _, err := governedCall(ad, map[string]any{"prompt": "fix it", "extensions": map[string]any{keySandboxMode: "read-only"}}); err != nil {
			t.Fatal(err)
		}
		if recs := f.records(t); len(recs) != 1 || !slices.Equal(recs[0].Args[2:4], []string{"--sandbox", "read-only"}) {
			t.Fatalf("codex ran %+v", recs)
		}
	})
}
