package agent_test

import (
	"context"
	_ "embed"
	"encoding/json"
	"sync"
	"testing"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/agent"
	"github.com/contextos/contextos/contextostest"
	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/runcontext"
)

// The governance fixtures: a pack that permits adp_coder.run as delegated
// work behind GATE_CODE_REVIEW (and a read-only adp_repo.read), an invoke
// request and a run context with a W3C trace context.
var (
	//go:embed testdata/pack.coder.json
	coderPack []byte
	//go:embed testdata/invoke.coder.json
	coderInvoke []byte
	//go:embed testdata/run-context.coder.json
	coderRunContext []byte
)

// Sentinels a test backend puts where the adapter must not copy them from.
const (
	rawTextSecret = "RAW-TEXT-SECRET"
	rawDataSecret = "RAW-DATA-SECRET"
)

// script drives one run of the test backend.
type script func(ctx context.Context, p *agent.Prepared, out *agent.Emitter) (agent.Completion, error)

// testBackend is an in-process backend built the way every backend is:
// Prepare validates the request before anything runs, Start runs the
// script as its driver. It records every prepared request.
type testBackend struct {
	kind agent.Kind
	caps agent.Capabilities
	run  script

	mu       sync.Mutex
	requests []*agent.Prepared
	started  chan struct{} // receives once per run whose driver started, when set
}

func newTestBackend(kind agent.Kind, s script) *testBackend {
	return &testBackend{kind: kind, run: s, caps: agent.NewCapabilities(agent.CapRun, agent.CapEvents, agent.CapEventsLive, agent.CapCancel,
		agent.CapToolsStructured, agent.CapFinalText, agent.CapNonInteractive, agent.CapModel)}
}

func (b *testBackend) Kind() agent.Kind                 { return b.kind }
func (b *testBackend) Capabilities() agent.Capabilities { return b.caps }

func (b *testBackend) Run(ctx context.Context, req agent.RunRequest) (*agent.Run, error) {
	p, err := agent.Prepare(b.kind, b.caps, req, agent.Defaults{})
	if err != nil {
		return nil, err
	}
	b.mu.Lock()
	b.requests = append(b.requests, p)
	b.mu.Unlock()
	return agent.Start(ctx, agent.RunConfig{Kind: b.kind, Capabilities: b.caps, Timeout: p.Timeout}, func(ctx context.Context, out *agent.Emitter) (agent.Completion, error) {
		if b.started != nil {
			b.started <- struct{}{}
		}
		return b.run(ctx, p, out)
	}), nil
}

// Requests returns the prepared requests of every run started.
func (b *testBackend) Requests() []*agent.Prepared {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]*agent.Prepared(nil), b.requests...)
}

func toolFacet(kind, phase string) json.RawMessage {
	b, _ := json.Marshal(map[string]any{"schema": agent.CapToolsStructured, "tool": map[string]any{"kind": kind, "phase": phase, "status": "running"}})
	return b
}

// codingScript is a successful coding run: status, two tool calls (one
// with a start and a delta event), assistant text, a final text and usage
// and cost in the completion data.
func codingScript(final string) script {
	return func(ctx context.Context, p *agent.Prepared, out *agent.Emitter) (agent.Completion, error) {
		evs := []agent.Event{
			{Kind: agent.EventStatus, Channel: "status", Message: "session started"},
			{Kind: agent.EventToolCall, Channel: "tool", Data: toolFacet("command_execution", "start")},
			{Kind: agent.EventToolCall, Channel: "tool", Data: toolFacet("command_execution", "delta")},
			{Kind: agent.EventToolResult, Channel: "tool", Data: toolFacet("command_execution", "complete")},
			{Kind: agent.EventToolCall, Channel: "tool", Data: toolFacet("file_change", "start")},
			{Kind: agent.EventTextOutput, Channel: "assistant", Text: "thinking aloud " + rawTextSecret},
			{Kind: agent.EventError, Channel: "error", Message: "retrying the build"},
		}
		for _, ev := range evs {
			out.Emit(ev)
		}
		return agent.Completion{Status: agent.ExitStatus{Code: 0}, FinalText: final,
			Data: json.RawMessage(`{"usage":{"input_tokens":2400,"output_tokens":84,"cached_input_tokens":2000},"cost_usd":0.25,"raw":"` + rawDataSecret + `"}`)}, ctx.Err()
	}
}

// exitScript ends with a non-zero exit code.
func exitScript(code int) script {
	return func(ctx context.Context, p *agent.Prepared, out *agent.Emitter) (agent.Completion, error) {
		out.Emit(agent.Event{Kind: agent.EventTextOutput, Channel: "assistant", Text: rawTextSecret})
		out.Emit(agent.Event{Kind: agent.EventError, Channel: "error", Message: "tests failed"})
		return agent.Completion{Status: agent.ExitStatus{Code: code}}, nil
	}
}

// blockScript runs until its context is done (the run's cancellation or
// timeout), as a process killed by its driver.
func blockScript(ctx context.Context, p *agent.Prepared, out *agent.Emitter) (agent.Completion, error) {
	out.Emit(agent.Event{Kind: agent.EventStatus, Message: "working"})
	<-ctx.Done()
	return agent.Completion{Status: agent.ExitStatus{Code: -1, Signal: "killed"}}, nil
}

// coderRequest decodes the fixtures' request and run context: a change
// that requires review (GATE_CODE_REVIEW is active).
func coderRequest(t testing.TB) (*runcontext.InvokeRequest, *runcontext.RunContext) {
	t.Helper()
	req, err := runcontext.DecodeInvokeRequest(coderInvoke)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := runcontext.DecodeRunContext(coderRunContext)
	if err != nil {
		t.Fatal(err)
	}
	return req, rc
}

// repoRegistration is the read-only adp_repo.read tool: it returns the
// file it is asked for, with a fixed content.
func repoRegistration() gateway.Registration {
	return gateway.Registration{AdapterID: "adp_repo", Adapter: gateway.AdapterFunc(func(ctx context.Context, c *gateway.Call) (*gateway.Outcome, error) {
		return &gateway.Outcome{Output: map[string]any{"path": c.Envelope.Args["path"], "content": "func round(x float64) float64 { return x }"}}, ctx.Err()
	}), Capabilities: map[string]gateway.Capability{"read": {
		ArgsSchema:    json.RawMessage(`{"type":"object","required":["path"],"additionalProperties":false,"properties":{"path":{"type":"string","minLength":1}}}`),
		HonorsContext: true,
	}}}
}

// newHarness builds a harness over the coder pack with regs registered,
// every run captured for replay.
func newHarness(t *testing.T, planner contextos.Planner, regs ...gateway.Registration) *contextostest.Harness {
	t.Helper()
	return contextostest.New(t, planner, [][]byte{coderPack}, &contextostest.Options{Runtime: contextos.Options{Adapters: regs, ReplaySampleRate: 1}})
}

var techLead = contextostest.Approver{UserID: "usr_lead_3", Role: "tech_lead"}

// planRequest is coderRequest for a run that requires no review: no gate
// is active, so a decision needs no approval.
func planRequest(t testing.TB) (*runcontext.InvokeRequest, *runcontext.RunContext) {
	t.Helper()
	req, rc := coderRequest(t)
	req.Input.Context["review_required"] = false
	return req, rc
}
