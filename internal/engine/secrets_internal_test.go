package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/contextos/contextos/runcontext"
)

const (
	tKey = "sk_live_51HyQ2mInternalSecret0001"
	tJWT = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ1c3JfNzcxIn0.c2lnbmF0dXJlMDAwMQ"
)

// The runtime's log handler redacts secrets wherever a line carries them:
// the message, string and error attributes, a group's members, attributes
// given to With, a JSON-shaped value, and a secret-named attribute whole;
// other values pass as they are.
func TestLogHandlerRedactsSecrets(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	l := withoutSecretsLogger(slog.New(slog.NewJSONHandler(&buf, nil)))
	if withoutSecretsLogger(l) != l {
		t.Error("wrapping a wrapped logger wraps it again")
	}
	l.With("preset", "Bearer "+tJWT).WithGroup("g").Error("failed with "+tKey,
		"error", errors.New("upstream: "+tKey),
		"password", "hunter2hunter2",
		"token", 12345678,
		slog.Group("inner", "note", "key "+tKey, "n", 7),
		"args", map[string]any{"api_key": "plainvalue0001", "ok": "x"},
		"run_id", "run_1")
	out := buf.String()
	for _, s := range []string{tKey, tJWT, "hunter2hunter2", "plainvalue0001", "12345678"} {
		if strings.Contains(out, s) {
			t.Errorf("the log holds %q: %s", s, out)
		}
	}
	for _, s := range []string{`"run_id":"run_1"`, `"n":7`, `"ok":"x"`, "[REDACTED]"} {
		if !strings.Contains(out, s) {
			t.Errorf("the log lost %s: %s", s, out)
		}
	}
}

// Redacting a request, a run context and a plan copies what it changes,
// leaves the caller's values as they were, returns them as given when
// they hold no secret, and is idempotent.
func TestEntryRedactionCopies(t *testing.T) {
	t.Parallel()
	req := &runcontext.InvokeRequest{Input: runcontext.Input{Message: "hi Bearer " + tJWT, Context: map[string]any{"api_key": "v", "amount": 4200}},
		User: runcontext.UserClaims{UserID: "usr_1", Claims: map[string]json.RawMessage{"session_token": json.RawMessage(`"abcdef123456"`), "tier": json.RawMessage(`"gold"`)}}}
	rc := &runcontext.RunContext{Metadata: map[string]any{"deploy": tKey}}
	before, _ := json.Marshal([]any{req, rc})
	r2, rc2 := withoutSecrets(req, rc)
	if after, _ := json.Marshal([]any{req, rc}); string(after) != string(before) {
		t.Errorf("the caller's request changed: %s", after)
	}
	got, _ := json.Marshal([]any{r2, rc2})
	for _, s := range []string{tJWT, tKey, `"v"`, "abcdef123456"} {
		if strings.Contains(string(got), s) {
			t.Errorf("redacted request holds %s: %s", s, got)
		}
	}
	if !strings.Contains(string(got), `"tier":"gold"`) || !strings.Contains(string(got), `"amount":4200`) {
		t.Errorf("redaction dropped what was no secret: %s", got)
	}
	if r3, rc3 := withoutSecrets(r2, rc2); r3 != r2 || rc3 != rc2 {
		t.Error("redacting a redacted request copied it again")
	}
	clean := &runcontext.InvokeRequest{Input: runcontext.Input{Message: "hello", Context: map[string]any{"a": 1}}}
	if r, _ := withoutSecrets(clean, nil); r != clean {
		t.Error("a request without secrets was copied")
	}

	plan := &Plan{Steps: []Step{{CapabilityID: "a.b", Args: map[string]any{"token": "xyz12345", "id": "ord_1"}}},
		Decision: &DecisionProposal{Outputs: map[string]any{"note": tKey}, Rationale: "Bearer " + tJWT},
		Memory:   []MemoryProposal{{Content: "key " + tKey}}, Replan: "retry with " + tKey}
	pb, _ := json.Marshal(plan)
	red := redactPlan(plan)
	if pa, _ := json.Marshal(plan); string(pa) != string(pb) {
		t.Errorf("the planner's plan changed: %s", pa)
	}
	want := &Plan{Steps: []Step{{CapabilityID: "a.b", Args: map[string]any{"token": "[REDACTED]", "id": "ord_1"}}},
		Decision: &DecisionProposal{Outputs: map[string]any{"note": "[REDACTED]"}, Rationale: "Bearer [REDACTED]"},
		Memory:   []MemoryProposal{{Content: "key [REDACTED]"}}, Replan: "retry with [REDACTED]"}
	if diff := cmp.Diff(want, red, cmp.AllowUnexported(Plan{})); diff != "" {
		t.Errorf("redactPlan (-want +got):\n%s", diff)
	}
	if again := redactPlan(red); again != red {
		t.Error("redacting a redacted plan copied it again")
	}
}

// A line with nothing to redact reaches the host's handler as it was
// logged: no record is rebuilt for it.
func TestLogHandlerPassesCleanLines(t *testing.T) {
	var got []slog.Record
	h := recordingHandler{records: &got}
	l := withoutSecretsLogger(slog.New(h))
	l.Info("tool call", "run_id", "run_1", "capability", "adp_orders.lookup", "attempts", 2)
	if len(got) != 1 || got[0].NumAttrs() != 3 || got[0].Message != "tool call" {
		t.Fatalf("records %+v", got)
	}
	plain := slog.New(nopHandler{}) // enabled, so every line reaches Handle
	wrapped := withoutSecretsLogger(plain)
	line := func(l *slog.Logger) func() {
		return func() { l.Info("tool call", "run_id", "run_1", "capability", "adp_orders.lookup") }
	}
	if n, base := testing.AllocsPerRun(20, line(wrapped)), testing.AllocsPerRun(20, line(plain)); n > base {
		t.Errorf("a clean line allocates %v times through the redacting handler, %v without", n, base)
	}
}

type recordingHandler struct{ records *[]slog.Record }

func (h recordingHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h recordingHandler) Handle(_ context.Context, r slog.Record) error {
	*h.records = append(*h.records, r.Clone())
	return nil
}
func (h recordingHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h recordingHandler) WithGroup(string) slog.Handler      { return h }

type nopHandler struct{}

func (nopHandler) Enabled(context.Context, slog.Level) bool  { return true }
func (nopHandler) Handle(context.Context, slog.Record) error { return nil }
func (h nopHandler) WithAttrs([]slog.Attr) slog.Handler      { return h }
func (h nopHandler) WithGroup(string) slog.Handler           { return h }
