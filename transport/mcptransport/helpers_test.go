package mcptransport_test

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/contextos/contextos/compiler"
	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/internal/fixture"
	"github.com/contextos/contextos/pack"
	"github.com/contextos/contextos/runcontext"
	"github.com/contextos/contextos/transport"
	"github.com/contextos/contextos/transport/mcptransport"
)

// runNow is the governed runs' clock.
var runNow = time.Date(2026, 5, 4, 9, 31, 0, 0, time.UTC)

// supportRun compiles the support pack (internal/fixture, the shared copy)
// for its refund request and binds a run of gw to it: adp_orders.lookup is
// read only, adp_payments.issue_refund a destructive write whose
// permission names idempotency_key. The request is a 1200 refund, below
// the finance gate, so writes run without approval. edit, when set,
// changes the run context and request before the compile.
func supportRun(gw *gateway.Gateway, edit func(*runcontext.RunContext, *runcontext.InvokeRequest)) (*gateway.Run, error) {
	return supportRunOf(gw, nil, edit)
}

// supportRunOf is supportRun with the pack changed by editPack first.
func supportRunOf(gw *gateway.Gateway, editPack func(*pack.Pack), edit func(*runcontext.RunContext, *runcontext.InvokeRequest)) (*gateway.Run, error) {
	docs := [4][]byte{fixture.SupportPack(), fixture.Invoke(), fixture.RunContext(), fixture.Evidence()}
	p, err := pack.Decode(docs[0])
	if err != nil {
		return nil, err
	}
	if editPack != nil {
		editPack(p)
	}
	req, err := runcontext.DecodeInvokeRequest(docs[1])
	if err != nil {
		return nil, err
	}
	rc, err := runcontext.DecodeRunContext(docs[2])
	if err != nil {
		return nil, err
	}
	var ev compiler.StaticEvidence
	if err := json.Unmarshal(docs[3], &ev); err != nil {
		return nil, err
	}
	h := req.Trace.Headers()
	rc.TraceContext = &h
	req.Input.Context["refund_amount"] = 1200
	if edit != nil {
		edit(rc, req)
	}
	prepared, err := compiler.Prepare([]compiler.Input{{Ref: pack.MustParseRef("ctxpack.support@1.0.0"), Pack: p}}, &compiler.Options{Ontologies: []string{"ont.support@1.0.0"}, Evidence: ev})
	if err != nil {
		return nil, err
	}
	cc, err := prepared.Compile(bg, req, rc)
	if err != nil {
		return nil, err
	}
	return gw.NewRun(gateway.RunConfig{Prepared: prepared, Compiled: cc, Request: req, RunContext: rc, Meter: runcontext.NewMeter(rc.RunBudget, runNow)}, &gateway.RunOptions{Now: func() time.Time { return runNow }})
}

// governed registers the MCP adapter a as adp_orders (lookup) and
// adp_payments (issue_refund) and returns a run of the support pack.
func governed(t testing.TB, a *mcptransport.Adapter, edit func(*runcontext.RunContext, *runcontext.InvokeRequest)) *gateway.Run {
	t.Helper()
	caps, err := a.Capabilities()
	if err != nil {
		t.Fatal(err)
	}
	refund := caps["issue_refund"]
	refund.Scopes = []string{"payments.refund"}
	gw, err := gateway.New([]gateway.Registration{
		{AdapterID: "adp_orders", Adapter: a, Capabilities: map[string]gateway.Capability{"lookup": caps["lookup"]}},
		{AdapterID: "adp_payments", Adapter: a, Capabilities: map[string]gateway.Capability{"issue_refund": refund}},
	}, &gateway.Options{Now: func() time.Time { return runNow }})
	if err != nil {
		t.Fatal(err)
	}
	run, err := supportRun(gw, edit)
	if err != nil {
		t.Fatal(err)
	}
	return run
}

// lookupRun registers the MCP adapter a as adp_orders (lookup) on a
// gateway recording into a memory transcript, and returns a run of the
// support pack and the transcript.
func lookupRun(t testing.TB, a *mcptransport.Adapter) (*gateway.Run, *gateway.MemoryTranscript) {
	t.Helper()
	caps, err := a.Capabilities()
	if err != nil {
		t.Fatal(err)
	}
	mt := gateway.NewMemoryTranscript()
	gw, err := gateway.New([]gateway.Registration{{AdapterID: "adp_orders", Adapter: a, Capabilities: map[string]gateway.Capability{"lookup": caps["lookup"]}}},
		&gateway.Options{Now: func() time.Time { return runNow }, Transcript: mt})
	if err != nil {
		t.Fatal(err)
	}
	run, err := supportRun(gw, nil)
	if err != nil {
		t.Fatal(err)
	}
	return run, mt
}

// memAdapter serves s in memory and connects an adapter to it; both end
// with the test.
func memAdapter(t testing.TB, s *mcp.Server, ep transport.Endpoint, opts *mcptransport.Options) *mcptransport.Adapter {
	t.Helper()
	st, ct := mcp.NewInMemoryTransports()
	ss, err := s.Connect(bg, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	var o mcptransport.Options
	if opts != nil {
		o = *opts
	}
	o.Transport = ct
	ep.Transport = transport.TransportMCP
	a, err := mcptransport.Connect(bg, ep, &o)
	if err != nil {
		ss.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		a.Close()
		ss.Close()
		ss.Wait()
	})
	return a
}

func lookupCall() gateway.CallRequest {
	return gateway.CallRequest{CapabilityID: "adp_orders.lookup", Step: gateway.StepID{Index: 1}, Args: map[string]any{"order_id": "ord_881"}}
}

func refundCall() gateway.CallRequest {
	return gateway.CallRequest{CapabilityID: "adp_payments.issue_refund", Step: gateway.StepID{Index: 3}, Args: map[string]any{"order_id": "ord_881", "amount_inr": 1200.0, "currency": "INR"}}
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }
