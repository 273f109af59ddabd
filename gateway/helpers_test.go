package gateway_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/gowebpki/jcs"
	"go.uber.org/goleak"

	"github.com/contextos/contextos/compiler"
	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/gateway/gatewaytest"
	"github.com/contextos/contextos/internal/canon"
	fixtures "github.com/contextos/contextos/internal/fixture"
	"github.com/contextos/contextos/pack"
	"github.com/contextos/contextos/runcontext"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var ctx = context.Background()

var refundSchema = json.RawMessage(`{
  "type": "object",
  "required": ["order_id", "amount_inr", "currency"],
  "properties": {
    "order_id": {"type": "string", "pattern": "^ord_"},
    "amount_inr": {"type": "number"},
    "currency": {"enum": ["INR"]},
    "idempotency_key": {"type": "string"}
  },
  "additionalProperties": false
}`)

var lookupSchema = json.RawMessage(`{"type":"object","required":["order_id"],"properties":{"order_id":{"type":"string"}},"additionalProperties":false}`)

// fixture is a run of the canonical support scenario with scripted adapters.
type fixture struct {
	orders, payments, policyAd *gatewaytest.ScriptedAdapter
	recorder                   *gatewaytest.Recorder
	gw                         *gateway.Gateway
	run                        *gateway.Run
	rc                         *runcontext.RunContext
	req                        *runcontext.InvokeRequest
	prepared                   *compiler.Prepared
	cc                         *compiler.CompiledContext
	now                        time.Time
	opts                       gateway.Options
	editPack                   func(*pack.Pack) // an option's change to the pack, made before it is compiled
}

type fixtureOption func(f *fixture, rc *runcontext.RunContext, req *runcontext.InvokeRequest, caps map[string]gateway.Capability)

func newFixture(t testing.TB, options ...fixtureOption) *fixture {
	t.Helper()
	read := func(n string) []byte { return fixtures.Read(t, n) }
	p, err := pack.Decode(read("ctxpack.support-1.0.0.json"))
	if err != nil {
		t.Fatal(err)
	}
	req, err := runcontext.DecodeInvokeRequest(read("invoke.support-refund.json"))
	if err != nil {
		t.Fatal(err)
	}
	rc, err := runcontext.DecodeRunContext(read("run-context.support.json"))
	if err != nil {
		t.Fatal(err)
	}
	// As the runtime's materialized run context does, the run carries the
	// request's W3C trace headers.
	h := req.Trace.Headers()
	rc.TraceContext = &h
	var ev compiler.StaticEvidence
	json.Unmarshal(read("evidence.support.json"), &ev)
	f := &fixture{orders: gatewaytest.NewScriptedAdapter(), payments: gatewaytest.NewScriptedAdapter(), policyAd: gatewaytest.NewScriptedAdapter(),
		recorder: &gatewaytest.Recorder{}, now: time.Date(2026, 5, 4, 9, 31, 0, 0, time.UTC)}
	f.orders.On("lookup").ReturnOutput(map[string]any{"order_id": "ord_881", "status": "delivered", "total_inr": 4200})
	f.policyAd.On("eval").ReturnOutput(map[string]any{"eligible": true})
	f.payments.On("issue_refund").ReturnOutput(map[string]any{"transaction_id": "txn_q9", "refund_amount_inr": 4200}, "refund:txn_q9")
	// Generous timeouts: a loaded machine under -race must not turn an
	// instant scripted call into a timeout. Tests of timeouts set their own.
	caps := map[string]gateway.Capability{
		"adp_orders.lookup":         {ArgsSchema: lookupSchema, Scopes: []string{"orders.read"}, Timeout: time.Minute},
		"adp_policy.eval":           {Timeout: time.Minute},
		"adp_payments.issue_refund": {ArgsSchema: refundSchema, Scopes: []string{"payments.refund"}, Timeout: time.Minute, CostCents: 0.31},
	}
	f.opts = gateway.Options{Transcript: canonChecked{t, f.recorder}, Now: func() time.Time { return f.now }, Sleep: func(context.Context, time.Duration) error { return nil }}
	for _, o := range options {
		o(f, rc, req, caps)
	}
	regs := []gateway.Registration{
		{AdapterID: "adp_orders", Adapter: f.orders, Capabilities: map[string]gateway.Capability{"lookup": caps["adp_orders.lookup"]}},
		{AdapterID: "adp_policy", Adapter: f.policyAd, Capabilities: map[string]gateway.Capability{"eval": caps["adp_policy.eval"]}},
		{AdapterID: "adp_payments", Adapter: f.payments, Capabilities: map[string]gateway.Capability{"issue_refund": caps["adp_payments.issue_refund"]}},
	}
	if f.gw, err = gateway.New(regs, &f.opts); err != nil {
		t.Fatal(err)
	}
	if f.editPack != nil {
		f.editPack(p)
	}
	prepared, err := compiler.Prepare([]compiler.Input{{Ref: pack.MustParseRef("ctxpack.support@1.0.0"), Pack: p}}, &compiler.Options{Ontologies: []string{"ont.support@1.0.0"}, Evidence: ev})
	if err != nil {
		t.Fatal(err)
	}
	cc, err := prepared.Compile(ctx, req, rc)
	if err != nil {
		t.Fatal(err)
	}
	if f.run, err = f.gw.NewRun(gateway.RunConfig{Prepared: prepared, Compiled: cc, Request: req, RunContext: rc, Meter: runcontext.NewMeter(rc.RunBudget, f.now)}, nil); err != nil {
		t.Fatal(err)
	}
	f.rc, f.req, f.prepared, f.cc = rc, req, prepared, cc
	return f
}

