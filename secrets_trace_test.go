package contextos_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/contextostest"
	"github.com/contextos/contextos/decision"
)

// A credential in the request's trace baggage or tracestate (and the run
// context's trace_context) is redacted where it enters: a run that pauses
// at its approval gate, is approved and resumed stores none of it in a
// record, checkpoint, packet, transcript entry, stream event, log line or
// span, while its spans still carry the request's trace id and honest
// baggage and tracestate members are kept as written.
func TestSecretsInTraceHeadersNeverStored(t *testing.T) {
	secrets := map[string]string{
		"secret-named baggage member":   "hr5baggagetoken0001",
		"vendor key in baggage":         "sk-proj-hr5baggagevendorkey0002",
		"secret-named baggage property": "hr5baggageproperty0003",
		"vendor key in tracestate":      "sk_live_hr5tracestatekey00000004",
	}
	bag := "userId=alice,api_key=" + secrets["secret-named baggage member"] + ",deploy=" + secrets["vendor key in baggage"] +
		",isProduction=false;session_token=" + secrets["secret-named baggage property"]
	state := "rojo=00f067aa0ba902b7,congo=" + secrets["vendor key in tracestate"]

	var logs bytes.Buffer
	spans := tracetest.NewInMemoryExporter()
	cps := &capturingCheckpoints{InMemoryCheckpoints: contextos.NewInMemoryCheckpoints()}
	pks := &capturingPackets{InMemoryPackets: contextos.NewInMemoryPackets()}
	h := contextostest.New(t, contextostest.NewPlanner(lookupPlan(), refundPlan(4200)), [][]byte{readTestdata(t, "ctxpack.support-1.0.0.json")}, &contextostest.Options{
		Runtime: contextos.Options{Evidence: evidence(t), ReplaySampleRate: 1, Checkpoints: cps, Replays: pks,
			TracerProvider: sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans)),
			Logger:         slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))},
		Scopes: map[string][]string{"adp_payments.issue_refund": {"payments.refund"}},
	})
	scriptDefaults(h, "")
	req, rc := refundRequest(t, 4200, true)
	req.Trace.Baggage, req.Trace.TraceState = bag, state
	hdr := req.Trace.Headers()
	rc.TraceContext = &hdr

	var events []byte
	var res *contextos.Result
	for ev, err := range h.Runtime.Stream(context.Background(), req, rc) {
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(ev)
		events = append(events, b...)
		if ev.Final != nil {
			res = ev.Final
		}
	}
	if res == nil || res.Status != decision.Deferred {
		t.Fatalf("run = %+v; want it paused at the finance gate", res)
	}
	done := h.Approve(res, contextostest.Approver{UserID: "usr_fin_1", Role: "finance_lead"})
	if done.Status != decision.Decided {
		t.Errorf("resumed run %s: %s", done.Status, done.Record.Rationale.Summary)
	}
	if req.Trace.Baggage != bag || rc.TraceContext.TraceState != state {
		t.Error("the caller's request or run context changed")
	}

	recs, err := h.Decisions.List(context.Background(), decision.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	records, _ := json.Marshal(recs)
	transcript, _ := json.Marshal(h.Transcript.Entries())
	spanJSON, _ := json.Marshal(spans.GetSpans().Snapshots())
	artefacts := map[string][]byte{"records": records, "transcript": transcript, "events": events, "log": logs.Bytes(), "spans": spanJSON}
	for i, b := range cps.data {
		artefacts["checkpoint "+string(rune('a'+i))] = b
	}
	for i, b := range pks.data {
		artefacts["packet "+string(rune('a'+i))] = b
	}
	if len(cps.data) < 2 || len(pks.data) == 0 || len(spans.GetSpans()) == 0 {
		t.Fatalf("%d checkpoints, %d packets, %d spans: the run stored too little to check", len(cps.data), len(pks.data), len(spans.GetSpans()))
	}
	for name, b := range artefacts {
		for what, secret := range secrets {
			if bytes.Contains(b, []byte(secret)) {
				t.Errorf("the %s holds the %s", name, what)
			}
		}
	}
	// Honest members are kept as written, the secret ones marked.
	last := string(cps.data[len(cps.data)-1])
	for _, want := range []string{"userId=alice,api_key=[REDACTED],deploy=[REDACTED],isProduction=false;session_token=[REDACTED]", "rojo=00f067aa0ba902b7,congo=[REDACTED]", req.Trace.TraceID} {
		if !strings.Contains(last, want) {
			t.Errorf("the last checkpoint lacks %s", want)
		}
	}
	for _, s := range spans.GetSpans() {
		if s.SpanContext.TraceID().String() != req.Trace.TraceID {
			t.Errorf("span %s has trace %s, want the request's %s", s.Name, s.SpanContext.TraceID(), req.Trace.TraceID)
		}
	}
	contextostest.AssertReplayEqual(t, h.Replay(done))
}
