package postgres_test

// The multi-process harness: the parent test re-executes its own binary
// (os.Args[0], -test.run=^TestMultiProcessChild$) with a job in the
// environment; each child opens the one database, builds what its role
// needs (a runtime on the support pack, a gateway, or the bare store),
// prints mpReady, waits for the parent's go line on stdin (so every child
// starts its work together), does the job and prints its outcomes on one
// mpResult line. The payments service the refund tool reaches is the
// parent's: an httptest server speaking Tool Contract v1 on loopback.

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
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/compiler"
	"github.com/contextos/contextos/contextostest"
	"github.com/contextos/contextos/decision"
	"github.com/contextos/contextos/decision/decisiontest"
	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/internal/fixture"
	"github.com/contextos/contextos/pack"
	"github.com/contextos/contextos/runcontext"
	"github.com/contextos/contextos/transport"
)

const (
	// envJob carries a child's job (JSON) to the re-executed binary.
	envJob   = "CONTEXTOS_MP_JOB"
	mpReady  = "MPREADY"
	mpResult = "MPRESULT "
	// tenant is the support fixture's tenant.
	tenant = "tenant_acme_prod"
)

// Child roles.
const (
	roleInvoke  = "invoke"  // Invoke the refund (Goroutines at once)
	roleResume  = "resume"  // Resume the run (Goroutines at once)
	roleWrite   = "write"   // issue the same refund through the gateway (Goroutines at once)
	roleAppend  = "append"  // append decision records (Goroutines at once, PerGoroutine each)
	roleConsume = "consume" // consume one approval id (Goroutines at once)
)

// mpJob is what one child does.
type mpJob struct {
	Role       string             `json:"role"`
	DB         string             `json:"db"`
	Payments   string             `json:"payments,omitempty"`
	RunID      string             `json:"run_id,omitempty"`
	Amount     int                `json:"amount,omitempty"`
	Approvals  []gateway.Approval `json:"approvals,omitempty"`
	Takeover   bool               `json:"takeover,omitempty"`
	Goroutines int                `json:"goroutines"`
	// PerGoroutine is how many records each goroutine appends.
	PerGoroutine int `json:"per_goroutine,omitempty"`
	// Proc numbers the child among its siblings.
	Proc int `json:"proc"`
	// ApprovalID is the id roleConsume consumes.
	ApprovalID string `json:"approval_id,omitempty"`
	// ClaimTTL is the store's idempotency claim TTL (0: the default).
	ClaimTTL time.Duration `json:"claim_ttl,omitempty"`
}

// mpOutcome is what one goroutine of a child got.
type mpOutcome struct {
	// Err classifies the error: "" (none), or one of the err* names.
	Err     string                   `json:"err,omitempty"`
	Status  string                   `json:"status,omitempty"`
	RunID   string                   `json:"run_id,omitempty"`
	Pending *gateway.ApprovalRequest `json:"pending,omitempty"`
	// Txn is the payments transaction id the run's (or call's) refund got.
	Txn string `json:"txn,omitempty"`
	// Key is the idempotency key of the refund call.
	Key string `json:"key,omitempty"`
	// Duplicate marks a gateway result answered from the idempotency store.
	Duplicate bool `json:"duplicate,omitempty"`
}

// Error classes of mpOutcome.Err.
const (
	errNotResumable = "not_resumable"
	errConflict     = "checkpoint_conflict"
	errInProgress   = "run_in_progress"
	errApprovalUsed = "approval_used"
	errDuplicate    = "duplicate_record"
)

// sharedAppended is the Status of the append goroutine whose append of
// the record every process tries to append was stored.
const sharedAppended = "shared_appended"

func classify(err error) string {
	switch {
	case err == nil:
		return ""
	case errors.Is(err, contextos.ErrCheckpointConflict):
		return errConflict
	case errors.Is(err, contextos.ErrNotResumable):
		return errNotResumable
	case errors.Is(err, contextos.ErrRunInProgress):
		return errInProgress
	case errors.Is(err, gateway.ErrApprovalUsed):
		return errApprovalUsed
	case errors.Is(err, decision.ErrDuplicate):
		return errDuplicate
	default:
		return "other: " + err.Error()
	}
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
	st, err := openMPStore(ctx, job)
	if err != nil {
		t.Fatalf("child: open store: %v", err)
	}
	defer st.Close()
	work := childWork(t, ctx, job, st)
	fmt.Println(mpReady)
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		t.Fatalf("child: waiting for go: %v", err)
	}
	out := make([]mpOutcome, job.Goroutines)
	var wg sync.WaitGroup
	for i := range out {
		wg.Go(func() { out[i] = work(i) })
	}
	wg.Wait()
	b, err := json.Marshal(out)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Println(mpResult + string(b))
}

