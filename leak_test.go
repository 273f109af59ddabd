package contextos_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/contextostest"
	"github.com/contextos/contextos/decision"
	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/replay"
	"github.com/contextos/contextos/transport"
)

// What leaky adapters return in the leak tests: a Luhn-valid card number
// and an email address, which the support pack (with the email rule added)
// redacts.
const (
	leakCard  = "4111111111111111"
	leakEmail = "jane.doe@example.com"
)

// leaks are the values no surface may hold.
var leaks = []string{leakCard, leakEmail}

// leakHarness is the support harness with the email redaction rule added
// to the pack, retries that do not wait, logs at debug and spans kept.
type leakHarness struct {
	*contextostest.Harness
	logs  *bytes.Buffer
	spans *tracetest.InMemoryExporter
}

func newLeakHarness(t *testing.T, planner contextos.Planner, opts *contextostest.Options) *leakHarness {
	t.Helper()
	return newLeakHarnessRules(t, planner, opts, "email")
}

// newLeakHarnessRules is newLeakHarness with the pack's redaction rules
// extended by rules.
func newLeakHarnessRules(t *testing.T, planner contextos.Planner, opts *contextostest.Options, rules ...string) *leakHarness {
	t.Helper()
	doc := readTestdata(t, "ctxpack.support-1.0.0.json")
	edited := bytes.Replace(doc, []byte(`"redaction_rules": ["pan", "credit_card"]`), []byte(`"redaction_rules": ["pan", "credit_card", "`+strings.Join(rules, `", "`)+`"]`), 1)
	if bytes.Equal(doc, edited) {
		t.Fatal("the support pack's redaction rules moved: edit newLeakHarness")
	}
	var o contextostest.Options
	if opts != nil {
		o = *opts
	}
	lh := &leakHarness{logs: &bytes.Buffer{}, spans: tracetest.NewInMemoryExporter()}
	o.Runtime.Evidence = evidence(t)
	o.Runtime.ReplaySampleRate = 1
	o.Runtime.Logger = slog.New(slog.NewJSONHandler(lh.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	o.Runtime.TracerProvider = sdktrace.NewTracerProvider(sdktrace.WithSyncer(lh.spans))
	o.Runtime.Gateway.Sleep = func(ctx context.Context, _ time.Duration) error { return ctx.Err() }
	if o.Scopes == nil {
		o.Scopes = map[string][]string{"adp_payments.issue_refund": {"payments.refund"}}
	}
	lh.Harness = contextostest.New(t, planner, [][]byte{edited}, &o)
	return lh
}

// scriptLeaks scripts adapters that put the leaks in every member an
// outcome or an error can carry: the order lookup in its output (values,
// nested lists), citations, artifacts, risk tags and signals; the policy
// evaluation in a retryable failure's message, reason and details before
// it answers; the refund in its output and mutations.
func scriptLeaks(h *contextostest.Harness) {
	h.Adapter("adp_orders").On("lookup").Return(&gateway.Outcome{
		Output: map[string]any{"order_id": "ord_881", "status": "delivered", "total_inr": 4200,
			"payment": map[string]any{"card": "visa " + leakCard, "history": []any{"paid by " + leakEmail}}},
		Citations: []gateway.Citation{{EvidenceRef: "kg:card:" + leakCard}},
		Artifacts: []string{"mailto:" + leakEmail},
		RiskTags:  []string{"owner " + leakEmail},
		Signals:   []string{"seen " + leakCard},
	})
	h.Adapter("adp_policy").On("eval").
		FailWith(&gateway.ToolError{Code: gateway.CodeExecutionFailed, Reason: "card " + leakCard, Retryable: true, Message: "write to " + leakEmail,
			Details: map[string]any{"body": map[string]any{"card": leakCard, "to": []any{leakEmail}}}}).
		ReturnOutput(map[string]any{"eligible": true, "contact": leakEmail})
	h.Adapter("adp_payments").On("issue_refund").ReturnOutput(map[string]any{"transaction_id": "txn_q9", "receipt_to": leakEmail},
		"refund:txn_q9", "charged:"+leakCard)
}

// assertNoLeak fails the test for each surface that holds a leak.
func assertNoLeak(t *testing.T, surfaces map[string]any) {
	t.Helper()
	for name, v := range surfaces {
		var b []byte
		switch x := v.(type) {
		case string:
			b = []byte(x)
		case []byte:
			b = x
		default:
			var err error
			if b, err = json.Marshal(v); err != nil {
				t.Fatalf("%s has no JSON form: %v", name, err)
			}
		}
		for _, leak := range leaks {
			if bytes.Contains(b, []byte(leak)) {
				t.Errorf("%s holds %q", name, leak)
			}
		}
	}
}

// surfaces are everything durable or observable a run leaves: its result
// (tool results and record), the transcript, the stored records, the
// replay packet, the checkpoint, the logs at debug and the spans.
func (lh *leakHarness) surfaces(t *testing.T, res *contextos.Result) map[string]any {
	t.Helper()
	ctx := context.Background()
	s := map[string]any{"result": res, "transcript": lh.Transcript.Entries(), "logs": lh.logs.String()}
	recs, err := lh.Decisions.List(ctx, decision.Filter{RunID: res.RunID})
	if err != nil {
		t.Fatal(err)
	}
	s["records"] = recs
	if res.ReplayPacketID != "" {
		p, err := lh.Replays.Get(ctx, res.ReplayPacketID)
		if err != nil {
			t.Fatal(err)
		}
		s["packet"] = p
	}
	if cp, err := loadState(ctx, lh.Checkpoints, res.RunID); err == nil {
		s["checkpoint"] = cp
	}
	var spans []string
	for _, sp := range lh.spans.GetSpans() {
		spans = append(spans, sp.Name)
		for _, a := range sp.Attributes {
			spans = append(spans, a.Value.String())
		}
		for _, e := range sp.Events {
			spans = append(spans, e.Name)
			for _, a := range e.Attributes {
				spans = append(spans, a.Value.String())
			}
		}
		spans = append(spans, sp.Status.Description)
	}
	s["spans"] = strings.Join(spans, "\n")
	return s
}

// The refund flow with adapters that put a card number and an email in
// every member of their outcomes and errors: the result, the transcript,
// the records, the replay packet, the checkpoint, the logs and the spans
// never hold them; the results say redaction was applied; and the packet
// replays equal, byte for byte (the transcript's entry hashes, so its
// chain hash, and the record).
func TestNoRawAdapterValueReachesAnySurface(t *testing.T) {
	for _, amount := range []int{1200, 4200} {
		t.Run(map[int]string{1200: "decided", 4200: "paused then approved"}[amount], func(t *testing.T) {
			lh := newLeakHarness(t, contextostest.NewPlanner(lookupPlan(), refundPlan(amount)), nil)
			scriptLeaks(lh.Harness)
			req, rc := refundRequest(t, amount, true)
			res := lh.Invoke(req, rc)
			if amount > 3000 {
				contextostest.AssertPending(t, res, "GATE_FINANCE_APPROVAL")
				cp, err := loadState(context.Background(), lh.Checkpoints, res.RunID)
				if err != nil {
					t.Fatal(err)
				}
				if len(cp.Outcomes) == 0 {
					t.Fatal("the paused run's checkpoint holds no adapter outcomes")
				}
				assertNoLeak(t, map[string]any{"paused checkpoint": cp, "paused result": res})
				res = lh.Approve(res, contextostest.Approver{UserID: "user_finance_lead_77", Role: "finance_lead"})
			}
			contextostest.AssertStatus(t, res, decision.Decided)
			assertNoLeak(t, lh.surfaces(t, res))
			for _, tr := range res.ToolResults {
				if !tr.Metadata.RedactionApplied {
					t.Errorf("%s: redaction_applied is false", tr.CapabilityID)
				}
			}
			p, err := lh.Replays.Get(context.Background(), res.ReplayPacketID)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := json.Marshal(p.Outcomes)
			if !bytes.Contains(b, []byte(gateway.Redacted)) || !bytes.Contains(b, []byte(`"redacted":true`)) {
				t.Errorf("the packet's adapter outcomes are not the redacted ones: %s", b)
			}
			out, err := lh.Runtime.Replay(context.Background(), p)
			if err != nil || out.Status != replay.ReplayEqual {
				t.Fatalf("replay = %+v, %v; want replay_equal", out, err)
			}
			// The replay's own surfaces hold no leak either.
			assertNoLeak(t, map[string]any{"replay result": out, "logs after the replay": lh.logs.String()})
		})
	}
}

// Secrets as map keys and as JSON numbers, once redaction covers them.
func TestNoRawAdapterKeyOrNumberReachesAnySurface(t *testing.T) {
	lh := newLeakHarness(t, contextostest.NewPlanner(lookupPlan(), refundPlan(1200)), nil)
	scriptDefaults(lh.Harness, "adp_orders")
	lh.Adapter("adp_orders").On("lookup").ReturnOutput(map[string]any{"order_id": "ord_881", "status": "delivered", "total_inr": 4200,
		"cards": map[string]any{leakCard: "visa", leakEmail: true}, "pan": 4111111111111111.0})
	req, rc := refundRequest(t, 1200, true)
	res := lh.Invoke(req, rc)
	contextostest.AssertStatus(t, res, decision.Decided)
	assertNoLeak(t, lh.surfaces(t, res))
	p, _ := lh.Replays.Get(context.Background(), res.ReplayPacketID)
	if out, err := lh.Runtime.Replay(context.Background(), p); err != nil || out.Status != replay.ReplayEqual {
		t.Fatalf("replay = %+v, %v", out, err)
	}
}

// A tool reached over the http transport echoes the API key the transport
// resolved for it — in a 500 body, then in its answer's values, keys and
// an encoded form — alongside an IBAN: no surface holds the key (in any
// form the transport knows) or the IBAN, and the packet replays equal.
func TestSecretEchoingToolLeaksNothing(t *testing.T) {
	const apiKey = "q7Zx9PlmR2vK8wY3nB5c" // no pattern knows it: only the transport can
	const iban = "GB82 WEST 1234 5698 7654 32"
	calls := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls++
		key := r.Header.Get("X-Api-Key")
		if calls == 1 {
			w.WriteHeader(http.StatusInternalServerError)
			fmt.Fprintf(w, `{"error": "bad key %s for %s"}`, key, leakEmail)
			return
		}
		json.NewEncoder(w).Encode(map[string]any{"order_id": "ord_881", "status": "delivered", "total_inr": 4200,
			"debug": "called with " + key, key: "as a key", "b64": base64.StdEncoding.EncodeToString([]byte(key)),
			"refund_to": iban, "url": "https://tools.example/cb?key=" + url.QueryEscape(key)})
	}))
	defer srv.Close()
	ad, err := transport.NewAdapter(transport.Endpoint{Transport: transport.TransportHTTP, URL: srv.URL, AllowPrivate: true,
		Auth: &transport.Auth{Profile: transport.ProfileAPIKeyHeader, HeaderName: "X-Api-Key", SecretRef: "orders_key"}},
		&transport.Options{Secrets: transport.MapSecrets{"orders_key": apiKey}})
	if err != nil {
		t.Fatal(err)
	}
	lookup := ad.Capability()
	lookup.MaxAttempts, lookup.Backoff = 2, func(string, int) time.Duration { return 0 }
	// The lookup goes over the wire; the other tools answer in process.
	lh := newLeakHarnessRules(t, contextostest.NewPlanner(lookupPlan(), refundPlan(1200)), &contextostest.Options{
		Runtime: contextos.Options{Adapters: []gateway.Registration{
			{AdapterID: "adp_orders", Adapter: ad, Capabilities: map[string]gateway.Capability{"lookup": lookup}},
			{AdapterID: "adp_policy", Adapter: gateway.AdapterFunc(func(context.Context, *gateway.Call) (*gateway.Outcome, error) {
				return &gateway.Outcome{Output: map[string]any{"eligible": true}}, nil
			}), Capabilities: map[string]gateway.Capability{"eval": {}}},
			{AdapterID: "adp_payments", Adapter: gateway.AdapterFunc(func(context.Context, *gateway.Call) (*gateway.Outcome, error) {
				return &gateway.Outcome{Output: map[string]any{"transaction_id": "txn_q9", "to": iban}, Mutations: []string{"refund:txn_q9"}}, nil
			}), Capabilities: map[string]gateway.Capability{"issue_refund": {Scopes: []string{"payments.refund"}}}},
		}},
	}, "email", "iban")
	req, rc := refundRequest(t, 1200, true)
	res, err := lh.Runtime.Invoke(context.Background(), req, rc)
	if err != nil {
		t.Fatal(err)
	}
	contextostest.AssertStatus(t, res, decision.Decided)
	if calls != 2 {
		t.Fatalf("the tool was called %d times, want 2 (a 500, then an answer)", calls)
	}
	forms := []string{apiKey, base64.StdEncoding.EncodeToString([]byte(apiKey)), url.QueryEscape(apiKey), iban, "GB82WEST12345698765432", leakEmail}
	surfaces := lh.surfaces(t, res)
	for name, v := range surfaces {
		b, _ := json.Marshal(v)
		if s, ok := v.(string); ok {
			b = []byte(s)
		}
		for _, f := range forms {
			if bytes.Contains(b, []byte(f)) {
				t.Errorf("%s holds %q", name, f)
			}
		}
	}
	p, err := lh.Replays.Get(context.Background(), res.ReplayPacketID)
	if err != nil {
		t.Fatal(err)
	}
	if out, err := lh.Runtime.Replay(context.Background(), p); err != nil || out.Status != replay.ReplayEqual {
		t.Fatalf("replay = %+v, %v; want replay_equal", out, err)
	}
}
