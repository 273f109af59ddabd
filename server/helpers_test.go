package server_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/contextostest"
	"github.com/contextos/contextos/decision"
	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/internal/fixture"
	"github.com/contextos/contextos/internal/storekit"
	"github.com/contextos/contextos/server"
)

// cardNumber is a Luhn-valid test card number the refund's arguments
// carry: no answer may show it.
const cardNumber = "4111111111111111"

// tenant is the support fixture's tenant.
const tenant = "tenant_acme_prod"

// secret is the tests' HS256 secret.
var secret = []byte("0123456789abcdef0123456789abcdef-test-secret")

// clock is a settable clock shared by a runtime and its handler.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: contextostest.FixedTime()} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// who is a principal the tests sign tokens for.
type who struct {
	sub, tenant string
	roles       []string
}

var (
	agent    = who{"agent_17", tenant, []string{"support_agent"}}
	lead     = who{"user_finance_lead_77", tenant, []string{"finance_lead"}}
	lead2    = who{"user_finance_lead_78", tenant, []string{"finance_lead"}}
	outsider = who{"lead_b", "tenant_other", []string{"finance_lead"}}
	// requester is the run's user (the fixture's usr_771), holding the
	// gate's role.
	requester = who{"USR_771", tenant, []string{"finance_lead"}}
	// starter starts runs and holds the gate's role too.
	starter = who{"agent_18", tenant, []string{"support_agent", "finance_lead"}}
)

// token signs w's claims with key, valid for an hour from now.
func token(t testing.TB, key []byte, w who, now time.Time) string {
	t.Helper()
	return signed(t, key, map[string]any{"sub": w.sub, "tenant_id": w.tenant, "roles": w.roles, "exp": now.Add(time.Hour).Unix(), "iat": now.Unix()})
}

func signed(t testing.TB, key []byte, claims map[string]any) string {
	t.Helper()
	sig, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.HS256, Key: key}, nil)
	if err != nil {
		t.Fatal(err)
	}
	s, err := jwt.Signed(sig).Claims(claims).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// env is a handler over a runtime with the support pack, an in-process
// payments service, and a settable clock.
type env struct {
	t        testing.TB
	clock    *clock
	harness  *contextostest.Harness
	payments *storekit.Payments
	handler  *server.Handler
	srv      *httptest.Server
	// records is the handler's record store.
	records decision.Store
	// gate, when set, holds every run's second planner turn until it is
	// closed.
	gate chan struct{}
}

type envOptions struct {
	handler  server.Options
	noAuth   bool
	gateTurn bool
	// stores, when set, are a replica's: the runtime and the handler use
	// them.
	shared *shared
	// runtime, when set, changes the runtime's options.
	runtime func(*contextos.Options)
	// pack, when set, replaces the support pack.
	pack []byte
	// durable, when set, keeps every store of the runtime and the
	// handler (a SQLite or PostgreSQL store); peer, when set, is the env
	// whose payments service and clock this one shares.
	durable durable
	peer    *env
	// state, when set, wraps the store the handler keeps its state in
	// (the runtime keeps using the unwrapped one).
	state func(gateway.IdempotencyStore) gateway.IdempotencyStore
	// checkpoints, when set, wraps the checkpoint store the handler
	// reads (the runtime keeps using the unwrapped one).
	checkpoints func(contextos.CheckpointLister) contextos.CheckpointLister
	// note, when set, is the refund's note argument.
	note string
	// planner, when set, replaces the planner.
	planner contextos.Planner
	// replica, when set, changes the runtime's options after the shared
	// stores are set (the handler keeps reading the shared ones).
	replica func(*contextos.Options)
}

// durable is a SQL store holding every store a runtime and its handler
// use (store/sqlite's and store/postgres's Store).
type durable interface {
	Configure(*contextos.Options)
	Checkpoints() contextos.ListingCheckpointStore
	Records() decision.Store
	Transcripts() contextos.TranscriptStore
	Idempotency() gateway.IdempotencyStore
}

// newEnvWith is newEnv with the runtime's options changed by f.
func newEnvWith(t *testing.T, f func(*contextos.Options)) *env {
	return newEnv(t, &envOptions{runtime: f})
}

// shared are the stores replicas share.
type shared struct {
	h        *contextostest.Harness
	state    gateway.IdempotencyStore
	payments *storekit.Payments
	clock    *clock
}