// childWork prepares the job's role and returns what goroutine i does.
func childWork(t *testing.T, ctx context.Context, job mpJob, st mpStore) func(i int) mpOutcome {
	switch job.Role {
	case roleInvoke, roleResume:
		rt := childRuntime(t, job, st)
		req, rc := refundRequest(t, job.RunID, job.Amount)
		return func(int) mpOutcome {
			var res *contextos.Result
			var err error
			if job.Role == roleInvoke {
				res, err = rt.Invoke(ctx, req.Clone(), rc.Clone())
			} else {
				res, err = rt.Resume(ctx, job.RunID, contextos.ResumeInput{Approvals: job.Approvals, Takeover: job.Takeover})
			}
			if err != nil {
				return mpOutcome{Err: classify(err)}
			}
			o := mpOutcome{Status: string(res.Status), RunID: res.RunID, Pending: res.Pending}
			for _, r := range res.ToolResults {
				if r.CapabilityID == "adp_payments.issue_refund" && r.Status.Succeeded() {
					o.Txn, _ = r.Output["transaction_id"].(string)
					o.Key = r.Metadata.IdempotencyKey
				}
			}
			return o
		}
	case roleWrite:
		newRun := childGateway(t, ctx, job, st)
		args := map[string]any{"order_id": "ord_881", "amount_inr": job.Amount, "currency": "INR"}
		return func(int) mpOutcome {
			run, err := newRun()
			if err != nil {
				return mpOutcome{Err: classify(err)}
			}
			res, err := run.Call(ctx, gateway.CallRequest{CapabilityID: "adp_payments.issue_refund", Args: args})
			if err != nil {
				return mpOutcome{Err: classify(err)}
			}
			o := mpOutcome{Status: string(res.Status), Key: res.Metadata.IdempotencyKey, Duplicate: res.Metadata.Duplicate}
			o.Txn, _ = res.Output["transaction_id"].(string)
			return o
		}
	case roleAppend:
		recs := st.Records()
		return func(i int) mpOutcome {
			// Each goroutine appends its own records, and every
			// goroutine 0 the one record all processes try to append.
			// Status says whether the shared one was this goroutine's.
			var o mpOutcome
			if i == 0 {
				switch _, err := recs.Append(ctx, recordOf(job, "rec_shared")); {
				case err == nil:
					o.Status = sharedAppended
				case classify(err) != errDuplicate:
					return mpOutcome{Err: classify(err)}
				}
			}
			for n := range job.PerGoroutine {
				if _, err := recs.Append(ctx, recordOf(job, fmt.Sprintf("rec_p%d_g%d_n%d", job.Proc, i, n))); err != nil {
					return mpOutcome{Err: classify(err)}
				}
			}
			return o
		}
	case roleConsume:
		log := st.Approvals()
		return func(int) mpOutcome { return mpOutcome{Err: classify(log.Consume(ctx, job.ApprovalID))} }
	}
	t.Fatalf("child: unknown role %q", job.Role)
	return nil
}

// recordOf is a well-formed record of the child's run with id id.
func recordOf(job mpJob, id string) *decision.Record {
	r := decisiontest.Sample(id, decision.Decided)
	r.RunID = fmt.Sprintf("run_p%d", job.Proc)
	return r
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

// childRuntime is a runtime on the support pack (signed with the
// harness's fixed key, so every process pins the same pack hash), every
// store the database's, a scripted planner (look up, then refund and
// propose approval) and the payments tool at the parent's service.
func childRuntime(t *testing.T, job mpJob, st mpStore) *contextos.Runtime {
	opts := contextos.Options{Adapters: adapters(t, job.Payments), Evidence: evidence(t), ReplaySampleRate: 1}
	st.Configure(&opts)
	planner := contextostest.NewPlanner(lookupPlan(), refundPlan(job.Amount))
	h := contextostest.New(t, planner, [][]byte{fixture.SupportPack()}, &contextostest.Options{Runtime: opts})
	return h.Runtime
}

// childGateway returns a constructor of gateway runs of the refund request
// (each with its own budget meter) on a gateway whose idempotency store
// and approval log are the database's.
func childGateway(t *testing.T, ctx context.Context, job mpJob, st mpStore) func() (*gateway.Run, error) {
	p, err := pack.Decode(fixture.SupportPack())
	if err != nil {
		t.Fatal(err)
	}
	req, rc := refundRequest(t, job.RunID, job.Amount)
	prepared, err := compiler.Prepare([]compiler.Input{{Ref: pack.MustParseRef("ctxpack.support@1.0.0"), Pack: p}},
		&compiler.Options{Ontologies: []string{"ont.support@1.0.0"}, Evidence: evidence(t)})
	if err != nil {
		t.Fatal(err)
	}
	cc, err := prepared.Compile(ctx, req, rc)
	if err != nil {
		t.Fatal(err)
	}
	gw, err := gateway.New(adapters(t, job.Payments), &gateway.Options{Idempotency: st.Idempotency(), Approvals: st.Approvals(),
		Transcript: gateway.NewMemoryTranscript(), Now: contextostest.FixedTime})
	if err != nil {
		t.Fatal(err)
	}
	return func() (*gateway.Run, error) {
		return gw.NewRun(gateway.RunConfig{Prepared: prepared, Compiled: cc, Request: req, RunContext: rc,
			Meter: runcontext.NewMeter(rc.RunBudget, contextostest.FixedTime())}, nil)
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

// outcomes waits for the child to exit and returns its goroutines'
// outcomes.
func (c *child) outcomes(t *testing.T, ctx context.Context) []mpOutcome {
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
	var out []mpOutcome
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

// runChildren starts one child per job, lets them go together and
// returns every goroutine's outcome, child by child.
func runChildren(t *testing.T, ctx context.Context, jobs ...mpJob) [][]mpOutcome {
	t.Helper()
	children := make([]*child, len(jobs))
	for i, j := range jobs {
		j.Proc = i
		children[i] = startChild(t, fmt.Sprintf("child %d (%s)", i, j.Role), j)
	}
	release(t, ctx, children...)
	out := make([][]mpOutcome, len(children))
	for i, c := range children {
		out[i] = c.outcomes(t, ctx)
	}
	return out
}

// tally counts the outcomes by error class ("" for success).
func tally(all [][]mpOutcome) map[string]int {
	n := map[string]int{}
	for _, outs := range all {
		for _, o := range outs {
			n[o.Err]++
		}
	}
	return n
}
