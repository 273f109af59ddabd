package sqlite_test

// Two runtime processes sharing one SQLite database file: this test
// binary re-executed (-test.run=^TestMultiProcessChild$) with a job in the
// environment. Each child builds a runtime on the support pack with every
// store the file's, prints mpReady, waits for the parent's go line, runs
// the refund (Invoke or Resume) and prints its outcome on one mpResult
// line. The payments service is the parent's (Tool Contract v1 on
// loopback); it counts raw requests and performs one effect per
// idempotency key. store/postgres has the same harness with more roles.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/compiler"
	"github.com/contextos/contextos/contextostest"
	"github.com/contextos/contextos/decision"
	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/internal/fixture"
	"github.com/contextos/contextos/runcontext"
	"github.com/contextos/contextos/store/sqlite"
	"github.com/contextos/contextos/transport"
)

const (
	envJob   = "CONTEXTOS_MP_JOB"
	mpReady  = "MPREADY"
	mpResult = "MPRESULT "
)

// Child roles.
const (
	roleInvoke = "invoke"
	roleResume = "resume"
)

// mpJob is what one child does.
type mpJob struct {
	Role      string             `json:"role"`
	DB        string             `json:"db"`
	Payments  string             `json:"payments"`
	RunID     string             `json:"run_id"`
	Amount    int                `json:"amount"`
	Approvals []gateway.Approval `json:"approvals,omitempty"`
	Takeover  bool               `json:"takeover,omitempty"`
	// ClaimTTL is the store's idempotency claim TTL (0: the default).
	ClaimTTL time.Duration `json:"claim_ttl,omitempty"`
}

// mpOutcome is what the child's Invoke or Resume got.
type mpOutcome struct {
	Err     string                   `json:"err,omitempty"`
	Status  string                   `json:"status,omitempty"`
	Pending *gateway.ApprovalRequest `json:"pending,omitempty"`
	// Txn and Key are the refund's transaction id and idempotency key.
	Txn string `json:"txn,omitempty"`
	Key string `json:"key,omitempty"`
}

