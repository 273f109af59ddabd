// Command refund runs the seeds' MVP end to end: the canonical support
// pack signed with a dev key, a deterministic rule-based planner, and
// in-process adapters for order lookup, policy evaluation and payments. It
// shows four flows:
//
//  1. a 4200 refund that pauses for finance approval, is approved by a
//     finance lead and is DECIDED (the pack's finance gate reads the refund
//     call's own amount, so whatever the request says, a refund call above
//     3000 pauses);
//  2. a refund without identity verification, which policy refuses;
//  3. a 1200 refund decided without an approval gate;
//  4. the replay of the first run, offline, reporting replay_equal.
//
// By default every store is in memory. With -store sqlite:FILE or
// -store postgres://… the pack registry, checkpoints, replay packets,
// decision records, transcripts, idempotency claims, used approvals and
// memory live in that database, and the run can outlive the process:
//
//	go run ./examples/refund -store sqlite:refund.db -pause              # flow 1 up to the pause, then exit
//	go run ./examples/refund -store sqlite:refund.db -resume run_flow1   # another process approves and finishes it
//
// The second invocation finds the approval the run awaits in the run's
// DEFERRED decision record, grants it as the finance lead and resumes the
// run from its stored checkpoint: payments is called once, by that
// process. A store keeps every run it ran, so the four flows run once per
// store (their run ids are fixed).
//
// With -planner openai:MODEL (or anthropic:MODEL) a model plans instead of
// the rule-based planner, through planner/openai for OpenAI or any
// OpenAI-compatible server (OPENAI_API_KEY, OPENAI_BASE_URL) or
// planner/anthropic (ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL):
//
//	OPENAI_BASE_URL=http://127.0.0.1:11434/v1 go run ./examples/refund -planner openai:qwen3
//
// Each turn's tokens are charged to the run's token budget; -price
// MODEL=IN/OUT[/CACHED[/CACHE_WRITE]] (USD per million tokens, as in
// -price gpt-4.1=2/8/0.5) prices them, so they are charged to the cost
// budget (max_cost_cents, 25 cents here) too.
//
// The model proposes; the pack, the critic and the gateway decide what
// runs, and flow 4 replays its run from the recorded turns without asking
// the model again.
//
// The clock is fixed so the output (ids, hashes, timestamps) is the same on
// every run; a host passes its own clock.
package main

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	_ "embed"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"iter"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/compiler"
	"github.com/contextos/contextos/decision"
	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/pack"
	"github.com/contextos/contextos/planner"
	"github.com/contextos/contextos/planner/anthropic"
	"github.com/contextos/contextos/planner/openai"
	"github.com/contextos/contextos/runcontext"
	"github.com/contextos/contextos/store/postgres"
	"github.com/contextos/contextos/store/sqlite"
	"github.com/contextos/contextos/transport"
)

var (
	//go:embed pack.json
	packJSON []byte
	//go:embed evidence.json
	evidenceJSON []byte
	//go:embed invoke.json
	invokeJSON []byte
	//go:embed run-context.json
	runContextJSON []byte
)

