package server_test

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/decision"
	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/server"
	"github.com/contextos/contextos/store/sqlite"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// ticketRule redacts the refund note's ticket reference, a rule a host
// adds (say, after finding such references in plans).
const ticketRef = "TICKET-ZX7741-PRIVATE"

func ticketRule(s string) (string, bool) {
	if !strings.Contains(s, ticketRef) {
		return s, false
	}
	return strings.ReplaceAll(s, ticketRef, gateway.Redacted), true
}

// A replica streams a run's stored events redacted by its own rules, as
// it redacts the run's records and results: a rule the replica that ran
// the run did not have (an older version, a rule added since) still keeps
// what it redacts out of every answer.
func TestStoredEventsRedactedByTheReader(t *testing.T) {
	state := gateway.NewMemoryIdempotency()
	note := "refund for " + ticketRef
	first := newEnv(t, &envOptions{})
	a := newEnv(t, &envOptions{note: note, shared: &shared{h: first.harness, state: state, payments: first.payments, clock: first.clock}})
	b := newEnv(t, &envOptions{note: note, shared: a.replicaOf(state),
		handler: server.Options{Redactors: map[string]gateway.Redactor{"ticket": ticketRule}}})
	runID := a.startPaused("req_events_reader_rules")
	if !bytes.Contains(a.stream(runID), []byte(ticketRef)) {
		t.Fatalf("a's stream does not show the note: the test proves nothing")
	}
	if evs := b.stream(runID); bytes.Contains(evs, []byte(ticketRef)) {
		t.Errorf("b streams a value its redactors redact (%d times)", bytes.Count(evs, []byte(ticketRef)))
	}
	if v := b.do("GET", "/v1/runs/"+runID, b.token(agent), nil); v.status != http.StatusOK || bytes.Contains(v.body, []byte(ticketRef)) {
		t.Errorf("b's view of the run shows a value its redactors redact: %d (%d times)", v.status, bytes.Count(v.body, []byte(ticketRef)))
	}
}

// gatedState wraps a handler's state store: while armed, the first claim
// of a run events key waits until release is closed (the handler that
// ran the segment is slow to store its events: a pause, a slow network).
type gatedState struct {
	gateway.IdempotencyStore
	once    sync.Once
	reached chan struct{}
	release chan struct{}
}

func (g *gatedState) Claim(ctx context.Context, key string) (*gateway.ToolResultEnvelope, bool, error) {
	if strings.HasPrefix(key, "contextos-server/v1/events/") {
		g.once.Do(func() {
			close(g.reached)
			<-g.release
		})
	}
	return g.IdempotencyStore.Claim(ctx, key)
}

// A run paused through a and approved through b before a stored the
// pause's segment: b seeds the run with that segment rebuilt (a has not
// stored it yet), then a stores it. Once the run ended, b must stream
// the run as every other replica does (the stored segment), not keep
// serving its rebuilt copy: a client that resumes with Last-Event-ID on
// another replica otherwise gets other events under the same ids.
func TestReplicaSeededBeforeTheSegmentWasStoredAgrees(t *testing.T) {
	state := gateway.NewMemoryIdempotency()
	gate := &gatedState{reached: make(chan struct{}), release: make(chan struct{})}
	first := newEnv(t, &envOptions{})
	a := newEnv(t, &envOptions{state: func(s gateway.IdempotencyStore) gateway.IdempotencyStore { gate.IdempotencyStore = s; return gate },
		shared: &shared{h: first.harness, state: state, payments: first.payments, clock: first.clock}})
	b := newEnv(t, &envOptions{shared: a.replicaOf(state)})
	r := a.do("POST", "/v1/runs", a.token(agent), refundBody(t, "req_events_seed_race", 4200), "Prefer", "respond-async")
	if r.status != http.StatusAccepted {
		t.Fatalf("POST async: %d %s", r.status, r.body)
	}
	runID := r.json(t)["run_id"].(string)
	select {
	case <-gate.reached:
	case <-time.After(20 * time.Second):
		t.Fatal("a never stored the pause's segment")
	}
	if r := b.decide(runID, lead, server.DecisionApprove, ""); r.status != http.StatusAccepted {
		close(gate.release)
		t.Fatalf("approve through b: %d %s", r.status, r.body)
	}
	b.waitEnded(runID)
	close(gate.release)
	a.waitEnded(runID)
	c := newEnv(t, &envOptions{shared: a.replicaOf(state)})
	fullB, fullC := b.stream(runID), c.stream(runID)
	if !bytes.Equal(fullB, fullC) {
		t.Fatalf("b and a third replica stream the ended run differently:\nb:\n%s\nc:\n%s", strings.Join(kinds(readSSE(t, bytes.NewReader(fullB))), ","), strings.Join(kinds(readSSE(t, bytes.NewReader(fullC))), ","))
	}
	checkIDs(t, "b's stream", readSSE(t, bytes.NewReader(fullB)))
}

