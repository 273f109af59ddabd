package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/gateway/gatewaytest"
	"github.com/contextos/contextos/runcontext"
)

// A PAN and a card number in an adapter's output appear in no result,
// transcript, log or span.
func TestRedactionEverywhere(t *testing.T) {
	const card, pan = "4111 1111 1111 1111", "ABCPE1234F"
	exporter := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exporter))
	defer tp.Shutdown(ctx)
	var logs bytes.Buffer
	f := newFixture(t, func(fx *fixture, _ *runcontext.RunContext, _ *runcontext.InvokeRequest, _ map[string]gateway.Capability) {
		fx.orders = gatewaytest.NewScriptedAdapter()
		fx.orders.On("lookup").ReturnOutput(map[string]any{
			"note":    "customer paid with card " + card,
			"kyc":     []any{"PAN " + pan},
			"summary": "ok",
		})
		fx.opts.TracerProvider = tp
		fx.opts.Logger = slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	res, err := f.run.Call(ctx, lookupCall())
	if err != nil {
		t.Fatal(err)
	}
	if !res.Metadata.RedactionApplied || res.Output["summary"] != "ok" {
		t.Errorf("result = %+v", res)
	}
	resJSON, _ := json.Marshal(res)
	transcript, _ := json.Marshal(f.recorder.Entries())
	var spans bytes.Buffer
	for _, s := range exporter.GetSpans() {
		b, _ := json.Marshal(s.Attributes)
		spans.Write(b)
		spans.WriteString(s.Name)
	}
	if len(exporter.GetSpans()) != 1 || !strings.Contains(spans.String(), "execute_tool") || !strings.Contains(spans.String(), "gen_ai.tool.name") {
		t.Errorf("want one execute_tool span with GenAI attributes, got %s", spans.String())
	}
	if logs.Len() == 0 {
		t.Error("no log line")
	}
	for name, out := range map[string]string{"result": string(resJSON), "transcript": string(transcript), "log": logs.String(), "span": spans.String()} {
		for _, secret := range []string{card, strings.ReplaceAll(card, " ", ""), pan} {
			if strings.Contains(out, secret) {
				t.Errorf("%s contains %q", name, secret)
			}
		}
	}
	if !strings.Contains(string(resJSON), gateway.Redacted) {
		t.Error("no redaction marker in the result")
	}
}

func TestUnknownActiveRedactionRule(t *testing.T) {
	f := newFixture(t)
	cc := *f.cc
	cc.RuntimeControls.RedactionRulesActive = append(cc.RuntimeControls.RedactionRulesActive, "aadhaar")
	if _, err := f.gw.NewRun(gateway.RunConfig{Prepared: f.prepared, Compiled: &cc, Request: f.req, RunContext: f.rc, Meter: runcontext.NewMeter(f.rc.RunBudget, f.now)}, nil); !errors.Is(err, gateway.ErrConfig) || !strings.Contains(err.Error(), `"aadhaar"`) {
		t.Errorf("NewRun with an unknown active redaction rule = %v, want ErrConfig", err)
	}
	// A host-supplied rule makes it known.
	gw, err := gateway.New(nil, &gateway.Options{Redactors: map[string]gateway.Redactor{"aadhaar": func(s string) (string, bool) { return s, false }}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := gw.NewRun(gateway.RunConfig{Prepared: f.prepared, Compiled: &cc, Request: f.req, RunContext: f.rc, Meter: runcontext.NewMeter(f.rc.RunBudget, f.now)}, nil); err != nil {
		t.Errorf("with the rule supplied: %v", err)
	}
}

// The adapter's context carries the host's trace: a child span of the
// caller's with a tracer provider, the caller's own span context with the
// default no-op provider (which starts no span).
func TestSpanContextReachesAdapter(t *testing.T) {
	t.Parallel()
	parent := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{0x4b, 0xf9, 1}, SpanID: trace.SpanID{0x00, 0xf0, 2}, TraceFlags: trace.FlagsSampled})
	for _, c := range []struct {
		name     string
		exporter *tracetest.InMemoryExporter
	}{{"no-op provider", nil}, {"sdk provider", tracetest.NewInMemoryExporter()}} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			var seen trace.SpanContext
			opts := &gateway.Options{Transcript: gateway.NewMemoryTranscript()}
			if c.exporter != nil {
				tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(c.exporter))
				defer tp.Shutdown(ctx)
				opts.TracerProvider = tp
			}
			run := ordersRun(t, f, gateway.AdapterFunc(func(ctx context.Context, _ *gateway.Call) (*gateway.Outcome, error) {
				seen = trace.SpanContextFromContext(ctx)
				return &gateway.Outcome{Output: map[string]any{}}, nil
			}), gateway.Capability{ArgsSchema: lookupSchema, HonorsContext: true}, opts)
			if res, err := run.Call(trace.ContextWithSpanContext(ctx, parent), lookupCall()); err != nil || res.Status != gateway.StatusOK {
				t.Fatal(res, err)
			}
			if seen.TraceID() != parent.TraceID() {
				t.Fatalf("adapter saw trace %s, want the caller's %s", seen.TraceID(), parent.TraceID())
			}
			if c.exporter == nil {
				if !seen.Equal(parent) {
					t.Errorf("adapter saw %v, want the caller's span context", seen)
				}
				return
			}
			spans := c.exporter.GetSpans()
			if len(spans) != 1 || spans[0].Parent.SpanID() != parent.SpanID() || seen.SpanID() != spans[0].SpanContext.SpanID() {
				t.Errorf("adapter saw span %s; spans %+v, want one child of %s", seen.SpanID(), spans, parent.SpanID())
			}
		})
	}
}