// TestMultiProcessChild is the entry point of a re-executed child; run
// directly (no job in the environment) it has nothing to do.
func TestMultiProcessChild(t *testing.T) {
	raw := os.Getenv(envJob)
	if raw == "" {
		t.Skip("helper process of the multi-process tests: runs only when a test re-executes the binary")
	}
	var job mpJob
	if err := json.Unmarshal([]byte(raw), &job); err != nil {
		t.Fatalf("child: job: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	st, err := sqlite.Open(ctx, job.DB, &sqlite.Options{ClaimTTL: job.ClaimTTL})
	if err != nil {
		t.Fatalf("child: open store: %v", err)
	}
	defer st.Close()
	opts := contextos.Options{Adapters: adapters(t, job.Payments), Evidence: evidence(t), ReplaySampleRate: 1}
	st.Configure(&opts)
	h := contextostest.New(t, contextostest.NewPlanner(lookupPlan(), refundPlan(job.Amount)), [][]byte{fixture.SupportPack()}, &contextostest.Options{Runtime: opts})
	req, rc := refundRequest(t, job.RunID, job.Amount)
	fmt.Println(mpReady)
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		t.Fatalf("child: waiting for go: %v", err)
	}
	var res *contextos.Result
	if job.Role == roleInvoke {
		res, err = h.Runtime.Invoke(ctx, req, rc)
	} else {
		res, err = h.Runtime.Resume(ctx, job.RunID, contextos.ResumeInput{Approvals: job.Approvals, Takeover: job.Takeover})
	}
	var o mpOutcome
	if err != nil {
		o.Err = err.Error()
		if errors.Is(err, contextos.ErrNotResumable) {
			o.Err = "not_resumable: " + o.Err
		}
	} else {
		o.Status, o.Pending = string(res.Status), res.Pending
		for _, r := range res.ToolResults {
			if r.CapabilityID == "adp_payments.issue_refund" && r.Status.Succeeded() {
				o.Txn, _ = r.Output["transaction_id"].(string)
				o.Key = r.Metadata.IdempotencyKey
			}
		}
	}
	b, err := json.Marshal(o)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Println(mpResult + string(b))
}

// refundRequest is the support fixture's refund of amount under run id
// runID, identity verified.
func refundRequest(t testing.TB, runID string, amount int) (*runcontext.InvokeRequest, *runcontext.RunContext) {
	t.Helper()
	req, err := runcontext.DecodeInvokeRequest(fixture.Invoke())
	if err != nil {
		t.Fatal(err)
	}
	rc, err := runcontext.DecodeRunContext(fixture.RunContext())
	if err != nil {
		t.Fatal(err)
	}
	req.Input.Context["refund_amount"] = amount
	req.Input.Context["identity_verified"] = true
	if runID != "" {
		rc.RunID = runID
	}
	return req, rc
}

func evidence(t testing.TB) compiler.StaticEvidence {
	t.Helper()
	var ev compiler.StaticEvidence
	if err := json.Unmarshal(fixture.Evidence(), &ev); err != nil {
		t.Fatal(err)
	}
	return ev
}

// adapters are the refund's adapters: orders and policy in process, the
// payments tool over the external transport at the parent's service.
func adapters(t testing.TB, paymentsURL string) []gateway.Registration {
	t.Helper()
	ext, err := transport.NewAdapter(transport.Endpoint{Transport: transport.TransportExternal, URL: paymentsURL, AllowPrivate: true,
		Timeout: time.Minute, Retry: transport.Retry{MaxAttempts: 1}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	refund := ext.Capability()
	refund.Scopes = []string{"payments.refund"}
	lookup := func(ctx context.Context, c *gateway.Call) (*gateway.Outcome, error) {
		return &gateway.Outcome{Output: map[string]any{"order_id": c.Envelope.Args["order_id"], "status": "delivered", "total_inr": 4200}}, ctx.Err()
	}
	eval := func(ctx context.Context, _ *gateway.Call) (*gateway.Outcome, error) {
		return &gateway.Outcome{Output: map[string]any{"eligible": true}}, ctx.Err()
	}
	return []gateway.Registration{
		{AdapterID: "adp_orders", Adapter: gateway.AdapterFunc(lookup), Capabilities: map[string]gateway.Capability{"lookup": {}}},
		{AdapterID: "adp_policy", Adapter: gateway.AdapterFunc(eval), Capabilities: map[string]gateway.Capability{"eval": {}}},
		{AdapterID: "adp_payments", Adapter: ext, Capabilities: map[string]gateway.Capability{"issue_refund": refund}},
	}
}

// lookupPlan reads the order and evaluates the refund policy.
func lookupPlan() *contextos.Plan {
	return &contextos.Plan{Steps: []contextos.Step{
		{CapabilityID: "adp_orders.lookup", Args: map[string]any{"order_id": "ord_881"}},
		{CapabilityID: "adp_policy.eval", Args: map[string]any{"order_id": "ord_881"}},
	}, Usage: contextos.PlanUsage{Tokens: 900, CostCents: 0.4}}
}

// refundPlan issues the refund and proposes the approved decision.
func refundPlan(amount int) *contextos.Plan {
	return &contextos.Plan{
		Steps: []contextos.Step{{CapabilityID: "adp_payments.issue_refund", Args: map[string]any{"order_id": "ord_881", "amount_inr": amount, "currency": "INR"}}},
		Decision: &contextos.DecisionProposal{DecisionKey: "support.refund.execute", Outcome: "approved",
			Outputs:    map[string]any{"refund_amount_inr": amount, "currency": "INR"},
			Rationale:  "Order delivered, within the refund window, identity verified.",
			Confidence: 0.95, SubjectIDs: []string{"customer:cus_77", "order:ord_881"},
			EvidenceRefs: []string{"kg:order:ord_881#snapshot_kg_2026_05_03_T0930"}},
		Usage: contextos.PlanUsage{Tokens: 700, CostCents: 0.3},
	}
}

// payments is the parent's payments service. Like a real payment API it
// performs the effect once per idempotency key and answers a repeated key
// with the first answer. It counts raw requests and effects per key.
type payments struct {
	mu      sync.Mutex
	keys    []string // the idempotency key of each raw request, in order
	effects map[string]int
	answers map[string]*transport.Response
	// onEffect, when set, runs after an effect is performed and before
	// it is answered.
	onEffect func(key string)
	srv      *httptest.Server
}

func newPayments(t *testing.T) *payments {
	p := &payments{effects: map[string]int{}, answers: map[string]*transport.Response{}}
	p.srv = httptest.NewServer(transport.NewHandler(transport.ExecutorFunc(p.execute)))
	t.Cleanup(p.srv.Close)
	return p
}

func (p *payments) execute(_ context.Context, req *transport.Request) *transport.Response {
	p.mu.Lock()
	key := req.IdempotencyKey
	p.keys = append(p.keys, key)
	if key == "" {
		p.mu.Unlock()
		return &transport.Response{Status: transport.StatusError, Error: &transport.Failure{Code: gateway.CodeInvalidInput, Message: "a refund needs an idempotency key"}}
	}
	if ans, ok := p.answers[key]; ok {
		p.mu.Unlock()
		return ans
	}
	p.effects[key]++
	ans := &transport.Response{Status: transport.StatusOK, Output: map[string]any{"transaction_id": fmt.Sprintf("txn_%d", len(p.answers)+1), "status": "issued"}}
	p.answers[key] = ans
	hook := p.onEffect
	p.mu.Unlock()
	if hook != nil {
		hook(key)
	}
	return ans
}

// counts returns the raw request keys, in order, and the effects per key.
func (p *payments) counts() ([]string, map[string]int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	effects := map[string]int{}
	for k, n := range p.effects {
		effects[k] = n
	}
	return slices.Clone(p.keys), effects
}

// child is a running child process.
type child struct {
	name   string
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	ready  chan struct{}
	done   chan struct{}
	mu     sync.Mutex
	out    bytes.Buffer // stdout and stderr, for failure messages
	result string       // the mpResult line's JSON
	err    error        // cmd.Wait's
}

// startChild starts the test binary as a child doing job.
func startChild(t *testing.T, name string, job mpJob) *child {
	t.Helper()
	b, err := json.Marshal(job)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestMultiProcessChild$", "-test.count=1", "-test.timeout=3m")
	cmd.Env = append(os.Environ(), envJob+"="+string(b))
	c := &child{name: name, cmd: cmd, ready: make(chan struct{}), done: make(chan struct{})}
	if c.stdin, err = cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = &lockedWriter{c: c}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
		readyOnce := sync.OnceFunc(func() { close(c.ready) })
		for sc.Scan() {
			line := sc.Text()
			c.mu.Lock()
			switch {
			case line == mpReady:
				readyOnce()
			case strings.HasPrefix(line, mpResult):
				c.result = strings.TrimPrefix(line, mpResult)
			default:
				c.out.WriteString(line + "\n")
			}
			c.mu.Unlock()
		}
		err := cmd.Wait()
		c.mu.Lock()
		c.err = err
		c.mu.Unlock()
		close(c.done)
	}()
	t.Cleanup(func() {
		select {
		case <-c.done:
		default:
			_ = cmd.Process.Kill()
			<-c.done
		}
	})
	return c
}

type lockedWriter struct{ c *child }

func (w *lockedWriter) Write(b []byte) (int, error) {
	w.c.mu.Lock()
	defer w.c.mu.Unlock()
	return w.c.out.Write(b)
}

// output is what the child printed besides its protocol lines.
func (c *child) output() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.out.String()
}

// release waits until every child is ready, then lets them all go.
func release(t *testing.T, ctx context.Context, children ...*child) {
	t.Helper()
	for _, c := range children {
		select {
		case <-c.ready:
		case <-c.done:
			t.Fatalf("%s exited before it was ready: %v\n%s", c.name, c.err, c.output())
		case <-ctx.Done():
			t.Fatalf("%s not ready: %v\n%s", c.name, ctx.Err(), c.output())
		}
	}
	for _, c := range children {
		if _, err := io.WriteString(c.stdin, "go\n"); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
	}
}

// outcome waits for the child to exit and returns its outcome.
func (c *child) outcome(t *testing.T, ctx context.Context) mpOutcome {
	t.Helper()
	select {
	case <-c.done:
	case <-ctx.Done():
		t.Fatalf("%s did not finish: %v\n%s", c.name, ctx.Err(), c.output())
	}
	c.mu.Lock()
	res, err := c.result, c.err
	c.mu.Unlock()
	if err != nil || res == "" {
		t.Fatalf("%s failed (%v):\n%s", c.name, err, c.output())
	}
	var out mpOutcome
	if err := json.Unmarshal([]byte(res), &out); err != nil {
		t.Fatalf("%s: result: %v", c.name, err)
	}
	return out
}

// kill SIGKILLs the child and waits until it is gone.
func (c *child) kill() {
	_ = c.cmd.Process.Kill()
	<-c.done
}

// runChild runs one child to its end and returns its outcome.
func runChild(t *testing.T, ctx context.Context, name string, job mpJob) mpOutcome {
	t.Helper()
	c := startChild(t, name, job)
	release(t, ctx, c)
	return c.outcome(t, ctx)
}

// financeLead approves the refund gate.
var financeLead = contextostest.Approver{UserID: "user_finance_lead_77", Role: "finance_lead"}

// mpContext bounds a multi-process test.
func mpContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// openParent opens the test's database in the parent, to check what the
// children left in it.
func openParent(t *testing.T, ctx context.Context, path string) *sqlite.Store {
	t.Helper()
	st, err := sqlite.Open(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// assertRecords checks the run's stored records have statuses want, in
// order, and the whole chain verifies.
func assertRecords(t *testing.T, ctx context.Context, st *sqlite.Store, runID string, want ...decision.Status) {
	t.Helper()
	recs, err := st.Records().List(ctx, decision.Filter{RunID: runID})
	if err != nil {
		t.Fatal(err)
	}
	var got []decision.Status
	for _, r := range recs {
		got = append(got, r.Status)
	}
	if !slices.Equal(got, want) {
		t.Errorf("records of %s = %v, want %v", runID, got, want)
	}
	if err := st.Records().Verify(ctx); err != nil {
		t.Errorf("Verify = %v", err)
	}
}

// assertOneEffect checks the payments service saw requests raw requests,
// all under one idempotency key, and performed its effect once; it
// returns the key.
func assertOneEffect(t *testing.T, p *payments, requests int) string {
	t.Helper()
	keys, effects := p.counts()
	if len(keys) != requests {
		t.Errorf("payments got %d raw requests, want %d", len(keys), requests)
	}
	if len(keys) == 0 {
		t.Fatal("payments was never called")
	}
	for _, k := range keys {
		if k != keys[0] {
			t.Errorf("payments requests carry keys %q, want one key", keys)
			break
		}
	}
	if len(effects) != 1 || effects[keys[0]] != 1 {
		t.Errorf("payments effects = %v, want one effect under %s", effects, keys[0])
	}
	return keys[0]
}

// pause invokes the refund of 4200 in a child process: it pauses on the
// finance gate. It returns what the run awaits.
func pause(t *testing.T, ctx context.Context, url string, p *payments, runID string) *gateway.ApprovalRequest {
	t.Helper()
	out := runChild(t, ctx, "process A", mpJob{Role: roleInvoke, DB: url, Payments: p.srv.URL, RunID: runID, Amount: 4200})
	if out.Err != "" || out.Status != string(decision.Deferred) || out.Pending == nil || out.Pending.GateID != "GATE_FINANCE_APPROVAL" {
		t.Fatalf("invoke = %+v, want DEFERRED awaiting GATE_FINANCE_APPROVAL", out)
	}
	if keys, _ := p.counts(); len(keys) != 0 {
		t.Fatalf("the paused run called payments %d times before its approval", len(keys))
	}
	return out.Pending
}

// TestMPPausedInOneProcessResumedInAnother: a run paused in process A and
// resumed in process B, sharing one database file, calls payments exactly
// once, under the key the paused call was given.
func TestMPPausedInOneProcessResumedInAnother(t *testing.T) {
	db := filepath.Join(t.TempDir(), "contextos.db")
	ctx := mpContext(t)
	p := newPayments(t)
	pending := pause(t, ctx, db, p, "run_mp_a")
	approval := contextostest.Approval(pending, financeLead, contextostest.FixedTime())
	out := runChild(t, ctx, "process B", mpJob{Role: roleResume, DB: db, Payments: p.srv.URL, RunID: "run_mp_a", Amount: 4200,
		Approvals: []gateway.Approval{approval}})
	if out.Err != "" || out.Status != string(decision.Decided) || out.Txn != "txn_1" {
		t.Fatalf("resume in the second process = %+v, want DECIDED with txn_1", out)
	}
	if key := assertOneEffect(t, p, 1); key != pending.IdempotencyKey {
		t.Errorf("payments key = %s, want the paused call's %s", key, pending.IdempotencyKey)
	}
	assertRecords(t, ctx, openParent(t, ctx, db), "run_mp_a", decision.Deferred, decision.Decided, decision.Closed)
}

// TestMPCrashBetweenEffectAndRecord: process A is SIGKILLed after the
// payments service performed the refund and before it answered; process
// B, on the same database file, takes the run over once A's idempotency
// claim lapsed: its call carries the same key, the service answers it from
// its first answer (one effect), and the run ends DECIDED with its record
// stored and the chain verifying.
func TestMPCrashBetweenEffectAndRecord(t *testing.T) {
	db := filepath.Join(t.TempDir(), "contextos.db")
	ctx := mpContext(t)
	p := newPayments(t)
	const runID, ttl = "run_mp_f", 2 * time.Second
	a := startChild(t, "process A", mpJob{Role: roleInvoke, DB: db, Payments: p.srv.URL, RunID: runID, Amount: 1200, ClaimTTL: ttl})
	var killed sync.Once
	p.mu.Lock()
	p.onEffect = func(string) { killed.Do(a.kill) }
	p.mu.Unlock()
	release(t, ctx, a)
	select {
	case <-a.done:
	case <-ctx.Done():
		t.Fatalf("process A did not stop: %v", ctx.Err())
	}
	a.mu.Lock()
	result, exit := a.result, a.err
	a.mu.Unlock()
	if result != "" || exit == nil {
		t.Fatalf("process A was not killed before it finished (exit %v, result %s):\n%s", exit, result, a.output())
	}
	first := assertOneEffect(t, p, 1)
	st := openParent(t, ctx, db)
	assertRecords(t, ctx, st, runID) // A died before storing the record

	out := runChild(t, ctx, "process B", mpJob{Role: roleResume, DB: db, Payments: p.srv.URL, RunID: runID, Amount: 1200, Takeover: true, ClaimTTL: ttl})
	if out.Err != "" || out.Status != string(decision.Decided) || out.Txn != "txn_1" || out.Key != first {
		t.Fatalf("takeover in process B = %+v, want DECIDED with the first answer txn_1 under key %s", out, first)
	}
	assertOneEffect(t, p, 2)
	assertRecords(t, ctx, st, runID, decision.Decided)
}
