package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/internal/pgtest"
	"github.com/contextos/contextos/internal/storekit"
	"github.com/contextos/contextos/server"
	"github.com/contextos/contextos/store/postgres"
	"github.com/contextos/contextos/store/sqlite"
)

// apiSecret is a Stripe-shaped secret key the refund's note carries in
// the events tests, beside the card number.
const apiSecret = "sk_live_4eC39HqLyjWDarjtT1zdp7dc"

// secretNote is the refund's note in the events tests.
const secretNote = "refund to card " + cardNumber + " with key " + apiSecret

// stateSpy wraps the store a handler keeps its state in: it keeps the
// run events entries the handler writes and, while fail is set, refuses
// them (as a store that is down would).
type stateSpy struct {
	gateway.IdempotencyStore
	fail atomic.Bool

	mu     sync.Mutex
	events []string
}

func spyOn(spy *stateSpy) func(gateway.IdempotencyStore) gateway.IdempotencyStore {
	return func(s gateway.IdempotencyStore) gateway.IdempotencyStore {
		spy.IdempotencyStore = s
		return spy
	}
}

func (s *stateSpy) Complete(ctx context.Context, key string, env *gateway.ToolResultEnvelope) error {
	if v, _ := env.Output["value"].(string); strings.HasPrefix(v, `{"record_id":`) {
		if s.fail.Load() {
			return errors.New("test: the store refuses the entry")
		}
		s.mu.Lock()
		s.events = append(s.events, v)
		s.mu.Unlock()
	}
	return s.IdempotencyStore.Complete(ctx, key, env)
}

func (s *stateSpy) written() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.events)
}

// logBuffer is a log the handler writes to, safe for concurrent use.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// stream reads the run's event stream through e as agent, from the start
// or after the event lastID.
func (e *env) stream(runID string, lastID ...string) []byte {
	e.t.Helper()
	var hdr []string
	if len(lastID) > 0 {
		hdr = []string{"Last-Event-ID", lastID[0]}
	}
	r := e.do("GET", "/v1/runs/"+runID+"/events", e.token(agent), nil, hdr...)
	if r.status != http.StatusOK {
		e.t.Fatalf("GET events through %s: %d %s", e.srv.URL, r.status, r.body)
	}
	return r.body
}

// noSecret fails t when b shows the note's card number or key.
func noSecret(t *testing.T, what string, b []byte) {
	t.Helper()
	for _, s := range []string{cardNumber, apiSecret, "4eC39HqLyjWDarjtT1zdp7dc"} {
		if bytes.Contains(b, []byte(s)) {
			t.Errorf("%s shows %s", what, s)
		}
	}
}

// checkIDs fails t unless evs are the events of a stream from the start:
// ids 0, 1, … and the result event, without one, last.
func checkIDs(t *testing.T, what string, evs []sseEvent) {
	t.Helper()
	if len(evs) == 0 || evs[len(evs)-1].event != "result" || evs[len(evs)-1].id != "" {
		t.Fatalf("%s: no result event last: %v", what, kinds(evs))
	}
	for i, ev := range evs[:len(evs)-1] {
		if ev.id != strconv.Itoa(i) {
			t.Fatalf("%s: event %d (%s) has id %q", what, i, ev.event, ev.id)
		}
	}
}

