package temporalrun_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/compiler"
	"github.com/contextos/contextos/decision"
	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/pack"
	"github.com/contextos/contextos/runcontext"
	"github.com/contextos/contextos/store/sqlite"
	"github.com/contextos/contextos/temporalrun"
)

var (
	//go:embed testdata/pack.json
	packJSON []byte
	//go:embed testdata/evidence.json
	evidenceJSON []byte
	//go:embed testdata/invoke.json
	invokeJSON []byte
	//go:embed testdata/run-context.json
	runContextJSON []byte
)

// The refund fixture's gate and roles.
const (
	financeGate = "GATE_FINANCE_APPROVAL"
	financeRole = "finance_lead"
	tenant      = "tenant_acme_prod"
)

// world is a refund host: its packs, keys and evidence, the rule-based
// planner, the adapters with a payments fake whose effects are files in
// a directory (shared with worker processes), and the host's stores.
type world struct {
	reg       pack.Registry
	keys      pack.KeyResolver
	evidence  compiler.StaticEvidence
	payments  *payments
	decisions decision.Store
	transcr   contextos.TranscriptStore
	packets   contextos.PacketStore
	// refundTimeout bounds a refund attempt (its activity's timeout).
	refundTimeout time.Duration
	// lookupBackoff, when set, makes the order lookup fail retryably
	// and wait this long between attempts.
	lookupBackoff time.Duration
	// lookupError, when set with lookupBackoff, is the failing lookup's
	// message.
	lookupError string
	// lookupSpent, when set, makes the order lookup's first attempt
	// spend it and fail retryably; the next attempts succeed.
	lookupSpent *gateway.Outcome
}

// packWithTTL is the refund pack with the finance gate's TTL set.
func packWithTTL(t testing.TB, ttl time.Duration) []byte {
	t.Helper()
	old := []byte(`"ttl_seconds": 7200`)
	if !bytes.Contains(packJSON, old) {
		t.Fatal("the pack's finance gate TTL is not where the fixture expects it")
	}
	return bytes.Replace(packJSON, old, fmt.Appendf(nil, `"ttl_seconds": %d`, int(ttl.Seconds())), 1)
}

// newWorld is a world whose payments fake keeps its refunds in dir and
// whose host stores are in memory, or in the SQLite database db (a file
// shared with worker processes) when db is set.
func newWorld(t testing.TB, dir string, gateTTL time.Duration) *world {
	return newWorldDB(t, dir, "", gateTTL)
}

func newWorldDB(t testing.TB, dir, db string, gateTTL time.Duration) *world {
	t.Helper()
	ctx := context.Background()
	seed := sha256.Sum256([]byte("temporalrun test pack key"))
	key := ed25519.NewKeyFromSeed(seed[:])
	kid := pack.KeyID(key.Public().(ed25519.PublicKey))
	doc := packJSON
	if gateTTL > 0 {
		doc = packWithTTL(t, gateTTL)
	}
	p, err := pack.DecodeAndValidate(doc, nil)
	if err != nil {
		t.Fatal(err)
	}
	signed, err := pack.Sign(p, kid, key, nil)
	if err != nil {
		t.Fatal(err)
	}
	reg := pack.NewMemoryRegistry(nil)
	entry, err := reg.Put(ctx, signed)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pack.Publish(ctx, reg, entry.Ref, "test",
		pack.Signoff{Reviewer: "arch", Role: pack.RoleArchitecture}, pack.Signoff{Reviewer: "sec", Role: pack.RoleSecurity},
		pack.Signoff{Reviewer: "data", Role: pack.RoleData}, pack.Signoff{Reviewer: "eval", Role: pack.RoleEvaluation}); err != nil {
		t.Fatal(err)
	}
	w := &world{reg: reg, keys: runcontext.NewStaticKeys(map[string]ed25519.PublicKey{kid: key.Public().(ed25519.PublicKey)}),
		payments: &payments{dir: dir}, decisions: decision.NewMemoryStore(), transcr: gateway.NewMemoryTranscript(),
		packets: contextos.NewInMemoryPackets(), refundTimeout: 5 * time.Second}
	if db != "" {
		st, err := sqlite.Open(ctx, db, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close() })
		w.decisions, w.transcr, w.packets = st.Records(), st.Transcripts(), st.Packets()
	}
	if err := json.Unmarshal(evidenceJSON, &w.evidence); err != nil {
		t.Fatal(err)
	}
	return w
}

