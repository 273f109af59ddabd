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
	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/trace"

	"github.com/contextos/contextos/internal/sensitive"
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

// Trace headers: a secret-named member, or a member whose value (also
// percent-encoded) is a credential, loses its value; honest members pass
// on as written, and what comes out still parses.
func TestTraceHeadersRedacted(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, in, want string
		baggage        bool
	}{
		{"baggage secret-named member", "userId=alice,api_key=hr5bag0001,isProduction=false", "userId=alice,api_key=[REDACTED],isProduction=false", true},
		{"baggage vendor key value", "tenant=acme, deploy=" + tKey, "tenant=acme, deploy=[REDACTED]", true},
		{"baggage percent-encoded bearer", "auth_hdr=Bearer%20" + tJWT, "auth_hdr=[REDACTED]", true},
		{"baggage secret in a property", "userId=alice;session_token=hr5prop0002", "userId=alice;session_token=[REDACTED]", true},
		{"baggage honest", "userId=alice,serverNode=DF%2028,isProduction=false", "userId=alice,serverNode=DF%2028,isProduction=false", true},
		{"baggage already redacted", "api_key=[REDACTED]", "api_key=[REDACTED]", true},
		{"tracestate vendor key value", "rojo=00f067aa0ba902b7,congo=" + tKey, "rojo=00f067aa0ba902b7,congo=[REDACTED]", false},
		{"tracestate secret-named key", "access_token=hr5state0003,rojo=00f067aa0ba902b7", "access_token=[REDACTED],rojo=00f067aa0ba902b7", false},
		{"tracestate honest", "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE", "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			redact, parse := redactTraceState, func(s string) error { _, err := trace.ParseTraceState(s); return err }
			if c.baggage {
				redact, parse = redactBaggage, func(s string) error { _, err := baggage.Parse(s); return err }
			}
			if err := parse(c.in); err != nil {
				t.Fatalf("input does not parse: %v", err)
			}
			got, changed := redact(c.in)
			if got != c.want || changed != (c.in != c.want) {
				t.Errorf("redact(%q) = %q, %v; want %q", c.in, got, changed, c.want)
			}
			if err := parse(got); err != nil {
				t.Errorf("redacted header does not parse: %v", err)
			}
		})
	}
	// A member the marker makes too long for baggage's limit is dropped.
	long := "k0=" + strings.Repeat("v", 4090) + ",k1=" + strings.Repeat("v", 4080) + ",api_key=x"
	if _, err := baggage.Parse(long); err != nil {
		t.Fatalf("long baggage does not parse: %v", err)
	}
	if got, _ := redactBaggage(long); got != long[:len(long)-len(",api_key=x")] {
		t.Errorf("redacted long baggage = …%q, want the secret member dropped", got[max(0, len(got)-20):])
	}
	req := &runcontext.InvokeRequest{Trace: runcontext.Trace{TraceID: "4bf92f3577b34da6a3ce929d0e0e4736", SpanID: "00f067aa0ba902b7", TraceState: "congo=" + tKey, Baggage: "api_key=hr5bag0004"}}
	rc := &runcontext.RunContext{TraceContext: &runcontext.TraceContext{TraceParent: req.Trace.Traceparent(), TraceState: req.Trace.TraceState, Baggage: req.Trace.Baggage}}
	r2, rc2 := withoutSecrets(req, rc)
	if r2.Trace.TraceID != req.Trace.TraceID || r2.Trace.SpanID != req.Trace.SpanID || rc2.TraceContext.TraceParent != rc.TraceContext.TraceParent {
		t.Error("redaction changed the trace ids")
	}
	got, _ := json.Marshal([]any{r2, rc2})
	if strings.Contains(string(got), tKey) || strings.Contains(string(got), "hr5bag0004") {
		t.Errorf("redacted request holds a trace secret: %s", got)
	}
	if rc.TraceContext.Baggage != "api_key=hr5bag0004" || req.Trace.Baggage != "api_key=hr5bag0004" {
		t.Error("the caller's trace context changed")
	}
}

// A plan's step attachments are the model's free text: a credential in
// an attachment written as a URI (user info, a secret-named or
// URL-signing query parameter) is redacted where the plan enters, as the
// request's attachments are refused at validation.
func TestPlanAttachmentURICredentialsRedacted(t *testing.T) {
	t.Parallel()
	for _, in := range []string{
		"https://u:hr5pw0001@files.example/x.pdf",
		"https://files.example/x.pdf?token=hr5pw0002",
		"https://acct.blob.core.windows.net/c/x.pdf?sv=2022-11-02&sig=hr5pw0003",
		"https://b.s3.amazonaws.com/x.pdf?X-Amz-Credential=AK%2F1&X-Amz-Signature=hr5pw0004",
	} {
		p := &Plan{Steps: []Step{{CapabilityID: "adp_docs.read", Attachments: []string{"art_1", in}}}}
		got := redactPlan(p)
		if got == p || p.Steps[0].Attachments[1] != in {
			t.Errorf("%s: the plan was not copied, or the planner's was changed", in)
			continue
		}
		if a := got.Steps[0].Attachments; a[0] != "art_1" || strings.Contains(a[1], "hr5pw000") || !strings.Contains(a[1], sensitive.Redacted) {
			t.Errorf("%s: attachments = %q", in, a)
		}
	}
}
