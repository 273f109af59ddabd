package temporalrun_test

import (
	"strings"
	"testing"
	"time"

	"github.com/contextos/contextos/temporalrun"
)

// A tool error larger than max_payload_bytes is replaced by the gateway
// with its own small error: none of the adapter's text is kept, so an
// in-process run's result says no redaction. The activity redacted a key
// in the adapter's message first, and reported it: the result said
// redaction_applied for a text it does not hold.
func TestOversizedToolErrorRedactionNotReported(t *testing.T) {
	const secret = "sk-live-0123456789abcdef"
	w := newWorld(t, t.TempDir(), 0)
	w.lookupBackoff = time.Millisecond
	w.lookupError = "key " + secret + " " + strings.Repeat("x", 1<<20)
	env := skipEnv(t, w)
	env.ExecuteWorkflow(temporalrun.WorkflowName, input(t, "toolerrbig", 4200, start))
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
		if strings.Contains(e.Result.Error.Message, secret) || e.Result.Metadata.RedactionApplied {
			t.Errorf("the failed lookup's result: error %.120q, redaction_applied %v; want the gateway's own error and no redaction reported", e.Result.Error.Message, e.Result.Metadata.RedactionApplied)
		}
	}
	if failed == 0 {
		t.Fatalf("no failed result in the transcript (run %s %s)", out.Status, out.Record.Outcome)
	}
	assertReplayEqual(t, w, out)
}