// The built-in rules are exactly the catalogue's named rules.
func TestBuiltinRedactorNames(t *testing.T) {
	var names []string
	for name := range gateway.BuiltinRedactors() {
		names = append(names, name)
	}
	slices.Sort(names)
	if want := []string{"credit_card", "email", "iban", "pan", "phone", "secret", "ssn"}; !slices.Equal(names, want) {
		t.Errorf("BuiltinRedactors() = %v, want %v", names, want)
	}
}

// A host rule made from an expression redacts a run's results when the
// pack names it.
func TestHostRegexpRule(t *testing.T) {
	emp, err := gateway.RegexpRedactor(`\bEMP-\d{6}\b`)
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t)
	cc := *f.cc
	cc.RuntimeControls.RedactionRulesActive = []string{"employee_id"}
	gw, err := gateway.New([]gateway.Registration{{AdapterID: "adp_orders", Adapter: gateway.AdapterFunc(func(context.Context, *gateway.Call) (*gateway.Outcome, error) {
		return &gateway.Outcome{Output: map[string]any{"owner": "EMP-123456", "EMP-654321": "x"}}, nil
	}), Capabilities: map[string]gateway.Capability{"lookup": {ArgsSchema: lookupSchema}}}}, &gateway.Options{Redactors: map[string]gateway.Redactor{"employee_id": emp}})
	if err != nil {
		t.Fatal(err)
	}
	run, err := gw.NewRun(gateway.RunConfig{Prepared: f.prepared, Compiled: &cc, Request: f.req, RunContext: f.rc, Meter: runcontext.NewMeter(f.rc.RunBudget, f.now)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := run.Call(ctx, lookupCall())
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := json.Marshal(res.Output); string(b) != `{"[REDACTED]":"x","owner":"[REDACTED]"}` || !res.Metadata.RedactionApplied {
		t.Errorf("output = %s", b)
	}
}

// The built-in secret rule applies whatever rules the pack names — none,
// rules that name nothing secret, a host rule only — to a result's output
// (a secret-named member, a key inside a string, a secret-named key's
// number) and to a failed attempt's error, before the result, the
// transcript or the observer sees them.
func TestSecretsRedactedWhateverThePackNames(t *testing.T) {
	t.Parallel()
	const key, bearer = "AKIAABCDEFGHIJKLMNOP", "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ1c3JfNzcxIn0.c2lnbmF0dXJlMDAwMQ"
	keep, err := gateway.RegexpRedactor(`\bEMP-\d{6}\b`)
	if err != nil {
		t.Fatal(err)
	}
	for _, active := range [][]string{nil, {}, {"email"}, {"employee_id"}, {"pan", "credit_card"}, {"secret"}} {
		t.Run(fmt.Sprint(active), func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			cc := *f.cc
			cc.RuntimeControls.RedactionRulesActive = active
			var seen []gateway.Attempt
			calls := 0
			rec := &gatewaytest.Recorder{}
			gw, err := gateway.New([]gateway.Registration{{AdapterID: "adp_orders", Adapter: gateway.AdapterFunc(func(context.Context, *gateway.Call) (*gateway.Outcome, error) {
				calls++
				if calls == 1 {
					return nil, gateway.NewToolError(gateway.CodeExecutionFailed, true, "upstream said: Authorization: Bearer "+bearer, map[string]any{"api_key": "plainvalue0001"})
				}
				return &gateway.Outcome{Output: map[string]any{"status": "delivered", "api_key": "plainvalue0001", "note": "key " + key, "client_secret": 12345678}}, nil
			}), Capabilities: map[string]gateway.Capability{"lookup": {ArgsSchema: lookupSchema, MaxAttempts: 2}}}},
				&gateway.Options{Redactors: map[string]gateway.Redactor{"employee_id": keep}, Transcript: rec, Sleep: func(context.Context, time.Duration) error { return nil }})
			if err != nil {
				t.Fatal(err)
			}
			run, err := gw.NewRun(gateway.RunConfig{Prepared: f.prepared, Compiled: &cc, Request: f.req, RunContext: f.rc, Meter: runcontext.NewMeter(f.rc.RunBudget, f.now)},
				&gateway.RunOptions{Observe: func(a gateway.Attempt) { seen = append(seen, a) }})
			if err != nil {
				t.Fatal(err)
			}
			res, err := run.Call(ctx, lookupCall())
			if err != nil || res.Status != gateway.StatusOK {
				t.Fatalf("Call = %+v, %v", res, err)
			}
			want := map[string]any{"status": "delivered", "api_key": gateway.Redacted, "note": "key " + gateway.Redacted, "client_secret": gateway.Redacted}
			if diff := cmp.Diff(want, res.Output); diff != "" || !res.Metadata.RedactionApplied {
				t.Errorf("output (-want +got):\n%s (redaction_applied %v)", diff, res.Metadata.RedactionApplied)
			}
			resJSON, _ := json.Marshal(res)
			transcript, _ := json.Marshal(rec.Entries())
			observed, _ := json.Marshal(seen)
			for name, b := range map[string][]byte{"result": resJSON, "transcript": transcript, "observer": observed} {
				for _, s := range []string{key, bearer, "plainvalue0001", "12345678"} {
					if strings.Contains(string(b), s) {
						t.Errorf("the %s holds %q", name, s)
					}
				}
			}
		})
	}
}