// blockingRecords is a record store whose first List after arm waits
// until release is closed.
type blockingRecords struct {
	decision.Store
	mu      sync.Mutex
	armed   bool
	reached chan struct{}
	release chan struct{}
}

func (s *blockingRecords) arm() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.armed, s.reached, s.release = true, make(chan struct{}), make(chan struct{})
}

func (s *blockingRecords) List(ctx context.Context, f decision.Filter) ([]*decision.Record, error) {
	s.mu.Lock()
	armed := s.armed
	s.armed = false
	reached, release := s.reached, s.release
	s.mu.Unlock()
	if armed {
		close(reached)
		<-release
	}
	return s.Store.List(ctx, f)
}

// slowRecords is a durable store whose record store is blockingRecords.
type slowRecords struct {
	durable
	recs *blockingRecords
}

func (s slowRecords) Configure(o *contextos.Options) { s.durable.Configure(o); o.Decisions = s.recs }
func (s slowRecords) Records() decision.Store        { return s.recs }

// The same request again, while the runtime answers it from the stores,
// must not change what the run's stream sends: a client that starts
// reading the paused run's events then gets them all, from the start.
func TestSameRequestAgainStreamsTheRunsEvents(t *testing.T) {
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "contextos.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	recs := &blockingRecords{Store: st.Records()}
	e := newEnv(t, &envOptions{durable: slowRecords{durable: st, recs: recs}})
	body := refundBody(t, "req_events_again_window", 4200)
	r := e.do("POST", "/v1/runs", e.token(agent), body)
	if r.status != http.StatusOK {
		t.Fatalf("POST: %d %s", r.status, r.body)
	}
	runID := r.json(t)["run_id"].(string)
	before := e.stream(runID)
	recs.arm()
	if r := e.do("POST", "/v1/runs", e.token(agent), body, "Prefer", "respond-async"); r.status != http.StatusAccepted {
		t.Fatalf("POST again: %d %s", r.status, r.body)
	}
	select {
	case <-recs.reached:
	case <-time.After(20 * time.Second):
		t.Fatal("the same request again never read the run's records")
	}
	got := make(chan []byte, 1)
	go func() {
		resp := doTo(t, e.srv.URL, "GET", "/v1/runs/"+runID+"/events", e.token(agent), nil)
		got <- resp.body
	}()
	time.Sleep(100 * time.Millisecond) // the stream has started (it waits for the run)
	close(recs.release)
	during := <-got
	evB, evD := readSSE(t, bytes.NewReader(before)), readSSE(t, bytes.NewReader(during))
	if len(evD) != len(evB) {
		t.Fatalf("the stream read while the same request ran again: %v, before: %v", kinds(evD), kinds(evB))
	}
	for i := range evB[:len(evB)-1] {
		if evB[i].id != evD[i].id || !bytes.Equal(evB[i].data, evD[i].data) {
			t.Fatalf("event %d differs: before %s, during %s", i, evB[i].data, evD[i].data)
		}
	}
}