func main() {
	os.Exit(cli(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}

// config is what the flags ask for.
type config struct {
	// paymentsURL, when set, is the Tool Contract v1 endpoint the payments
	// tool is called at, over the external transport.
	paymentsURL string
	// store is "" (in memory), sqlite:FILE or a postgres:// URL.
	store string
	// pause runs flow 1 up to its pause and stops.
	pause bool
	// resume is the id of a paused run to approve and continue.
	resume string
	// planner is "" (the rule-based planner) or a model planner,
	// openai:MODEL or anthropic:MODEL.
	planner string
	// price is the model's price, MODEL=IN/OUT[/CACHED[/CACHE_WRITE]] in
	// USD per million tokens (planner.ParsePrice), "" for none.
	price string
}

// errUsage reports flags that do not go together.
var errUsage = errors.New("usage")

// cli runs the command with args and returns its exit code.
func cli(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("refund", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg config
	fs.StringVar(&cfg.paymentsURL, "payments-url", "", "call the payments tool over the external transport (Tool Contract v1) at this URL instead of in process; serve it with -serve-payments")
	serve := fs.String("serve-payments", "", "serve the payments tool as a Tool Contract v1 endpoint on this address (e.g. 127.0.0.1:8088) and wait")
	fs.StringVar(&cfg.store, "store", "", "keep every store in a database instead of in memory: sqlite:FILE or postgres://…")
	fs.BoolVar(&cfg.pause, "pause", false, "run flow 1 until it pauses for finance approval and exit, leaving the run in -store")
	fs.StringVar(&cfg.resume, "resume", "", "approve the finance gate of the paused run `RUN_ID` in -store as the finance lead and continue it")
	fs.StringVar(&cfg.planner, "planner", "", "plan with a model instead of the rule-based planner: `openai:MODEL` (OPENAI_API_KEY, OPENAI_BASE_URL: OpenAI or any OpenAI-compatible server) or anthropic:MODEL (ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL)")
	fs.StringVar(&cfg.price, "price", "", "the -planner model's price, USD per million tokens: `MODEL=IN/OUT[/CACHED[/CACHE_WRITE]]` (e.g. gpt-4.1=2/8/0.5); the turns are then charged to the run's cost budget (max_cost_cents)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "refund: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	if cfg.price != "" && cfg.planner == "" {
		fmt.Fprintln(stderr, "refund: -price prices the -planner model: give -planner")
		return 2
	}
	if *serve != "" {
		fmt.Fprintf(stderr, "refund: payments tool on http://%s\n", *serve)
		if err := http.ListenAndServe(*serve, paymentsHandler(&paymentsAdapter{})); err != nil {
			fmt.Fprintln(stderr, "refund:", err)
			return 1
		}
		return 0
	}
	if err := run(ctx, stdout, cfg); err != nil {
		fmt.Fprintln(stderr, "refund:", err)
		if errors.Is(err, errUsage) {
			return 2
		}
		return 1
	}
	return 0
}

// now is the example's fixed clock.
var now = time.Date(2026, 5, 4, 9, 31, 0, 0, time.UTC)

// run runs what cfg asks for: the four flows, or with a durable store
// flow 1 up to its pause (cfg.pause) or the resumption of a paused run
// (cfg.resume).
func run(ctx context.Context, w io.Writer, cfg config) error {
	switch {
	case cfg.pause && cfg.resume != "":
		return fmt.Errorf("%w: -pause and -resume are separate invocations", errUsage)
	case (cfg.pause || cfg.resume != "") && cfg.store == "":
		return fmt.Errorf("%w: -pause and -resume need -store (an in-memory run ends with its process)", errUsage)
	}
	rt, st, payments, err := newRuntime(ctx, cfg)
	if err != nil {
		return err
	}
	if st != nil {
		defer st.Close()
	}
	switch {
	case cfg.pause:
		return pauseFlow(ctx, w, rt)
	case cfg.resume != "":
		return resumeFlow(ctx, w, rt, st.Records(), payments, cfg.resume)
	}

	fmt.Fprintln(w, "== 1. Refund of INR 4200: pauses for finance approval")
	req, rc, err := request("req_flow1", 4200, true)
	if err != nil {
		return err
	}
	res, err := stream(w, rt.Stream(ctx, req, rc))
	if err != nil {
		return err
	}
	done := res
	switch {
	case res.Pending != nil:
		approval := financeApproval(res.Pending.GateID, res.Pending.ActionDigest)
		fmt.Fprintf(w, "   approve  %s by %s (%s)\n", approval.GateID, approval.Approver, approval.ApproverRole)
		if done, err = rt.Resume(ctx, res.RunID, contextos.ResumeInput{Approvals: []gateway.Approval{approval}}); err != nil {
			return err
		}
		for _, r := range done.ToolResults[len(res.ToolResults)-1:] {
			fmt.Fprintf(w, "   tool     %-26s %s %s\n", r.CapabilityID, r.Status, outputLine(r))
		}
	case cfg.planner == "":
		return fmt.Errorf("flow 1 did not pause: run %s is %s (a store keeps every run it ran: use a fresh one)", res.RunID, res.Status)
	default:
		// A model decides for itself: it may refuse, escalate or stop
		// short of the refund, and the run is what it is.
		fmt.Fprintf(w, "   the model's plan did not reach the finance gate: run %s is %s\n", res.RunID, res.Status)
	}
	fmt.Fprintf(w, "   decision %s %s (payments called %d time)\n\n", done.Status, done.Record.Outcome, payments.calls.Load())
	fmt.Fprintln(w, "   The decision record:")
	b, err := json.MarshalIndent(done.Record, "   ", "  ")
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "   %s\n\n", b)

	fmt.Fprintln(w, "== 2. Refund without identity verification: refused")
	req, rc, err = request("req_flow2", 1200, false)
	if err != nil {
		return err
	}
	if _, err := stream(w, rt.Stream(ctx, req, rc)); err != nil {
		return err
	}
	fmt.Fprintln(w)

	fmt.Fprintln(w, "== 3. Refund of INR 1200: decided without a gate")
	req, rc, err = request("req_flow3", 1200, true)
	if err != nil {
		return err
	}
	if _, err := stream(w, rt.Stream(ctx, req, rc)); err != nil {
		return err
	}
	fmt.Fprintln(w)

	fmt.Fprintln(w, "== 4. Replay of run 1, offline")
	p, err := rt.Packets().Get(ctx, done.ReplayPacketID)
	if err != nil {
		return err
	}
	before := payments.calls.Load()
	rep, err := rt.Replay(ctx, p)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "   packet   %s (%d planner turns, %d adapter outcomes, %d transcript entries)\n", p.ReplayPacketID, len(p.PlannerOutput), len(p.Outcomes), len(p.Transcript))
	fmt.Fprintf(w, "   result   %s, %d differences; live payments calls during replay: %d\n", rep.Status, len(rep.Diffs), payments.calls.Load()-before)
	return nil
}

// financeApproval is the finance lead's approval of the action digest at
// gate.
func financeApproval(gate, actionDigest string) gateway.Approval {
	return gateway.Approval{ApprovalID: "apr_finance_1", GateID: gate, ActionDigest: actionDigest,
		Approver: "user_finance_lead_77", ApproverRole: "finance_lead", DecidedAt: now}
}

// pauseFlow runs flow 1 until it pauses for approval; the run stays in
// the durable store for another process to resume.
func pauseFlow(ctx context.Context, w io.Writer, rt *contextos.Runtime) error {
	fmt.Fprintln(w, "== 1. Refund of INR 4200: pauses for finance approval")
	req, rc, err := request("req_flow1", 4200, true)
	if err != nil {
		return err
	}
	res, err := stream(w, rt.Stream(ctx, req, rc))
	if err != nil {
		return err
	}
	if res.Pending == nil {
		return fmt.Errorf("flow 1 did not pause: run %s is %s (a store keeps every run it ran: use a fresh one)", res.RunID, res.Status)
	}
	fmt.Fprintf(w, "   stored   run %s awaits %s; continue it in another process with -resume %s\n", res.RunID, res.Pending.GateID, res.RunID)
	return nil
}

// resumeFlow continues a paused run in this process: the approval the run
// awaits is read from its DEFERRED decision record in the store, granted
// by the finance lead, and the run resumes from its stored checkpoint.
func resumeFlow(ctx context.Context, w io.Writer, rt *contextos.Runtime, records decision.Store, payments *counting, runID string) error {
	recs, err := records.List(ctx, decision.Filter{RunID: runID})
	if err != nil {
		return err
	}
	// The run's state is its latest record; a CLOSED record only closes an
	// earlier DEFERRED one once the run went on.
	var last *decision.Record
	for _, r := range recs {
		if r.Status != decision.Closed {
			last = r
		}
	}
	if last == nil {
		return fmt.Errorf("run %s: %w in the store", runID, contextos.ErrNotFound)
	}
	if last.Status != decision.Deferred || last.Awaiting == nil || last.Awaiting.Kind != "approval" {
		return fmt.Errorf("run %s: %w: its latest record is %s", runID, contextos.ErrNotResumable, last.Status)
	}
	fmt.Fprintf(w, "== 1. Refund of INR 4200, resumed in this process: run %s awaits %s by a %s\n", runID, last.Awaiting.GateID, last.Awaiting.ApproverRole)
	approval := financeApproval(last.Awaiting.GateID, last.Awaiting.ActionDigest)
	fmt.Fprintf(w, "   approve  %s by %s (%s)\n", approval.GateID, approval.Approver, approval.ApproverRole)
	done, err := stream(w, rt.ResumeStream(ctx, runID, contextos.ResumeInput{Approvals: []gateway.Approval{approval}}))
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "   result   %s %s (payments called %d time in this process)\n", done.Status, done.Record.Outcome, payments.calls.Load())
	return nil
}

// stream prints the events of a run (Stream or ResumeStream) as a step log
// and returns its result.
func stream(w io.Writer, events iter.Seq2[contextos.Event, error]) (*contextos.Result, error) {
	for e, err := range events {
		if err != nil {
			return nil, err
		}
		switch e.Kind {
		case contextos.EventCompiled:
			fmt.Fprintf(w, "   compiled %s, tools: %s\n", short(e.Compiled.CompiledContextHash), strings.Join(e.Compiled.Tools, ", "))
		case contextos.EventPlan:
			var steps []string
			for _, s := range e.Plan.Steps {
				steps = append(steps, s.CapabilityID)
			}
			if d := e.Plan.Decision; d != nil {
				steps = append(steps, "propose "+d.Outcome)
			}
			if e.Plan.Replan != "" {
				steps = append(steps, "asks to plan again ("+e.Plan.Replan+")")
			}
			fmt.Fprintf(w, "   plan     turn %d: %s\n", e.Turn, strings.Join(steps, ", then "))
		case contextos.EventVerdict:
			fmt.Fprintln(w, strings.TrimRight(fmt.Sprintf("   critic   %s %s", e.Verdict.Verdict, e.Verdict.Reason), " "))
		case contextos.EventToolResult:
			fmt.Fprintf(w, "   tool     %-26s %s %s\n", e.Result.CapabilityID, e.Result.Status, outputLine(e.Result))
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

func outputLine(r *gateway.ToolResultEnvelope) string {
	if r.Error != nil {
		return r.Error.Code
	}
	if len(r.Output) == 0 {
		return ""
	}
	b, _ := json.Marshal(r.Output)
	return string(b)
}

func short(h string) string { return h[:len("sha256:")+12] + "…" }

// durable is what the example asks of a durable store; store/sqlite and
// store/postgres both provide it.
type durable interface {
	// Configure points a runtime's stores at the database.
	Configure(o *contextos.Options)
	Registry(opts *pack.ValidateOptions) pack.Registry
	Records() decision.Store
	Close() error
}

// openStore opens the durable store spec names: sqlite:FILE or a
// postgres:// URL. Errors never repeat spec (a URL may hold a password).
func openStore(ctx context.Context, spec string) (durable, error) {
	switch {
	case strings.HasPrefix(spec, "sqlite:"):
		st, err := sqlite.Open(ctx, strings.TrimPrefix(spec, "sqlite:"), nil)
		if err != nil {
			return nil, err
		}
		return st, nil
	case strings.HasPrefix(spec, "postgres://"), strings.HasPrefix(spec, "postgresql://"):
		st, err := postgres.Open(ctx, spec, nil)
		if err != nil {
			return nil, err
		}
		return st, nil
	}
	return nil, fmt.Errorf("%w: -store wants sqlite:FILE or a postgres:// URL", errUsage)
}

// newRuntime builds the runtime: the pack signed with a dev key and
// published in the registry, the rule-based planner, in-process adapters,
// every run captured for replay. Without cfg.store every store is in
// memory; with it, every store is the database's, returned for the caller
// to close.
func newRuntime(ctx context.Context, cfg config) (*contextos.Runtime, durable, *counting, error) {
	var opts contextos.Options
	var reg pack.Registry = pack.NewMemoryRegistry(nil)
	var st durable
	if cfg.store != "" {
		var err error
		if st, err = openStore(ctx, cfg.store); err != nil {
			return nil, nil, nil, err
		}
		st.Configure(&opts)
		reg = st.Registry(nil)
	}
	planner := contextos.Planner(contextos.PlannerFunc(plan))
	if cfg.planner != "" {
		var err error
		if planner, err = modelPlanner(cfg.planner, cfg.price); err != nil {
			if st != nil {
				_ = st.Close()
			}
			return nil, nil, nil, fmt.Errorf("%w: -planner: %w", errUsage, err)
		}
	}
	rt, payments, err := build(ctx, cfg.paymentsURL, planner, reg, opts)
	if err != nil {
		if st != nil {
			_ = st.Close()
		}
		return nil, nil, nil, err
	}
	return rt, st, payments, nil
}

// build publishes the signed pack in reg (a store that already holds it
// keeps it) and builds the runtime over opts, whose stores are set or
// left to the in-memory defaults.
func build(ctx context.Context, paymentsURL string, planner contextos.Planner, reg pack.Registry, opts contextos.Options) (*contextos.Runtime, *counting, error) {
	seed := sha256.Sum256([]byte("contextos example dev key"))
	key := ed25519.NewKeyFromSeed(seed[:])
	kid := pack.KeyID(key.Public().(ed25519.PublicKey))
	p, err := pack.DecodeAndValidate(packJSON, nil)
	if err != nil {
		return nil, nil, err
	}
	signed, err := pack.Sign(p, kid, key, nil)
	if err != nil {
		return nil, nil, err
	}
	entry, err := reg.Put(ctx, signed)
	if err != nil {
		return nil, nil, err
	}
	if entry.State != pack.StatePublished {
		// Review (each required role signs off, by a reviewer of its own), sign and publish.
		if _, err := pack.Publish(ctx, reg, entry.Ref, "example",
			pack.Signoff{Reviewer: "arch-reviewer", Role: pack.RoleArchitecture}, pack.Signoff{Reviewer: "security-reviewer", Role: pack.RoleSecurity},
			pack.Signoff{Reviewer: "data-reviewer", Role: pack.RoleData}, pack.Signoff{Reviewer: "eval-reviewer", Role: pack.RoleEvaluation}); err != nil {
			return nil, nil, err
		}
	}
	keys := runcontext.NewStaticKeys(map[string]ed25519.PublicKey{kid: key.Public().(ed25519.PublicKey)})
	var evidence compiler.StaticEvidence
	if err := json.Unmarshal(evidenceJSON, &evidence); err != nil {
		return nil, nil, err
	}
	payments := &counting{next: &paymentsAdapter{}}
	refund := gateway.Capability{Scopes: []string{"payments.refund"}}
	if paymentsURL != "" {
		ext, err := transport.NewAdapter(transport.Endpoint{Transport: transport.TransportExternal, URL: paymentsURL, AllowPrivate: true,
			Timeout: 2 * time.Second, Retry: transport.Retry{MaxAttempts: 3, Backoff: 10 * time.Millisecond}}, &transport.Options{Now: func() time.Time { return now }})
		if err != nil {
			return nil, nil, err
		}
		payments.next = ext
		refund = ext.Capability()
		refund.Scopes = []string{"payments.refund"}
	}
	opts.Adapters = []gateway.Registration{
		{AdapterID: "adp_orders", Adapter: gateway.AdapterFunc(lookupOrder), Capabilities: map[string]gateway.Capability{"lookup": {}}},
		{AdapterID: "adp_policy", Adapter: gateway.AdapterFunc(evalPolicy), Capabilities: map[string]gateway.Capability{"eval": {}}},
		{AdapterID: "adp_payments", Adapter: payments, Capabilities: map[string]gateway.Capability{"issue_refund": refund}},
	}
	opts.Evidence = evidence
	opts.Ontologies = []string{"ont.support@1.0.0"}
	opts.ReplaySampleRate = 1
	opts.Now = func() time.Time { return now }
	opts.Identity = contextos.IdentityOptions{Keys: identityKeys}
	rt, err := contextos.New(planner, reg, keys, &opts)
	return rt, payments, err
}

// counting counts the calls the runtime makes to an adapter.
type counting struct {
	next  gateway.Adapter
	calls atomic.Int64
}

func (c *counting) Call(ctx context.Context, call *gateway.Call) (*gateway.Outcome, error) {
	c.calls.Add(1)
	return c.next.Call(ctx, call)
}

// identityKey is the example identity service's key: it signs each run's
// identity claim (ctxid/1). It is not the pack-signing key: who may act is
// a trust root of its own.
var (
	identitySeed = sha256.Sum256([]byte("contextos example identity key"))
	identityKey  = ed25519.NewKeyFromSeed(identitySeed[:])
	identityKeys = runcontext.NewStaticKeys(map[string]ed25519.PublicKey{"kid_example_identity": identityKey.Public().(ed25519.PublicKey)})
)

// request is the canonical invocation with its own request and run id, and
// the short-lived identity claim an identity service issues for the run
// (the refund is destructive work: the runtime requires one).
func request(id string, amount int, verified bool) (*runcontext.InvokeRequest, *runcontext.RunContext, error) {
	req, err := runcontext.DecodeInvokeRequest(invokeJSON)
	if err != nil {
		return nil, nil, err
	}
	rc, err := runcontext.DecodeRunContext(runContextJSON)
	if err != nil {
		return nil, nil, err
	}
	req.RequestID = id
	req.Input.Message = fmt.Sprintf("Refund order ord_881 for INR %d", amount)
	req.Input.Context["refund_amount"] = amount
	req.Input.Context["identity_verified"] = verified
	rc.RunID = "run_" + strings.TrimPrefix(id, "req_")
	claim := &runcontext.IdentityClaim{Iss: "https://id.example", Sub: rc.Agent.AgentURN, RunID: rc.RunID, SessionID: rc.SessionID,
		TenantID: rc.TenantID, PrincipalChain: rc.PrincipalChain(), Scopes: []string{"tools:read", "tools:write"},
		Nbf: now.Add(-time.Minute).Unix(), Exp: now.Add(10 * time.Minute).Unix()}
	if err := runcontext.SignClaim(claim, "kid_example_identity", identityKey); err != nil {
		return nil, nil, err
	}
	rc.Agent.IdentityClaim = claim
	return req, rc, nil
}

// plan is the rule-based planner: look the order up and evaluate the
// policy; then refund if the refund tool is surfaced, else deny.
func plan(ctx context.Context, req *contextos.PlanRequest) (*contextos.Plan, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	order, _ := req.Request.Input.Context["order_id"].(string)
	if len(req.Results) == 0 {
		return &contextos.Plan{Steps: []contextos.Step{
			{CapabilityID: "adp_orders.lookup", Args: map[string]any{"order_id": order}},
			{CapabilityID: "adp_policy.eval", Args: map[string]any{"order_id": order}},
		}, Usage: contextos.PlanUsage{Tokens: 900, CostCents: 0.4}}, nil
	}
	subjects := []string{"customer:cus_77", "order:" + order}
	if !slices.Contains(req.Compiled.ContextLedger.Tools, "adp_payments.issue_refund") {
		return &contextos.Plan{Decision: &contextos.DecisionProposal{DecisionKey: "support.refund.execute", Outcome: "denied",
			Rationale: "Policy does not allow this refund: identity is not verified.", Confidence: 1, SubjectIDs: subjects},
			Usage: contextos.PlanUsage{Tokens: 300, CostCents: 0.1}}, nil
	}
	amount := req.Request.Input.Context["refund_amount"]
	return &contextos.Plan{
		Steps: []contextos.Step{{CapabilityID: "adp_payments.issue_refund", Args: map[string]any{"order_id": order, "amount_inr": amount, "currency": "INR"}}},
		Decision: &contextos.DecisionProposal{DecisionKey: "support.refund.execute", Outcome: "approved",
			Outputs:   map[string]any{"refund_amount_inr": amount, "currency": "INR"},
			Rationale: "Order delivered, within the refund window, identity verified.", Confidence: 0.95, SubjectIDs: subjects,
			EvidenceRefs: []string{"kg:order:" + order + "#snapshot_kg_2026_05_03_T0930"}},
		Usage: contextos.PlanUsage{Tokens: 700, CostCents: 0.3},
	}, nil
}

func lookupOrder(ctx context.Context, c *gateway.Call) (*gateway.Outcome, error) {
	return &gateway.Outcome{Output: map[string]any{"order_id": c.Envelope.Args["order_id"], "status": "delivered", "total_inr": 4200}}, ctx.Err()
}

func evalPolicy(ctx context.Context, c *gateway.Call) (*gateway.Outcome, error) {
	return &gateway.Outcome{Output: map[string]any{"eligible": true, "window_days_left": 24}}, ctx.Err()
}

// paymentsHandler serves the payments tool as a Tool Contract v1 endpoint
// (the external transport's server side).
func paymentsHandler(p *paymentsAdapter) http.Handler {
	return transport.NewHandler(transport.ExecutorFunc(func(ctx context.Context, req *transport.Request) *transport.Response {
		out, err := p.Call(ctx, &gateway.Call{Envelope: &gateway.ToolCallEnvelope{Args: req.Input}, IdempotencyKey: req.IdempotencyKey, Attempt: req.Attempt})
		if err != nil {
			return &transport.Response{Status: transport.StatusError, Error: &transport.Failure{Code: gateway.CodeExecutionFailed, Retryable: true, Message: "the refund could not be issued"}}
		}
		return &transport.Response{Status: transport.StatusOK, Output: out.Output}
	}))
}

// paymentsAdapter issues refunds and counts them.
type paymentsAdapter struct{ calls atomic.Int64 }

func (p *paymentsAdapter) Call(ctx context.Context, c *gateway.Call) (*gateway.Outcome, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	n := p.calls.Add(1)
	txn := fmt.Sprintf("txn_%s_%d", c.Envelope.Args["order_id"], n)
	return &gateway.Outcome{Output: map[string]any{"transaction_id": txn, "status": "issued"}, Mutations: []string{"refund:" + txn}}, nil
}

// modelPlanner builds the model planner -planner names, with the
// provider's key and base URL from the environment.
func modelPlanner(spec, price string) (contextos.Planner, error) {
	provider, model, ok := strings.Cut(spec, ":")
	var prices map[string]planner.Price
	if price != "" {
		priced, p, err := planner.ParsePrice(price)
		if err != nil {
			return nil, fmt.Errorf("-price: %w", err)
		}
		if priced != model {
			return nil, fmt.Errorf("-price prices model %.80q, -planner plans with %.80q", priced, model)
		}
		prices = map[string]planner.Price{model: p}
	}
	switch {
	case !ok || model == "":
		return nil, fmt.Errorf("%.80q: want openai:MODEL or anthropic:MODEL", spec)
	case provider == "openai":
		return openai.New(openai.Options{Model: model, Prices: prices})
	case provider == "anthropic":
		return anthropic.New(anthropic.Options{Model: model, Prices: prices})
	}
	return nil, fmt.Errorf("%.80q: the provider is openai or anthropic", spec)
}