// canonChecked holds every envelope the gateway records to the general
// canonical encoder and to github.com/gowebpki/jcs: each test that makes
// calls also checks the gateway's own canonical writers, which hash with
// the call's cached encodings (args, metadata, the run's members).
type canonChecked struct {
	t    testing.TB
	sink gateway.TranscriptSink
}

func (c canonChecked) Append(ctx context.Context, e gateway.TranscriptEntry) error {
	var body any = e.Result
	if e.Call != nil {
		body = e.Call
	}
	if h, err := canon.Digest(body); err != nil || h != e.EntryHash {
		c.t.Errorf("transcript entry %d (%s): entry hash %s, the general digest %s (%v)", e.Seq, e.Kind, e.EntryHash, h, err)
	}
	if h, err := jcsDigest(body); err != nil || h != e.EntryHash {
		c.t.Errorf("transcript entry %d (%s): entry hash %s, jcs's digest %s (%v)", e.Seq, e.Kind, e.EntryHash, h, err)
	}
	return c.sink.Append(ctx, e)
}

// jcsDigest is the digest of v's RFC 8785 form as github.com/gowebpki/jcs
// writes it from encoding/json's output: the reference the module's own
// encoders are held to.
func jcsDigest(v any) (string, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return "", err
	}
	b, err := jcs.Transform(raw)
	if err != nil {
		return "", err
	}
	return canon.DigestBytes(b), nil
}

// rebind binds the fixture's compiled run to another gateway.
// ordersRun binds f's run to a gateway whose one adapter, adp_orders,
// serves lookup with ad, registered as lookup says.
func ordersRun(t testing.TB, f *fixture, ad gateway.Adapter, lookup gateway.Capability, opts *gateway.Options) *gateway.Run {
	t.Helper()
	gw, err := gateway.New([]gateway.Registration{{AdapterID: "adp_orders", Adapter: ad, Capabilities: map[string]gateway.Capability{"lookup": lookup}}}, opts)
	if err != nil {
		t.Fatal(err)
	}
	return rebind(t, f, gw)
}

func rebind(t testing.TB, f *fixture, gw *gateway.Gateway) *gateway.Run {
	t.Helper()
	run, err := gw.NewRun(gateway.RunConfig{Prepared: f.prepared, Compiled: f.cc, Request: f.req, RunContext: f.rc, Meter: runcontext.NewMeter(f.rc.RunBudget, f.now)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return run
}

// lowValue makes the run's request a 1200 refund, so the finance gate is
// not active and writes run without approval.
func lowValue(_ *fixture, _ *runcontext.RunContext, req *runcontext.InvokeRequest, _ map[string]gateway.Capability) {
	req.Input.Context["refund_amount"] = 1200
}

func refundCall(amount float64) gateway.CallRequest {
	return gateway.CallRequest{CapabilityID: "adp_payments.issue_refund", Step: gateway.StepID{Index: 3},
		Args: map[string]any{"order_id": "ord_881", "amount_inr": amount, "currency": "INR"}}
}

func lookupCall() gateway.CallRequest {
	return gateway.CallRequest{CapabilityID: "adp_orders.lookup", Step: gateway.StepID{Index: 1}, Args: map[string]any{"order_id": "ord_881"}}
}

func approvalFor(res *gateway.ToolResultEnvelope, role string, at time.Time, id string) *gateway.Approval {
	return &gateway.Approval{ApprovalID: id, GateID: res.Approval.GateID, ActionDigest: res.Approval.ActionDigest,
		Approver: "user_finance_lead_77", ApproverRole: role, DecidedAt: at}
}

// meteredRun is ordersRun with the run's meter returned too.
func meteredRun(t testing.TB, f *fixture, ad gateway.Adapter, lookup gateway.Capability, opts *gateway.Options) (*gateway.Run, *runcontext.Meter) {
	t.Helper()
	gw, err := gateway.New([]gateway.Registration{{AdapterID: "adp_orders", Adapter: ad, Capabilities: map[string]gateway.Capability{"lookup": lookup}}}, opts)
	if err != nil {
		t.Fatal(err)
	}
	meter := runcontext.NewMeter(f.rc.RunBudget, f.now)
	run, err := gw.NewRun(gateway.RunConfig{Prepared: f.prepared, Compiled: f.cc, Request: f.req, RunContext: f.rc, Meter: meter}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return run, meter
}