// A request's path is the caller's text: a server span's url.path is
// redacted as every answer is (a card number or a key pasted as an id),
// so the span export holds nothing the handler redacts.
func TestHTTPSpanPathRedacted(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	e := newEnv(t, &envOptions{handler: server.Options{TracerProvider: tp}})
	e.do("GET", "/v1/records/"+cardNumber, e.token(agent), nil)
	e.do("GET", "/v1/runs/"+apiSecret+"/events", e.token(agent), nil)
	n := 0
	for _, s := range rec.Ended() {
		for _, kv := range s.Attributes() {
			if kv.Key == "url.path" {
				n++
				noSecret(t, "span "+s.Name()+"'s url.path", []byte(kv.Value.AsString()))
			}
		}
	}
	if n != 2 {
		t.Fatalf("%d spans with url.path, want 2", n)
	}
}

// failingReads wraps a handler's state store: while armed, a claim of a
// run events key fails (the store does not answer a read).
type failingReads struct {
	gateway.IdempotencyStore
	armed atomic.Bool
}

func (f *failingReads) Claim(ctx context.Context, key string) (*gateway.ToolResultEnvelope, bool, error) {
	if f.armed.Load() && strings.HasPrefix(key, "contextos-server/v1/events/") {
		return nil, false, errors.New("test: the state store does not answer")
	}
	return f.IdempotencyStore.Claim(ctx, key)
}

// gatedTurn is twoRefunds with its turn 2 held until release is closed.
func gatedTurn(release <-chan struct{}) contextos.Planner {
	inner := twoRefunds()
	return contextos.PlannerFunc(func(ctx context.Context, r *contextos.PlanRequest) (*contextos.Plan, error) {
		if r.Turn == 2 {
			select {
			case <-release:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		return inner.Plan(ctx, r)
	})
}

// A replica that continues a run without reading its events so far (the
// state store failed the read) must not stream the new segment's events
// under the ids of the run's first events: a client that reconnects
// elsewhere with Last-Event-ID would get other events, or none.
func TestReplicaUnseededStreamKeepsIDs(t *testing.T) {
	state := gateway.NewMemoryIdempotency()
	release := make(chan struct{})
	first := newEnv(t, &envOptions{planner: twoRefunds()})
	a := newEnv(t, &envOptions{planner: twoRefunds(), shared: &shared{h: first.harness, state: state, payments: first.payments, clock: first.clock}})
	fr := &failingReads{}
	b := newEnv(t, &envOptions{planner: gatedTurn(release), shared: a.replicaOf(state),
		state: func(s gateway.IdempotencyStore) gateway.IdempotencyStore { fr.IdempotencyStore = s; return fr }})
	runID := a.startPaused("req_events_unseeded")
	fr.armed.Store(true)
	r := b.decide(runID, lead, server.DecisionApprove, "")
	fr.armed.Store(false)
	if r.status != http.StatusAccepted {
		close(release)
		t.Fatalf("approve through b: %d %s", r.status, r.body)
	}
	got := make(chan []byte, 1)
	go func() {
		got <- doTo(t, b.srv.URL, "GET", "/v1/runs/"+runID+"/events", b.token(agent), nil).body
	}()
	time.Sleep(100 * time.Millisecond) // the stream has started: the run waits for turn 2
	close(release)
	live := readSSE(t, bytes.NewReader(<-got))
	c := newEnv(t, &envOptions{planner: twoRefunds(), shared: a.replicaOf(state)})
	all := readSSE(t, bytes.NewReader(c.stream(runID)))
	byID := map[string]sseEvent{}
	for _, ev := range all {
		if ev.id != "" {
			byID[ev.id] = ev
		}
	}
	for _, ev := range live {
		if ev.id == "" {
			continue
		}
		if want, ok := byID[ev.id]; !ok || want.event != ev.event || !bytes.Equal(want.data, ev.data) {
			t.Fatalf("b streamed event %s as %s %.120s; every other replica's event %s is %s %.120s", ev.id, ev.event, ev.data, ev.id, want.event, want.data)
		}
	}
}
