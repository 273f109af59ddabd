// Command temporal runs the refund flow as a Temporal workflow: a governed
// ContextOS run whose planner turns and tool attempts are activities,
// paused at the finance gate until a finance lead approves it with a
// Temporal Update from another process, then finished DECIDED.
//
// With a Temporal server on 127.0.0.1:7233 (namespace default):
//
//	go run ./examples/temporal run       # a worker; starts the run and waits for it
//	go run ./examples/temporal approve   # in another terminal: the finance lead approves
//
// The first process prints the approval the run awaits, and once the
// second has approved, the refund, the decision and the run's records.
// The approval is checked by the workflow's update validator (gate, role,
// tenant, TTL, action digest) before it enters the workflow's history.
// The run's records, transcript and replay packet are written by
// activities to the worker's stores (in memory here; a host passes its
// durable stores).
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
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/compiler"
	"github.com/contextos/contextos/decision"
	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/pack"
	"github.com/contextos/contextos/runcontext"
	"github.com/contextos/contextos/temporalrun"
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
	server, namespace, queue, workflowID string
}

// cli runs the command with args and returns its exit code.
func cli(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("temporal", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg config
	fs.StringVar(&cfg.server, "server", "127.0.0.1:7233", "the Temporal frontend, `host:port`")
	fs.StringVar(&cfg.namespace, "namespace", "default", "the Temporal namespace")
	fs.StringVar(&cfg.queue, "queue", "contextos-refund", "the task queue")
	fs.StringVar(&cfg.workflowID, "workflow", "refund-ord_881", "the workflow id of the run")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() != 1 || fs.Arg(0) != "run" && fs.Arg(0) != "approve" {
		fmt.Fprintln(stderr, "usage: temporal [flags] run|approve")
		return 2
	}
	c, err := client.Dial(client.Options{HostPort: cfg.server, Namespace: cfg.namespace, Logger: sdklog.NewStructuredLogger(slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))})
	if err != nil {
		fmt.Fprintln(stderr, "temporal:", err)
		return 1
	}
	defer c.Close()
	if fs.Arg(0) == "approve" {
		err = approve(ctx, stdout, c, cfg)
	} else {
		err = run(ctx, stdout, c, cfg)
	}
	if err != nil {
		fmt.Fprintln(stderr, "temporal:", err)
		return 1
	}
	return 0
}

// approve approves the finance gate the run awaits, as the finance lead,
// with an Update the workflow's validator checks.
func approve(ctx context.Context, w io.Writer, c client.Client, cfg config) error {
	p, err := temporalrun.Pending(ctx, c, cfg.workflowID)
	if err != nil {
		return err
	}
	if p == nil {
		return fmt.Errorf("workflow %s awaits no approval", cfg.workflowID)
	}
	a := temporalrun.Approval{ApprovalID: "apr_finance_1", GateID: p.GateID, ActionDigest: p.ActionDigest,
		Approver: "user_finance_lead_77", ApproverRole: "finance_lead", TenantID: "tenant_acme_prod"}
	if err := temporalrun.Approve(ctx, c, cfg.workflowID, a); err != nil {
		return err
	}
	fmt.Fprintf(w, "approved %s by %s (%s)\n", a.GateID, a.Approver, a.ApproverRole)
	return nil
}

