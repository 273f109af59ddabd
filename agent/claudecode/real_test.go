package claudecode

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/contextos/contextos/agent"
)

// TestRealClaude runs the real claude CLI named by CONTEXTOS_REAL_CLAUDE
// (npm install @anthropic-ai/claude-code; node_modules/.bin/claude) under
// a throwaway HOME, with a prompt that starts with '-' (it must reach the
// CLI as the prompt, not as a flag). Without credentials the CLI answers
// "Not logged in"; with them, the model answers. Either way its real
// output must map without a parse error, with the session facet on the
// init status and a final text.
func TestRealClaude(t *testing.T) {
	bin := os.Getenv("CONTEXTOS_REAL_CLAUDE")
	if bin == "" {
		t.Skip("set CONTEXTOS_REAL_CLAUDE to a claude binary to run against the real CLI")
	}
	// Root may bypass permissions only in a declared sandbox.
	b := New(Config{Binary: bin, Home: t.TempDir(), DefaultWorkingDir: t.TempDir(), Env: map[string]string{"IS_SANDBOX": "1"}})
	run, err := b.Run(context.Background(), agent.RunRequest{Prompt: "-x: reply with the word hi", Timeout: agent.Timeout(60 * time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	var evs []agent.Event
	for ev := range run.Events() {
		evs = append(evs, ev)
	}
	comp, err := run.Wait(context.Background())
	if err != nil {
		t.Fatalf("Wait = %v after %+v", err, evs)
	}
	if len(evs) == 0 || evs[0].Message != "system init" || !strings.Contains(string(evs[0].Data), agent.CapSessionHandle) {
		t.Fatalf("the first event is not the init status with the session facet: %+v", evs)
	}
	for _, ev := range evs {
		if strings.Contains(ev.Message, "parse error") || strings.Contains(ev.Message, "invalid JSON") {
			t.Errorf("real output did not map: %+v", ev)
		}
	}
	if comp.FinalText == "" {
		t.Fatalf("no final text: %+v", comp)
	}
	if strings.HasPrefix(comp.FinalText, "Not logged in") {
		wantCause(t, evs, CauseNotLoggedIn)
	}
	t.Logf("completion %s, final text %q", comp.Status, comp.FinalText)
}

// TestRealClaudeAsRoot runs the real claude CLI (CONTEXTOS_REAL_CLAUDE) as
// root without IS_SANDBOX=1: it refuses to skip its permission prompts,
// and the run's exit error says so and names the cause.
func TestRealClaudeAsRoot(t *testing.T) {
	bin := os.Getenv("CONTEXTOS_REAL_CLAUDE")
	if bin == "" {
		t.Skip("set CONTEXTOS_REAL_CLAUDE to a claude binary to run against the real CLI")
	}
	if os.Geteuid() != 0 {
		t.Skip("claude refuses to skip its permission prompts only when run as root")
	}
	b := New(Config{Binary: bin, Home: t.TempDir(), DefaultWorkingDir: t.TempDir(), Env: map[string]string{"IS_SANDBOX": ""}})
	run, err := b.Run(context.Background(), agent.RunRequest{Prompt: "reply with the word hi", Timeout: agent.Timeout(60 * time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	var evs []agent.Event
	for ev := range run.Events() {
		evs = append(evs, ev)
	}
	comp, err := run.Wait(context.Background())
	if err != nil || comp.Status.Success() {
		t.Fatalf("Wait = %+v, %v; want a failed completion", comp, err)
	}
	wantCause(t, evs, CauseRootWithoutSandbox)
}
