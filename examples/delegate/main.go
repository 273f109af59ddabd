// Command delegate runs a governed run in which a coding agent does the
// delegated work behind an approval gate. The agent is an in-process,
// deterministic backend of the Universal Agent API (package agent); a real
// host registers agent/codex or agent/claudecode the same way.
//
// The run reads the code through a read-only tool, then asks the agent to
// fix it: adp_coder.run is delegated work the pack permits only behind
// GATE_CODE_REVIEW, whose when reads the call itself (an agent run whose
// prompt touches the refund code, or any run the request asks a review
// for), so the run pauses. A tech lead approves; the resumed
// run starts the agent once, with the run's trace context in its
// environment (TRACEPARENT), and ends DECIDED. The replay of the run then
// serves the recorded outcome and does not run the agent again.
//
// Run it with `go run ./examples/delegate`. The clock is fixed so the
// output is the same on every run.
package main

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	_ "embed"
	"encoding/json"
	"fmt"
	"io"
	"iter"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/agent"
	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/pack"
	"github.com/contextos/contextos/runcontext"
)

var (
	//go:embed pack.json
	packJSON []byte
	//go:embed invoke.json
	invokeJSON []byte
	//go:embed run-context.json
	runContextJSON []byte
)

func main() {
	if err := run(context.Background(), os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "delegate:", err)
		os.Exit(1)
	}
}

// now is the example's fixed clock.
var now = time.Date(2026, 5, 4, 9, 31, 0, 0, time.UTC)

// run runs the flow and writes what happens to w.
func run(ctx context.Context, w io.Writer) error {
	coder := &coderBackend{}
	rt, err := newRuntime(ctx, coder)
	if err != nil {
		return err
	}
	req, err := runcontext.DecodeInvokeRequest(invokeJSON)
	if err != nil {
		return err
	}
	rc, err := runcontext.DecodeRunContext(runContextJSON)
	if err != nil {
		return err
	}

	fmt.Fprintln(w, "== 1. The run plans, reads the code and pauses before the agent runs")
	res, err := stream(w, rt.Stream(ctx, req, rc))
	if err != nil {
		return err
	}
	if res.Pending == nil {
		return fmt.Errorf("the run did not pause: %s", res.Status)
	}
	fmt.Fprintf(w, "   agent runs so far: %d\n\n", coder.runs())

	fmt.Fprintln(w, "== 2. A tech lead approves; the run resumes and the agent runs once")
	approval := gateway.Approval{ApprovalID: "apr_review_1", GateID: res.Pending.GateID, ActionDigest: res.Pending.ActionDigest,
		Approver: "usr_lead_3", ApproverRole: "tech_lead", DecidedAt: now}
	fmt.Fprintf(w, "   approve  %s by %s (%s)\n", approval.GateID, approval.Approver, approval.ApproverRole)
	done, err := stream(w, rt.ResumeStream(ctx, res.RunID, contextos.ResumeInput{Approvals: []gateway.Approval{approval}}))
	if err != nil {
		return err
	}
	last := coder.last()
	fmt.Fprintf(w, "   agent runs: %d; it got TRACEPARENT=%s and the prompt %q\n\n", coder.runs(), last.Env["TRACEPARENT"], last.Prompt)

	fmt.Fprintln(w, "   The decision record:")
	b, err := json.MarshalIndent(done.Record, "   ", "  ")
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "   %s\n\n", b)

	fmt.Fprintln(w, "== 3. Replay of the run, offline")
	p, err := rt.Packets().Get(ctx, done.ReplayPacketID)
	if err != nil {
		return err
	}
	before := coder.runs()
	rep, err := rt.Replay(ctx, p)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "   result   %s, %d differences; agent runs during the replay: %d\n", rep.Status, len(rep.Diffs), coder.runs()-before)
	return nil
}