// eventsAgree pauses a run through a, approves and finishes it through a,
// and checks that b, which ran none of it, and restarted, a handler new
// over the same stores, stream the run's events byte for byte as a does,
// ids included, plans and verdicts included, with no secret; and that
// spy, a's state store, got one entry per segment.
func eventsAgree(t *testing.T, a, b *env, spy *stateSpy, restarted func() *env) {
	t.Helper()
	runID := a.startPaused("req_events_agree")
	pausedA, pausedB := a.stream(runID), b.stream(runID)
	if !bytes.Equal(pausedA, pausedB) {
		t.Fatalf("the paused run's events differ:\nthrough a:\n%s\nthrough b:\n%s", pausedA, pausedB)
	}
	if r := a.decide(runID, lead, server.DecisionApprove, "within policy"); r.status != http.StatusAccepted {
		t.Fatalf("approve through a: %d %s", r.status, r.body)
	}
	if m := a.waitEnded(runID); m["status"] != "DECIDED" {
		t.Fatalf("the run ended %v", m["status"])
	}
	fullA, fullB := a.stream(runID), b.stream(runID)
	if !bytes.Equal(fullA, fullB) {
		t.Fatalf("the run's events differ:\nthrough a:\n%s\nthrough b:\n%s", fullA, fullB)
	}
	evs := readSSE(t, bytes.NewReader(fullA))
	checkIDs(t, "a's stream", evs)
	ks := strings.Join(kinds(evs), ",")
	for _, k := range []string{"compiled", "plan", "verdict", "tool_call", "tool_result", "pause", "decision"} {
		if !strings.Contains(ks, k) {
			t.Errorf("the run's events hold no %s event: %s", k, ks)
		}
	}
	// The paused run's events are the first of the ended run's, with the
	// same ids: a stream cut at the pause resumes on any replica.
	paused := readSSE(t, bytes.NewReader(pausedA))
	checkIDs(t, "a's stream of the paused run", paused)
	n := len(paused) - 1
	for i := range n {
		if paused[i].id != evs[i].id || !bytes.Equal(paused[i].data, evs[i].data) {
			t.Fatalf("event %d of the paused run is not the ended run's event %d", i, i)
		}
	}
	rest := readSSE(t, bytes.NewReader(b.stream(runID, strconv.Itoa(n-1))))
	if len(rest) != len(evs)-n || rest[0].id != strconv.Itoa(n) {
		t.Fatalf("b after Last-Event-ID %d: %d events from %q, want %d from %d", n-1, len(rest), rest[0].id, len(evs)-n, n)
	}
	for i, ev := range rest {
		if ev.id != evs[n+i].id || ev.event != evs[n+i].event || !bytes.Equal(ev.data, evs[n+i].data) {
			t.Fatalf("b after Last-Event-ID %d: event %d is not a's", n-1, i)
		}
	}
	// The run's view carries the same events.
	viewA := a.do("GET", "/v1/runs/"+runID, a.token(agent), nil)
	viewB := b.do("GET", "/v1/runs/"+runID, b.token(agent), nil)
	if viewA.status != http.StatusOK || !bytes.Equal(viewA.body, viewB.body) {
		t.Fatalf("the run's views differ:\nthrough a: %d %s\nthrough b: %d %s", viewA.status, viewA.body, viewB.status, viewB.body)
	}
	// A handler started anew over the same stores streams the same.
	c := restarted()
	if fullC := c.stream(runID); !bytes.Equal(fullA, fullC) {
		t.Fatalf("the restarted handler's events differ:\nthrough a:\n%s\nrestarted:\n%s", fullA, fullC)
	}
	for what, body := range map[string][]byte{"the events": fullA, "the paused events": pausedB, "the view": viewB.body} {
		noSecret(t, what, body)
	}
	if !bytes.Contains(fullA, []byte("[REDACTED")) {
		t.Errorf("the events redact nothing: %s", fullA)
	}
	// One entry per segment (the pause, the end), holding the events as
	// streamed, redacted.
	entries := spy.written()
	if len(entries) != 2 {
		t.Fatalf("a wrote %d events entries, want 2 (one per segment)", len(entries))
	}
	for _, en := range entries {
		noSecret(t, "an events entry", []byte(en))
		var se struct {
			RecordID string            `json:"record_id"`
			Events   []json.RawMessage `json:"events"`
		}
		if err := json.Unmarshal([]byte(en), &se); err != nil || se.RecordID == "" || len(se.Events) == 0 {
			t.Fatalf("events entry %.200s: %v", en, err)
		}
		for _, ev := range se.Events {
			if !bytes.Contains(fullA, ev) {
				t.Errorf("the entry holds an event the stream did not send: %s", ev)
			}
		}
	}
}

