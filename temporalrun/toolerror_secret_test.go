package temporalrun_test

import (
	"strings"
	"testing"
	"time"

	"github.com/contextos/contextos/temporalrun"
)

// A tool error whose message holds a key: the attempt's activity redacts
// it before the answer reaches the workflow's history, and the run's
// result says redaction_applied, as an in-process run's does (the
// gateway redacts the adapter's text there); the run replays equal.
func TestToolErrorSecretRedactedAndReported(t *testing.T) {
	const secret = "sk-live-0123456789abcdef"
	w := newWorld(t, t.TempDir(), 0)
	w.lookupBackoff = time.Millisecond
	w.lookupError = "orders said 401 for key " + secret
	env := skipEnv(t, w)
	env.ExecuteWorkflow(temporalrun.WorkflowName, input(t, "toolerr", 4200, start))
	out := result(t, env)
	entries, err := w.transcr.RunEntries(t.Context(), out.RunID)
	if err != nil {
		t.Fatal(err)
	}
	failed := 0
	for _, e := range entries {
		if e.Result == nil || e.Result.Error == nil || e.Result.CapabilityID != "adp_orders.lookup" {
			continue
		}
		failed++
		if strings.Contains(e.Result.Error.Message, secret) || !e.Result.Metadata.RedactionApplied {
			t.Errorf("the failed lookup's result: error %q, redaction_applied %v; want the key redacted and reported", e.Result.Error.Message, e.Result.Metadata.RedactionApplied)
		}
	}
	if failed == 0 {
		t.Fatalf("no failed result in the transcript (run %s %s)", out.Status, out.Record.Outcome)
	}
	assertReplayEqual(t, w, out)
}
