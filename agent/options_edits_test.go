package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/contextos/contextos/agent"
)

// TestHostEditingItsAdapterOptionsAfterNewAdapterWidensNothing: the limits
// a governed adapter enforces are the ones its options held at
// NewAdapter. A host that edits the lists and maps it handed over (a
// shared config value, say) — the working directories and extension
// values it allows, the extension values it fixes — widens nothing a
// model's call may pick: danger-full-access and another working directory
// stay refused, and the fixed sandbox mode stays fixed.
func TestHostEditingItsAdapterOptionsAfterNewAdapterWidensNothing(t *testing.T) {
	t.Parallel()
	host, other := t.TempDir(), t.TempDir()
	dirs := []string{host}
	allowed := map[string][]json.RawMessage{sandboxKey: raw(`"read-only"`), agent.CapModel: raw(`"gpt-other"`)}
	fixed := map[string]json.RawMessage{agent.CapModel: json.RawMessage(`"gpt-test"`)}
	be := limitBackend()
	ad := agent.NewAdapter(be, &agent.AdapterOptions{AdapterID: "adp_coder", Scopes: []string{"repo.write"}, Extensions: fixed,
		Allow: agent.CallLimits{WorkingDirs: dirs, Extensions: allowed}})
	// The host edits what it handed over.
	dirs[0] = other
	allowed[sandboxKey][0] = json.RawMessage(`"danger-full-access"`)
	delete(fixed, agent.CapModel)
	for _, args := range []map[string]any{
		{"prompt": fixPrompt, "working_dir": other},
		{"prompt": fixPrompt, "extensions": map[string]any{sandboxKey: "danger-full-access"}},
		{"prompt": fixPrompt, "extensions": map[string]any{agent.CapModel: "gpt-other"}},
	} {
		if _, err := callAdapter(context.Background(), ad, args); !errors.Is(err, agent.ErrNotAllowed) {
			t.Errorf("call %v = %v, want ErrNotAllowed: editing the options after NewAdapter widened the limits", args, err)
		}
	}
	if n := be.Runs(); n != 0 {
		t.Errorf("the backend ran %d times", n)
	}
}
