package codex

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/contextos/contextos/agent"
)

// TestRealCodex runs the real codex CLI named by CONTEXTOS_REAL_CODEX
// (npm install @openai/codex; point it at node_modules/.bin/codex) under a
// throwaway HOME. Without credentials or network the CLI retries until the
// run's timeout; with them it answers. Either way its real output must map
// without a single parse error, the session facet must come first, and the
// run must end in the backend's own terms.
func TestRealCodex(t *testing.T) {
	bin := os.Getenv("CONTEXTOS_REAL_CODEX")
	if bin == "" {
		t.Skip("set CONTEXTOS_REAL_CODEX to a codex binary to run against the real CLI")
	}
	home := t.TempDir()
	b := New(Config{Binary: bin, DefaultWorkingDir: t.TempDir(), Env: map[string]string{"HOME": home}})
	run, err := b.Run(context.Background(), agent.RunRequest{Prompt: "say hi", Timeout: agent.Timeout(20 * time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	var evs []agent.Event
	for ev := range run.Events() {
		evs = append(evs, ev)
	}
	comp, err := run.Wait(context.Background())
	if len(evs) == 0 || !strings.Contains(string(evs[0].Data), agent.CapSessionHandle) {
		t.Fatalf("the first event carries no session facet: %+v", evs)
	}
	for _, ev := range evs {
		if strings.Contains(ev.Message, "parse error") || strings.Contains(ev.Message, "normalize error") {
			t.Errorf("real output did not map: %+v", ev)
		}
	}
	switch {
	case err == nil:
		t.Logf("completion %s, final text %q", comp.Status, comp.FinalText)
	case errors.Is(err, agent.ErrBackend) && err.Error() == "backend error: timeout":
		t.Logf("no model reachable: the run timed out after %d events", len(evs))
	default:
		t.Fatalf("Wait = %v", err)
	}
}