// A run paused and then finished through one replica streams the same
// events, with the same ids, through a replica that ran none of it and
// through a handler started anew over the same stores (in memory).
func TestReplicaStreamsTheRunnersEvents(t *testing.T) {
	state := gateway.NewMemoryIdempotency()
	first := newEnv(t, &envOptions{})
	spy := &stateSpy{}
	a := newEnv(t, &envOptions{note: secretNote, state: spyOn(spy), shared: &shared{h: first.harness, state: state, payments: first.payments, clock: first.clock}})
	b := newEnv(t, &envOptions{note: secretNote, shared: a.replicaOf(state)})
	eventsAgree(t, a, b, spy, func() *env { return newEnv(t, &envOptions{note: secretNote, shared: a.replicaOf(state)}) })
}

// The same on SQLite: two handlers over one database file, and a third
// opening it anew.
func TestReplicaStreamsTheRunnersEventsSQLite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "contextos.db")
	open := func() durable {
		s, err := sqlite.Open(context.Background(), path, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	spy := &stateSpy{}
	a := newEnv(t, &envOptions{note: secretNote, state: spyOn(spy), durable: open()})
	b := newEnv(t, &envOptions{note: secretNote, durable: open(), peer: a})
	eventsAgree(t, a, b, spy, func() *env { return newEnv(t, &envOptions{note: secretNote, durable: open(), peer: a}) })
}

// The same on PostgreSQL: two handlers over one database, and a third
// connecting anew.
func TestReplicaStreamsTheRunnersEventsPostgres(t *testing.T) {
	url := pgtest.URL(t)
	open := func() durable {
		s, err := postgres.Open(context.Background(), url, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	spy := &stateSpy{}
	a := newEnv(t, &envOptions{note: secretNote, state: spyOn(spy), durable: open()})
	b := newEnv(t, &envOptions{note: secretNote, durable: open(), peer: a})
	eventsAgree(t, a, b, spy, func() *env { return newEnv(t, &envOptions{note: secretNote, durable: open(), peer: a}) })
}

// A segment whose events entry the store refused: the run goes on (the
// failure is logged), and a replica streams that segment rebuilt from the
// stores — its tool results, pause and record, no plan — then the next
// segment as stored.
func TestReplicaRebuildsASegmentNotStored(t *testing.T) {
	state := gateway.NewMemoryIdempotency()
	first := newEnv(t, &envOptions{})
	spy := &stateSpy{}
	logs := &logBuffer{}
	a := newEnv(t, &envOptions{note: secretNote, state: spyOn(spy), handler: server.Options{Logger: slog.New(slog.NewTextHandler(logs, nil))},
		shared: &shared{h: first.harness, state: state, payments: first.payments, clock: first.clock}})
	b := newEnv(t, &envOptions{note: secretNote, shared: a.replicaOf(state)})
	spy.fail.Store(true)
	runID := a.startPaused("req_events_refused")
	if !strings.Contains(logs.String(), "run events not stored") || !strings.Contains(logs.String(), runID) {
		t.Fatalf("the refused entry is not logged:\n%s", logs)
	}
	spy.fail.Store(false)
	if r := a.decide(runID, lead, server.DecisionApprove, ""); r.status != http.StatusAccepted {
		t.Fatalf("approve: %d %s", r.status, r.body)
	}
	a.waitEnded(runID)
	if n := len(spy.written()); n != 1 {
		t.Fatalf("a stored %d events entries, want 1 (the second segment's)", n)
	}
	evA := readSSE(t, bytes.NewReader(a.stream(runID)))
	fullB := b.stream(runID)
	noSecret(t, "b's events", fullB)
	evB := readSSE(t, bytes.NewReader(fullB))
	checkIDs(t, "a's stream", evA)
	checkIDs(t, "b's stream", evB)
	// The first segment ends with the pause's decision event.
	pauseEnd := func(evs []sseEvent) int {
		for i := 1; i < len(evs); i++ {
			if evs[i].event == "decision" && evs[i-1].event == "pause" {
				return i
			}
		}
		t.Fatalf("no pause: %v", kinds(evs))
		return 0
	}
	ka, kb := pauseEnd(evA), pauseEnd(evB)
	// The results of the segment's calls, in order (the transcript's
	// copy also names its entry).
	type call struct{ ID, Status string }
	calls := func(ev sseEvent) call {
		var r struct {
			ID     string `json:"tool_call_id"`
			Status string `json:"status"`
		}
		if err := json.Unmarshal(member(t, ev.data, "result"), &r); err != nil {
			t.Fatal(err)
		}
		return call{r.ID, r.Status}
	}
	var live, rebuilt []call
	for _, ev := range evA[:ka+1] {
		if ev.event == "tool_result" {
			live = append(live, calls(ev))
		}
	}
	for _, ev := range evB[:kb+1] {
		switch ev.event {
		case "tool_result":
			rebuilt = append(rebuilt, calls(ev))
		case "pause", "decision":
		default:
			t.Errorf("b's rebuilt segment holds a %s event", ev.event)
		}
	}
	if len(rebuilt) == 0 || !slices.Equal(rebuilt, live) {
		t.Errorf("b's rebuilt tool results %v, a's %v", rebuilt, live)
	}
	if !bytes.Equal(member(t, evA[ka].data, "record"), member(t, evB[kb].data, "record")) {
		t.Errorf("b's rebuilt pause record is not a's")
	}
	// The second segment as stored: a's events after its pause.
	restA, restB := evA[ka+1:], evB[kb+1:]
	if len(restA) != len(restB) || !slices.ContainsFunc(restB, func(ev sseEvent) bool { return ev.event == "verdict" }) {
		t.Fatalf("b's second segment %v, a's %v", kinds(restB), kinds(restA))
	}
	for i := range restA[:len(restA)-1] {
		if restA[i].event != restB[i].event || !bytes.Equal(restA[i].data, restB[i].data) {
			t.Errorf("second segment event %d: a sent %s, b %s", i, restA[i].data, restB[i].data)
		}
	}
}

// member is the JSON member name of the object b.
func member(t *testing.T, b json.RawMessage, name string) json.RawMessage {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil || m[name] == nil {
		t.Fatalf("no %s in %s: %v", name, b, err)
	}
	return m[name]
}

// The same request again answers the run as stored: its answer and its
// stream keep the events the run sent when it ran, and no events entry
// is written for it.
func TestSameRequestAgainKeepsEvents(t *testing.T) {
	spy := &stateSpy{}
	e := newEnv(t, &envOptions{state: spyOn(spy)})
	body := refundBody(t, "req_events_again", 1200)
	first := e.do("POST", "/v1/runs", e.token(agent), body)
	if first.status != http.StatusOK {
		t.Fatalf("POST: %d %s", first.status, first.body)
	}
	runID := first.json(t)["run_id"].(string)
	before := e.stream(runID)
	again := e.do("POST", "/v1/runs", e.token(agent), body)
	if again.status != http.StatusOK {
		t.Fatalf("POST again: %d %s", again.status, again.body)
	}
	if a, b := member(t, first.body, "events"), member(t, again.body, "events"); !bytes.Equal(a, b) {
		t.Errorf("the events answered again differ:\nfirst: %s\nagain: %s", a, b)
	}
	if after := e.stream(runID); !bytes.Equal(before, after) {
		t.Errorf("the stream after the same request again differs:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	if n := len(spy.written()); n != 1 {
		t.Errorf("%d events entries written, want 1 (the run's one segment)", n)
	}
}

// A run paused through one replica and approved through the other: the
// replica that continued it streams the first segment as stored (plans
// included) before its own, and both stream the run alike.
func TestReplicaContinuingARunStreamsItFromTheStart(t *testing.T) {
	state := gateway.NewMemoryIdempotency()
	first := newEnv(t, &envOptions{})
	a := newEnv(t, &envOptions{shared: &shared{h: first.harness, state: state, payments: first.payments, clock: first.clock}})
	b := newEnv(t, &envOptions{shared: a.replicaOf(state)})
	runID := a.startPaused("req_events_continued")
	paused := readSSE(t, bytes.NewReader(a.stream(runID)))
	if r := b.decide(runID, lead, server.DecisionApprove, ""); r.status != http.StatusAccepted {
		t.Fatalf("approve through b: %d %s", r.status, r.body)
	}
	b.waitEnded(runID)
	fullA, fullB := a.stream(runID), b.stream(runID)
	if !bytes.Equal(fullA, fullB) {
		t.Fatalf("the run's events differ:\nthrough a:\n%s\nthrough b:\n%s", fullA, fullB)
	}
	evs := readSSE(t, bytes.NewReader(fullB))
	checkIDs(t, "b's stream", evs)
	if len(evs) <= len(paused) || !slices.ContainsFunc(evs[:len(paused)-1], func(ev sseEvent) bool { return ev.event == "plan" }) {
		t.Fatalf("b's events %v, a's of the paused run %v", kinds(evs), kinds(paused))
	}
	for i := range paused[:len(paused)-1] {
		if !bytes.Equal(paused[i].data, evs[i].data) {
			t.Fatalf("event %d: b streams %s, a streamed %s", i, evs[i].data, paused[i].data)
		}
	}
}

// twoRefunds looks the order up, refunds it in two halves, one turn
// each (each pauses at the finance gate), then decides.
func twoRefunds() contextos.Planner {
	return contextos.PlannerFunc(func(ctx context.Context, r *contextos.PlanRequest) (*contextos.Plan, error) {
		p := storekit.RefundPlan(2100)
		switch r.Turn {
		case 0:
			return storekit.LookupPlan(), nil
		case 1, 2:
			p.Decision = nil
			p.Steps[0].Args["note"] = "half " + strconv.Itoa(r.Turn)
		default:
			p.Steps = nil
		}
		return p, nil
	})
}

// A run paused through a, continued through b to its second pause, and
// continued again through a: a, which ran the first and last segments,
// streams b's segment between them, as b does.
func TestReplicasTakingTurnsStreamEverySegment(t *testing.T) {
	state := gateway.NewMemoryIdempotency()
	first := newEnv(t, &envOptions{planner: twoRefunds()})
	a := newEnv(t, &envOptions{planner: twoRefunds(), shared: &shared{h: first.harness, state: state, payments: first.payments, clock: first.clock}})
	b := newEnv(t, &envOptions{planner: twoRefunds(), shared: a.replicaOf(state)})
	runID := a.startPaused("req_events_turns")
	if r := b.decide(runID, lead, server.DecisionApprove, ""); r.status != http.StatusAccepted {
		t.Fatalf("approve through b: %d %s", r.status, r.body)
	}
	var m map[string]any
	for range 2000 {
		if m = b.do("GET", "/v1/runs/"+runID, b.token(agent), nil).json(t); m["state"] != server.StateRunning {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if m["state"] != server.StatePaused {
		t.Fatalf("the run after the first approval: %v %v", m["state"], m["status"])
	}
	if r := a.decide(runID, lead, server.DecisionApprove, ""); r.status != http.StatusAccepted {
		t.Fatalf("approve through a: %d %s", r.status, r.body)
	}
	if m := a.waitEnded(runID); m["status"] != "DECIDED" {
		t.Fatalf("the run ended %v", m["status"])
	}
	fullA, fullB := a.stream(runID), b.stream(runID)
	if !bytes.Equal(fullA, fullB) {
		t.Fatalf("the run's events differ:\nthrough a:\n%s\nthrough b:\n%s", fullA, fullB)
	}
	evs := readSSE(t, bytes.NewReader(fullA))
	checkIDs(t, "a's stream", evs)
	if n := strings.Count(strings.Join(kinds(evs), ","), "pause"); n != 2 {
		t.Errorf("%d pauses in the run's events, want 2: %v", n, kinds(evs))
	}
}