// options are the runtime options every runtime of the world shares.
func (w *world) options() contextos.Options {
	return contextos.Options{Evidence: w.evidence, Ontologies: []string{"ont.support@1.0.0"}, ReplaySampleRate: 1,
		Identity: contextos.IdentityOptions{Keys: identityKeys}}
}

func (w *world) adapters() []gateway.Registration {
	lookup, lookupCap := gateway.Adapter(gateway.AdapterFunc(lookupOrder)), gateway.Capability{}
	if w.lookupBackoff > 0 {
		msg := "orders is down"
		if w.lookupError != "" {
			msg = w.lookupError
		}
		lookup = gateway.AdapterFunc(func(context.Context, *gateway.Call) (*gateway.Outcome, error) {
			return nil, gateway.NewToolError(gateway.CodeExecutionFailed, true, msg, nil)
		})
		lookupCap.Backoff = func(string, int) time.Duration { return w.lookupBackoff }
	}
	if spent := w.lookupSpent; spent != nil {
		lookup = gateway.AdapterFunc(func(ctx context.Context, c *gateway.Call) (*gateway.Outcome, error) {
			if c.Attempt == 1 {
				return &gateway.Outcome{CostCents: spent.CostCents, Tokens: spent.Tokens}, gateway.NewToolError(gateway.CodeExecutionFailed, true, "orders is busy", nil)
			}
			return lookupOrder(ctx, c)
		})
	}
	return []gateway.Registration{
		{AdapterID: "adp_orders", Adapter: lookup, Capabilities: map[string]gateway.Capability{"lookup": lookupCap}},
		{AdapterID: "adp_policy", Adapter: gateway.AdapterFunc(evalPolicy), Capabilities: map[string]gateway.Capability{"eval": {}}},
		{AdapterID: "adp_payments", Adapter: w.payments, Capabilities: map[string]gateway.Capability{"issue_refund": {Scopes: []string{"payments.refund"}, Timeout: w.refundTimeout}}},
	}
}