// run runs a worker, starts the refund run and waits for its end,
// printing the approval it awaits on the way.
func run(ctx context.Context, w io.Writer, c client.Client, cfg config) error {
	stores := newStores()
	host, payments, err := newHost(ctx, stores)
	if err != nil {
		return err
	}
	wk := worker.New(c, cfg.queue, worker.Options{})
	host.Register(wk)
	if err := wk.Start(); err != nil {
		return err
	}
	defer wk.Stop()

	in, err := input(time.Now())
	if err != nil {
		return err
	}
	fmt.Fprintln(w, "== Refund of INR 4200 as a Temporal workflow")
	wr, err := temporalrun.Start(ctx, c, client.StartWorkflowOptions{ID: cfg.workflowID, TaskQueue: cfg.queue}, in)
	if err != nil {
		return err
	}
	for {
		p, err := temporalrun.Pending(ctx, c, cfg.workflowID)
		if err == nil && p != nil {
			fmt.Fprintf(w, "   paused   awaiting %s by a %s (ttl %ds); approve it from another process:\n", p.GateID, p.ApproverRole, p.TTLSeconds)
			fmt.Fprintf(w, "            go run ./examples/temporal -workflow %s approve\n", cfg.workflowID)
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	var out temporalrun.Output
	if err := wr.Get(ctx, &out); err != nil {
		return err
	}
	for _, r := range out.ToolResults {
		fmt.Fprintf(w, "   tool     %-26s %s\n", r.CapabilityID, r.Status)
	}
	fmt.Fprintf(w, "   decision %s %s (payments called %d time)\n", out.Status, out.Record.Outcome, payments.Load())
	recs, err := stores.decisions.List(ctx, decision.Filter{RunID: out.RunID})
	if err != nil {
		return err
	}
	var statuses []string
	for _, r := range recs {
		statuses = append(statuses, string(r.Status))
	}
	fmt.Fprintf(w, "   records  %s, written by activities to the worker's store\n", strings.Join(statuses, ", "))
	if out.Status != decision.Decided {
		return fmt.Errorf("run %s ended %s", out.RunID, out.Status)
	}
	return nil
}

// stores are the host's stores.
type stores struct {
	decisions   decision.Store
	transcripts gateway.TranscriptSink
	packets     contextos.PacketStore
}

func newStores() stores {
	return stores{decisions: decision.NewMemoryStore(), transcripts: gateway.NewMemoryTranscript(), packets: contextos.NewInMemoryPackets()}
}

// newHost builds the Temporal host: the pack signed with a dev key in an
// in-memory registry (every worker holds the same), the rule-based
// planner and the refund's adapters.
func newHost(ctx context.Context, st stores) (*temporalrun.Host, *atomic.Int64, error) {
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
	reg := pack.NewMemoryRegistry(nil)
	entry, err := reg.Put(ctx, signed)
	if err != nil {
		return nil, nil, err
	}
	if _, err := pack.Publish(ctx, reg, entry.Ref, "example",
		pack.Signoff{Reviewer: "arch-reviewer", Role: pack.RoleArchitecture}, pack.Signoff{Reviewer: "security-reviewer", Role: pack.RoleSecurity},
		pack.Signoff{Reviewer: "data-reviewer", Role: pack.RoleData}, pack.Signoff{Reviewer: "eval-reviewer", Role: pack.RoleEvaluation}); err != nil {
		return nil, nil, err
	}
	var evidence compiler.StaticEvidence
	if err := json.Unmarshal(evidenceJSON, &evidence); err != nil {
		return nil, nil, err
	}
	payments := &atomic.Int64{}
	refund := gateway.AdapterFunc(func(ctx context.Context, c *gateway.Call) (*gateway.Outcome, error) {
		if c.IdempotencyKey == "" {
			return nil, errors.New("a refund needs an idempotency key")
		}
		payments.Add(1)
		txn := "txn_" + c.IdempotencyKey
		return &gateway.Outcome{Output: map[string]any{"transaction_id": txn, "status": "issued"}, Mutations: []string{"refund:" + txn}}, nil
	})
	h, err := temporalrun.New(temporalrun.Config{
		Planner:  contextos.PlannerFunc(plan),
		Registry: reg,
		Keys:     runcontext.NewStaticKeys(map[string]ed25519.PublicKey{kid: key.Public().(ed25519.PublicKey)}),
		Adapters: []gateway.Registration{
			{AdapterID: "adp_orders", Adapter: gateway.AdapterFunc(lookupOrder), Capabilities: map[string]gateway.Capability{"lookup": {}}},
			{AdapterID: "adp_policy", Adapter: gateway.AdapterFunc(evalPolicy), Capabilities: map[string]gateway.Capability{"eval": {}}},
			{AdapterID: "adp_payments", Adapter: refund, Capabilities: map[string]gateway.Capability{"issue_refund": {Scopes: []string{"payments.refund"}}}},
		},
		Decisions: st.decisions, Transcripts: st.transcripts, Packets: st.packets,
		Runtime: contextos.Options{Evidence: evidence, Ontologies: []string{"ont.support@1.0.0"}, ReplaySampleRate: 1,
			Identity: contextos.IdentityOptions{Keys: identityKeys}},
	})
	return h, payments, err
}

// identityKey signs each run's identity claim (the example's identity
// service).
var (
	identitySeed = sha256.Sum256([]byte("contextos example identity key"))
	identityKey  = ed25519.NewKeyFromSeed(identitySeed[:])
	identityKeys = runcontext.NewStaticKeys(map[string]ed25519.PublicKey{"kid_example_identity": identityKey.Public().(ed25519.PublicKey)})
)

// input is the refund request with an identity claim valid for a day
// from now (the run may wait hours for its approval).
func input(now time.Time) (temporalrun.Input, error) {
	req, err := runcontext.DecodeInvokeRequest(invokeJSON)
	if err != nil {
		return temporalrun.Input{}, err
	}
	rc, err := runcontext.DecodeRunContext(runContextJSON)
	if err != nil {
		return temporalrun.Input{}, err
	}
	rc.RunID = "run_temporal_ord_881"
	claim := &runcontext.IdentityClaim{Iss: "https://id.example", Sub: rc.Agent.AgentURN, RunID: rc.RunID, SessionID: rc.SessionID,
		TenantID: rc.TenantID, PrincipalChain: rc.PrincipalChain(), Scopes: []string{"tools:read", "tools:write"},
		Nbf: now.Add(-time.Minute).Unix(), Exp: now.Add(24 * time.Hour).Unix()}
	if err := runcontext.SignClaim(claim, "kid_example_identity", identityKey); err != nil {
		return temporalrun.Input{}, err
	}
	rc.Agent.IdentityClaim = claim
	return temporalrun.Input{Request: req, Run: rc}, nil
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
	refused := slices.ContainsFunc(req.Results, func(r contextos.StepResult) bool { return r.Result != nil && r.Result.Error != nil })
	if refused || !slices.Contains(req.Compiled.ContextLedger.Tools, "adp_payments.issue_refund") {
		return &contextos.Plan{Decision: &contextos.DecisionProposal{DecisionKey: "support.refund.execute", Outcome: "denied",
			Rationale: "The refund was not approved.", Confidence: 1, SubjectIDs: subjects}, Usage: contextos.PlanUsage{Tokens: 300, CostCents: 0.1}}, nil
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

func evalPolicy(ctx context.Context, _ *gateway.Call) (*gateway.Outcome, error) {
	return &gateway.Outcome{Output: map[string]any{"eligible": true, "window_days_left": 24}}, ctx.Err()
}