// planner looks the order up, then refunds the request's amount with
// note (a card number when empty) among the arguments.
func planner(gate <-chan struct{}, note string) contextos.Planner {
	if note == "" {
		note = "refund to card " + cardNumber
	}
	return contextos.PlannerFunc(func(ctx context.Context, r *contextos.PlanRequest) (*contextos.Plan, error) {
		if r.Turn == 0 {
			return storekit.LookupPlan(), nil
		}
		if r.Turn >= 2 {
			// The refund was refused (an approver denied it): escalate.
			return &contextos.Plan{Decision: &contextos.DecisionProposal{DecisionKey: "support.refund.execute", Outcome: "escalated",
				Rationale: "The refund was not approved.", Confidence: 0.9}}, nil
		}
		if gate != nil {
			select {
			case <-gate:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		amount := 0
		switch a := r.Request.Input.Context["refund_amount"].(type) {
		case float64:
			amount = int(a)
		case int:
			amount = a
		}
		p := storekit.RefundPlan(amount)
		p.Steps[0].Args["note"] = note
		return p, nil
	})
}

func newEnv(t *testing.T, o *envOptions) *env { return newEnvTB(t, o) }

func newEnvTB(t testing.TB, o *envOptions) *env {
	t.Helper()
	if o == nil {
		o = &envOptions{}
	}
	e := &env{t: t}
	if o.gateTurn {
		e.gate = make(chan struct{})
	}
	ropts := contextos.Options{ReplaySampleRate: 1}
	if o.runtime != nil {
		o.runtime(&ropts)
	}
	var state gateway.IdempotencyStore
	if d := o.durable; d != nil {
		if o.peer != nil {
			e.clock, e.payments = o.peer.clock, o.peer.payments
		} else {
			e.clock, e.payments = newClock(), storekit.NewPayments(t)
		}
		d.Configure(&ropts)
		state = ropts.Gateway.Idempotency
	} else if s := o.shared; s != nil {
		e.clock, e.payments, state = s.clock, s.payments, s.state
		ropts.Checkpoints, ropts.Decisions, ropts.Transcripts, ropts.Replays = s.h.Checkpoints, s.h.Decisions, s.h.Transcript, s.h.Replays
		ropts.Gateway.Idempotency, ropts.Gateway.Approvals = s.state, sharedApprovals
		if o.replica != nil {
			o.replica(&ropts)
		}
	} else {
		e.clock = newClock()
		e.payments = storekit.NewPayments(t)
		ropts.Gateway.Idempotency = gateway.NewMemoryIdempotency()
		ropts.Gateway.Approvals = gateway.NewMemoryApprovalLog()
		state = ropts.Gateway.Idempotency
	}
	ropts.Adapters = storekit.Adapters(t, e.payments.URL())
	if ropts.Evidence == nil { // unless o.runtime set one
		ropts.Evidence = storekit.Evidence(t)
	}
	ropts.Now = e.clock.Now
	pk := fixture.SupportPack()
	if o.pack != nil {
		pk = o.pack
	}
	pl := planner(e.gate, o.note)
	if o.planner != nil {
		pl = o.planner
	}
	e.harness = contextostest.New(t, pl, [][]byte{pk}, &contextostest.Options{Runtime: ropts})
	if o.shared != nil {
		e.harness.Checkpoints, e.harness.Decisions, e.harness.Transcript, e.harness.Replays = o.shared.h.Checkpoints, o.shared.h.Decisions, o.shared.h.Transcript, o.shared.h.Replays
	}
	ho := o.handler
	if ho.Authenticator == nil && !o.noAuth && !ho.InsecureDev {
		a, err := server.NewHS256Authenticator(secret, &server.JWTOptions{Now: e.clock.Now})
		if err != nil {
			t.Fatal(err)
		}
		ho.Authenticator = a
	}
	ho.Now = e.clock.Now
	if ho.SweepInterval == 0 {
		ho.SweepInterval = -1
	}
	stores := server.Stores{Checkpoints: e.harness.Checkpoints, Records: e.harness.Decisions, Transcripts: e.harness.Transcript, State: state}
	if d := o.durable; d != nil {
		stores = server.Stores{Checkpoints: d.Checkpoints(), Records: d.Records(), Transcripts: d.Transcripts(), State: state}
	}
	if o.state != nil {
		stores.State = o.state(state)
	}
	if o.checkpoints != nil {
		stores.Checkpoints = o.checkpoints(stores.Checkpoints)
	}
	e.records = stores.Records
	h, err := server.New(e.harness.Runtime, stores, &ho)
	if err != nil {
		t.Fatal(err)
	}
	e.handler = h
	e.srv = httptest.NewServer(h)
	t.Cleanup(func() {
		if e.gate != nil {
			select {
			case <-e.gate:
			default:
				close(e.gate)
			}
		}
		e.srv.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := h.Close(ctx); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return e
}

// selfApprovalPack is the support pack whose finance gate allows
// self-approval.
func selfApprovalPack(t testing.TB) []byte {
	t.Helper()
	var p map[string]any
	if err := json.Unmarshal(fixture.SupportPack(), &p); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, g := range p["policy_layer"].(map[string]any)["approval_gates"].([]any) {
		if g := g.(map[string]any); g["gate_id"] == "GATE_FINANCE_APPROVAL" {
			g["allow_self_approval"] = true
			n++
		}
	}
	if n != 1 {
		t.Fatalf("the support pack has %d finance gates", n)
	}
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// sharedApprovals is the approval log replicas share in a test.
var sharedApprovals = gateway.NewMemoryApprovalLog()

// replicaOf returns the stores e shares with a replica.
func (e *env) replicaOf(state gateway.IdempotencyStore) *shared {
	return &shared{h: e.harness, state: state, payments: e.payments, clock: e.clock}
}

func (e *env) token(w who) string { return token(e.t, secret, w, e.clock.Now()) }

// refundBody is POST /v1/runs's body for the fixture's refund of amount
// under request id requestID.
func refundBody(t testing.TB, requestID string, amount int) []byte {
	t.Helper()
	var req, rc map[string]any
	if err := json.Unmarshal(fixture.Invoke(), &req); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(fixture.RunContext(), &rc); err != nil {
		t.Fatal(err)
	}
	req["request_id"] = requestID
	ctx := req["input"].(map[string]any)["context"].(map[string]any)
	ctx["refund_amount"] = amount
	ctx["identity_verified"] = true
	delete(rc, "run_id")
	b, err := json.Marshal(map[string]any{"request": req, "run_context": rc})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// response is an answer's status, headers and body.
type response struct {
	status int
	header http.Header
	body   []byte
}

func (r response) json(t testing.TB) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("answer %d is not a JSON object: %v\n%s", r.status, err, r.body)
	}
	return m
}

// problem checks r is a problem+json answer with status and code, and
// returns it.
func (r response) problem(t testing.TB, status int, code string) map[string]any {
	t.Helper()
	if r.status != status {
		t.Fatalf("status %d, want %d: %s", r.status, status, r.body)
	}
	if ct := r.header.Get("Content-Type"); ct != "application/problem+json" {
		t.Fatalf("content type %q, want application/problem+json: %s", ct, r.body)
	}
	m := r.json(t)
	if m["code"] != code || m["type"] != "urn:contextos:problem:"+code || m["status"] != float64(status) {
		t.Fatalf("problem %v, want code %s", m, code)
	}
	return m
}

// do sends a request with tok as its bearer token (none when empty).
func (e *env) do(method, path, tok string, body []byte, hdr ...string) response {
	e.t.Helper()
	return doTo(e.t, e.srv.URL, method, path, tok, body, hdr...)
}

func doTo(t testing.TB, base, method, path, tok string, body []byte, hdr ...string) response {
	t.Helper()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, base+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return response{status: resp.StatusCode, header: resp.Header, body: b}
}

// startPaused starts the 4200 refund as agent and returns its run id; it
// is paused at the finance gate.
func (e *env) startPaused(requestID string) string {
	e.t.Helper()
	r := e.do("POST", "/v1/runs", e.token(agent), refundBody(e.t, requestID, 4200))
	if r.status != http.StatusOK {
		e.t.Fatalf("POST /v1/runs: %d %s", r.status, r.body)
	}
	m := r.json(e.t)
	if m["state"] != server.StatePaused || m["status"] != "DEFERRED" {
		e.t.Fatalf("run is %v/%v, want paused DEFERRED: %s", m["state"], m["status"], r.body)
	}
	return m["run_id"].(string)
}

// decide posts a decision on the finance gate as w, naming the action
// digest of the run's last pause on it (the one it awaits, if any), as a
// client that listed it does.
func (e *env) decide(runID string, w who, decision, reason string) response {
	e.t.Helper()
	b, _ := json.Marshal(map[string]string{"decision": decision, "reason": reason, "action_digest": e.lastPause(runID)})
	return e.do("POST", "/v1/runs/"+runID+"/approvals/GATE_FINANCE_APPROVAL", e.token(w), b)
}

// lastPause is the action digest of the run's last pause on the finance
// gate.
func (e *env) lastPause(runID string) string {
	e.t.Helper()
	recs, err := e.records.List(context.Background(), decision.Filter{RunID: runID})
	if err != nil {
		e.t.Fatal(err)
	}
	for i := len(recs) - 1; i >= 0; i-- {
		if a := recs[i].Awaiting; recs[i].Status == decision.Deferred && a != nil && a.GateID == "GATE_FINANCE_APPROVAL" {
			return a.ActionDigest
		}
	}
	e.t.Fatalf("run %s never paused on the finance gate", runID)
	return ""
}

// waitEnded polls the run as agent until it is ended and returns it.
func (e *env) waitEnded(runID string) map[string]any {
	e.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		r := e.do("GET", "/v1/runs/"+runID, e.token(agent), nil)
		if r.status != http.StatusOK {
			e.t.Fatalf("GET run: %d %s", r.status, r.body)
		}
		m := r.json(e.t)
		if m["state"] == server.StateEnded {
			return m
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("run %s did not end: %s", runID, r.body)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// sseEvent is one server-sent event.
type sseEvent struct {
	id, event string
	data      json.RawMessage
}

// readSSE reads a stream's events until it ends.
func readSSE(t testing.TB, body io.Reader) []sseEvent {
	t.Helper()
	var out []sseEvent
	var cur sseEvent
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 1<<20), 1<<22)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if cur.event != "" {
				out = append(out, cur)
			}
			cur = sseEvent{}
		case strings.HasPrefix(line, "id: "):
			cur.id = strings.TrimPrefix(line, "id: ")
		case strings.HasPrefix(line, "event: "):
			cur.event = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			cur.data = json.RawMessage(strings.TrimPrefix(line, "data: "))
		}
	}
	return out
}

func kinds(evs []sseEvent) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.event
	}
	return out
}