// host is the Temporal host of the world.
func (w *world) host(t testing.TB) *temporalrun.Host {
	t.Helper()
	h, err := temporalrun.New(temporalrun.Config{Planner: contextos.PlannerFunc(plan), Registry: w.reg, Keys: w.keys, Adapters: w.adapters(),
		Decisions: w.decisions, Transcripts: w.transcr, Packets: w.packets, Runtime: w.options()})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// runtime is an in-process runtime of the world at the clock now.
func (w *world) runtime(t testing.TB, now func() time.Time) *contextos.Runtime {
	t.Helper()
	o := w.options()
	o.Adapters = w.adapters()
	o.Now = now
	rt, err := contextos.New(contextos.PlannerFunc(plan), w.reg, w.keys, &o)
	if err != nil {
		t.Fatal(err)
	}
	return rt
}

var (
	identitySeed = sha256.Sum256([]byte("temporalrun test identity key"))
	identityKey  = ed25519.NewKeyFromSeed(identitySeed[:])
	identityKeys = runcontext.NewStaticKeys(map[string]ed25519.PublicKey{"kid_test_identity": identityKey.Public().(ed25519.PublicKey)})
)

// input is the refund request id for amount, with an identity claim
// valid from a minute before at for ten days.
func input(t testing.TB, id string, amount int, at time.Time) temporalrun.Input {
	t.Helper()
	req, err := runcontext.DecodeInvokeRequest(invokeJSON)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := runcontext.DecodeRunContext(runContextJSON)
	if err != nil {
		t.Fatal(err)
	}
	req.RequestID = id
	req.Input.Message = fmt.Sprintf("Refund order ord_881 for INR %d", amount)
	req.Input.Context["refund_amount"] = amount
	rc.RunID = "run_" + id
	claim := &runcontext.IdentityClaim{Iss: "https://id.example", Sub: rc.Agent.AgentURN, RunID: rc.RunID, SessionID: rc.SessionID,
		TenantID: rc.TenantID, PrincipalChain: rc.PrincipalChain(), Scopes: []string{"tools:read", "tools:write"},
		Nbf: at.Add(-time.Minute).Unix(), Exp: at.Add(10 * 24 * time.Hour).Unix()}
	if err := runcontext.SignClaim(claim, "kid_test_identity", identityKey); err != nil {
		t.Fatal(err)
	}
	rc.Agent.IdentityClaim = claim
	return temporalrun.Input{Request: req, Run: rc}
}

// plan is the rule-based planner: look the order up and evaluate the
// policy; then refund if the refund tool is surfaced and no refund was
// refused, else deny.
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
	refused := slices.ContainsFunc(req.Results, func(r contextos.StepResult) bool {
		return r.Step.CapabilityID == "adp_payments.issue_refund" && r.Result != nil && r.Result.Error != nil
	})
	if refused || !slices.Contains(req.Compiled.ContextLedger.Tools, "adp_payments.issue_refund") {
		return &contextos.Plan{Decision: &contextos.DecisionProposal{DecisionKey: "support.refund.execute", Outcome: "denied",
			Rationale: "The refund was not approved.", Confidence: 1, SubjectIDs: subjects},
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

// payments is the payments fake: a refund is a file named by its
// idempotency key, created once (O_EXCL); a call with a key already used
// returns that refund. Every call also appends a line to calls.log. With
// crashAfterEffect set, a call that created a refund kills its own
// process before it answers (SIGKILL): the effect happened, the answer
// never left.
type payments struct {
	dir              string
	crashAfterEffect bool
	// afterEffect, when set, is called once the refund is issued,
	// before the call answers.
	afterEffect func()
	mu          sync.Mutex
}

func (p *payments) Call(ctx context.Context, c *gateway.Call) (*gateway.Outcome, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if c.IdempotencyKey == "" {
		return nil, errors.New("payments: a refund needs an idempotency key")
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := appendLine(filepath.Join(p.dir, "calls.log"), fmt.Sprintf("%d %s", os.Getpid(), c.IdempotencyKey)); err != nil {
		return nil, err
	}
	name := filepath.Join(p.dir, "refund-"+strings.NewReplacer("/", "_", ":", "_").Replace(c.IdempotencyKey))
	txn := fmt.Sprintf("txn_%s_%x", c.Envelope.Args["order_id"], sha256.Sum256([]byte(c.IdempotencyKey)))[:24]
	f, err := os.OpenFile(name, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	switch {
	case errors.Is(err, os.ErrExist):
		// The refund was issued before under this key: the same answer.
	case err != nil:
		return nil, err
	default:
		_, werr := f.WriteString(txn)
		if cerr := f.Close(); werr != nil || cerr != nil {
			return nil, errors.Join(werr, cerr)
		}
		if p.crashAfterEffect {
			crash()
		}
		if p.afterEffect != nil {
			p.afterEffect()
		}
	}
	return &gateway.Outcome{Output: map[string]any{"transaction_id": txn, "status": "issued"}, Mutations: []string{"refund:" + txn}}, nil
}

// refunds lists the refunds issued in dir.
func refunds(t testing.TB, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "refund-*"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// calls lists the payments calls logged in dir.
func calls(t testing.TB, dir string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "calls.log"))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
}

func appendLine(name, line string) error {
	f, err := os.OpenFile(name, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	_, werr := f.WriteString(line + "\n")
	return errors.Join(werr, f.Close())
}

// financeApproval approves p as the finance lead of the tenant.
func financeApproval(p *gateway.ApprovalRequest, id string) temporalrun.Approval {
	return temporalrun.Approval{ApprovalID: id, GateID: p.GateID, ActionDigest: p.ActionDigest, Approver: "user_finance_lead_77", ApproverRole: financeRole, TenantID: tenant}
}