// newRuntime signs the pack with a dev key into an in-memory registry and
// builds the runtime: the rule-based planner, the read-only repo tool, the
// coding agent as adp_coder, every run captured for replay.
func newRuntime(ctx context.Context, coder *coderBackend) (*contextos.Runtime, error) {
	seed := sha256.Sum256([]byte("contextos delegate example dev key"))
	key := ed25519.NewKeyFromSeed(seed[:])
	kid := pack.KeyID(key.Public().(ed25519.PublicKey))
	p, err := pack.DecodeAndValidate(packJSON, nil)
	if err != nil {
		return nil, err
	}
	signed, err := pack.Sign(p, kid, key, nil)
	if err != nil {
		return nil, err
	}
	reg := pack.NewMemoryRegistry(nil)
	entry, err := reg.Put(ctx, signed)
	if err != nil {
		return nil, err
	}
	// Review (each required role signs off, by a reviewer of its own), sign and publish.
	if _, err := pack.Publish(ctx, reg, entry.Ref, "example",
		pack.Signoff{Reviewer: "arch-reviewer", Role: pack.RoleArchitecture}, pack.Signoff{Reviewer: "security-reviewer", Role: pack.RoleSecurity},
		pack.Signoff{Reviewer: "data-reviewer", Role: pack.RoleData}, pack.Signoff{Reviewer: "eval-reviewer", Role: pack.RoleEvaluation}); err != nil {
		return nil, err
	}
	keys := runcontext.NewStaticKeys(map[string]ed25519.PublicKey{kid: key.Public().(ed25519.PublicKey)})
	coderTool := agent.NewAdapter(coder, &agent.AdapterOptions{AdapterID: "adp_coder", Scopes: []string{"repo.write"},
		WorkingDir: os.TempDir(), Timeout: 10 * time.Minute})
	opts := &contextos.Options{
		Adapters: []gateway.Registration{
			{AdapterID: "adp_repo", Adapter: gateway.AdapterFunc(readFile), Capabilities: map[string]gateway.Capability{"read": {
				ArgsSchema:    json.RawMessage(`{"type":"object","required":["path"],"additionalProperties":false,"properties":{"path":{"type":"string"}}}`),
				HonorsContext: true,
			}}},
			coderTool.Registration(),
		},
		Ontologies:       []string{"ont.code@1.0.0"},
		ReplaySampleRate: 1,
		Now:              func() time.Time { return now },
		// The pack allows delegated work, so a run must carry a signed
		// identity claim unless the host waives it; this example waives
		// it (its records say so). examples/refund shows the claim.
		Identity: contextos.IdentityOptions{AllowUnclaimed: true},
	}
	return contextos.New(contextos.PlannerFunc(plan), reg, keys, opts)
}

// source is the file the example's repo tool serves.
const source = "func refund(amount float64) float64 { return math.Floor(amount * 0.9) }"

func readFile(ctx context.Context, c *gateway.Call) (*gateway.Outcome, error) {
	return &gateway.Outcome{Output: map[string]any{"path": c.Envelope.Args["path"], "content": source}}, ctx.Err()
}

// plan is the rule-based planner: read the file, then delegate the fix to
// the coding agent and propose the decision.
func plan(ctx context.Context, req *contextos.PlanRequest) (*contextos.Plan, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	const path = "internal/refund/calc.go"
	if len(req.Results) == 0 {
		return &contextos.Plan{Steps: []contextos.Step{{CapabilityID: "adp_repo.read", Args: map[string]any{"path": path}}},
			Usage: contextos.PlanUsage{Tokens: 400, CostCents: 0.2}}, nil
	}
	issue, _ := req.Request.Input.Context["issue"].(string)
	prompt := fmt.Sprintf("%s: %s. The file %s truncates the refund with math.Floor; round to the cent instead and add a test.", issue, req.Request.Input.Message, path)
	return &contextos.Plan{
		Steps: []contextos.Step{{CapabilityID: "adp_coder.run", Args: map[string]any{"prompt": prompt}}},
		Decision: &contextos.DecisionProposal{DecisionKey: "code.change.apply", Outcome: "applied",
			Rationale: "The coding agent fixed the rounding behind a reviewed approval.", Confidence: 0.9, SubjectIDs: []string{"repo:payments"}},
		Usage: contextos.PlanUsage{Tokens: 600, CostCents: 0.3},
	}, nil
}

// coderBackend is the in-process coding agent: deterministic, it reports
// two tool calls and a final text, and usage and cost in its completion
// data (the shape agent.UsageOf reads). It keeps every request it ran.
type coderBackend struct {
	mu   sync.Mutex
	reqs []*agent.Prepared
}

func (*coderBackend) Kind() agent.Kind { return "coder" }

