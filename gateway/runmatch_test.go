package gateway_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/gateway/gatewaytest"
	"github.com/contextos/contextos/policy"
)

// The tests that outside code's edits change nothing (an adapter's, an
// idempotency store's, an observer's, a VerifyWrite hook's) compare two
// plays of the same calls, one whose outside code edits what it is
// given or returned and one whose outside code edits nothing, by what
// the plays record and return (callsRecord).

// callsRecord is what a play of calls returns and records: the results
// the run returned, the transcript entries, the run's chain hash, the
// decisions CallDecisions reports for each call (when the play asks),
// and how often the play's outside code was told of a call.
type callsRecord struct {
	Results   []*gateway.ToolResultEnvelope
	Entries   []gateway.TranscriptEntry
	Chain     string
	Decisions [][]policy.Decision
	Told      int
}

// finishCalls adds to o the entries rec holds and run's chain hash, and
// fails the test unless the entries verify to that hash.
func finishCalls(t *testing.T, o *callsRecord, rec *gatewaytest.Recorder, run *gateway.Run) {
	t.Helper()
	o.Entries, o.Chain = rec.Entries(), run.ChainState().Hash
	if got, err := gateway.VerifyTranscript(o.Entries); err != nil || got != o.Chain {
		t.Fatalf("VerifyTranscript = %s, %v; the run's chain is %s", got, err, o.Chain)
	}
}

// sameCalls fails the test when the editing play returned or recorded
// anything other than the plain one; who names the editor.
func sameCalls(t *testing.T, who string, plain, editing callsRecord) {
	t.Helper()
	if diff := cmp.Diff(plain, editing); diff != "" {
		t.Errorf("%s changed the run (-plain +editing):\n%s", who, diff)
	}
}