func (*coderBackend) Capabilities() agent.Capabilities {
	return agent.NewCapabilities(agent.CapRun, agent.CapEvents, agent.CapToolsStructured, agent.CapFinalText, agent.CapCancel)
}

func (b *coderBackend) Run(ctx context.Context, req agent.RunRequest) (*agent.Run, error) {
	p, err := agent.Prepare(b.Kind(), b.Capabilities(), req, agent.Defaults{})
	if err != nil {
		return nil, err
	}
	b.mu.Lock()
	b.reqs = append(b.reqs, p)
	b.mu.Unlock()
	cfg := agent.RunConfig{Kind: b.Kind(), Capabilities: b.Capabilities(), Timeout: p.Timeout}
	return agent.Start(ctx, cfg, func(ctx context.Context, out *agent.Emitter) (agent.Completion, error) {
		for _, tool := range []string{"command_execution", "file_change"} {
			out.Emit(agent.Event{Kind: agent.EventToolCall, Channel: "tool",
				Data: []byte(`{"schema":"agent_api.tools.structured.v1","tool":{"kind":"` + tool + `","phase":"start","status":"running"}}`)})
		}
		out.Emit(agent.Event{Kind: agent.EventTextOutput, Channel: "assistant", Text: "Rounding to the cent with math.Round(amount*90)/100."})
		return agent.Completion{Status: agent.ExitStatus{Code: 0}, FinalText: "Fixed the rounding in internal/refund/calc.go and added TestRefundRounding.",
			Data: []byte(`{"usage":{"input_tokens":5200,"output_tokens":310,"cached_input_tokens":4096},"cost_usd":0.042}`)}, ctx.Err()
	}), nil
}

func (b *coderBackend) runs() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.reqs)
}

func (b *coderBackend) last() *agent.Prepared {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.reqs) == 0 {
		return &agent.Prepared{}
	}
	return b.reqs[len(b.reqs)-1]
}

// stream prints a run's events as a step log and returns its result.
func stream(w io.Writer, events iter.Seq2[contextos.Event, error]) (*contextos.Result, error) {
	for e, err := range events {
		if err != nil {
			return nil, err
		}
		switch e.Kind {
		case contextos.EventPlan:
			var steps []string
			for _, s := range e.Plan.Steps {
				steps = append(steps, s.CapabilityID)
			}
			if d := e.Plan.Decision; d != nil {
				steps = append(steps, "propose "+d.Outcome)
			}
			fmt.Fprintf(w, "   plan     turn %d: %s\n", e.Turn, strings.Join(steps, ", then "))
		case contextos.EventToolResult:
			fmt.Fprintf(w, "   tool     %-14s %s %s\n", e.Result.CapabilityID, e.Result.Status, outputLine(e.Result))
		case contextos.EventVerdict:
			fmt.Fprintln(w, strings.TrimRight(fmt.Sprintf("   critic   %s %s", e.Verdict.Verdict, e.Verdict.Reason), " "))
		case contextos.EventPause:
			fmt.Fprintf(w, "   paused   awaiting %s by a %s (ttl %ds)\n", e.Pause.GateID, e.Pause.ApproverRole, e.Pause.TTLSeconds)
		case contextos.EventDecision:
			fmt.Fprintf(w, "   decision %s: %s\n", strings.TrimSpace(string(e.Record.Status)+" "+e.Record.Outcome), e.Record.Rationale.Summary)
		case contextos.EventResult:
			return e.Final, nil
		}
	}
	return nil, fmt.Errorf("the stream ended without a result")
}

// outputLine is a result's error code, or its output with the agent's
// final text, exit, tool calls, usage and cost.
func outputLine(r *gateway.ToolResultEnvelope) string {
	if r.Error != nil {
		return r.Error.Code
	}
	out := r.Output
	if _, ok := out["agent_kind"]; ok {
		out = map[string]any{"final_text": out["final_text"], "exit": out["exit"], "tool_calls": out["tool_calls"],
			"tool_names": out["tool_names"], "usage": out["usage"], "cost_usd": out["cost_usd"]}
	}
	b, _ := json.Marshal(out)
	return string(b) + fmt.Sprintf(" (cost %.1f cents)", r.Metadata.CostCents)
}
