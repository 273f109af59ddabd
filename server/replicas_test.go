package server_test

import (
	"bufio"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/server"
)

// An asynchronous run answers 202 with its Location at once; its events
// stream live while it runs (the planner holds its second turn until the
// test lets it go) and the stream ends with the result.
func TestAsyncRunStreamsLive(t *testing.T) {
	e := newEnv(t, &envOptions{gateTurn: true})
	r := e.do("POST", "/v1/runs", e.token(agent), refundBody(t, "req_async_1", 1200), "Prefer", "respond-async")
	if r.status != http.StatusAccepted || !strings.HasPrefix(r.header.Get("Location"), "/v1/runs/run_") {
		t.Fatalf("async POST: %d %v %s", r.status, r.header, r.body)
	}
	runID := r.json(t)["run_id"].(string)
	if m := e.do("GET", "/v1/runs/"+runID, e.token(agent), nil).json(t); m["state"] != server.StateRunning {
		t.Fatalf("run while held: %v", m)
	}
	req, _ := http.NewRequest("GET", e.srv.URL+"/v1/runs/"+runID+"/events", nil)
	req.Header.Set("Authorization", "Bearer "+e.token(agent))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	// The first events arrive before the run goes on.
	first := make(chan string, 1)
	all := make(chan []sseEvent, 1)
	go func() {
		var got []sseEvent
		cur := sseEvent{}
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<22)
		for sc.Scan() {
			l := sc.Text()
			switch {
			case strings.HasPrefix(l, "event: "):
				cur.event = strings.TrimPrefix(l, "event: ")
			case strings.HasPrefix(l, "id: "):
				cur.id = strings.TrimPrefix(l, "id: ")
			case l == "" && cur.event != "":
				got = append(got, cur)
				if len(got) == 1 {
					first <- cur.event
				}
				cur = sseEvent{}
			}
		}
		all <- got
	}()
	select {
	case k := <-first:
		if k != "compiled" {
			t.Errorf("first live event %q", k)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no live event while the run was held")
	}
	close(e.gate)
	var evs []sseEvent
	select {
	case evs = <-all:
	case <-time.After(20 * time.Second):
		t.Fatal("the stream did not end with the run")
	}
	ks := kinds(evs)
	if ks[len(ks)-1] != "result" || !strings.Contains(strings.Join(ks, ","), "decision") {
		t.Errorf("live events %v", ks)
	}
	// Reconnecting after the third event resumes after it.
	r = e.do("GET", "/v1/runs/"+runID+"/events", e.token(agent), nil, "Last-Event-ID", "2")
	again := readSSE(t, strings.NewReader(string(r.body)))
	if len(again) != len(evs)-3 || again[0].id != "3" {
		t.Errorf("after Last-Event-ID 2: %d events from %q, want %d from 3", len(again), again[0].id, len(evs)-3)
	}
	e.do("GET", "/v1/runs/"+runID+"/events", e.token(agent), nil, "Last-Event-ID", "x").problem(t, http.StatusBadRequest, server.CodeInvalidRequest)
	if m := e.waitEnded(runID); m["status"] != "DECIDED" {
		t.Errorf("run ended %v", m["status"])
	}
}

// Two replicas (handlers over runtimes sharing every store) get the same
// decision at once: one is accepted, the other is 409, and payments runs
// once. The run paused through one replica and is approved through the
// other; the other's view and events show it from the start.
func TestReplicasDecideOnce(t *testing.T) {
	state := gateway.NewMemoryIdempotency()
	a := newEnv(t, &envOptions{})
	// Replica a's runtime uses its own idempotency store; the replicas
	// share b's.
	a = newEnv(t, &envOptions{shared: &shared{h: a.harness, state: state, payments: a.payments, clock: a.clock}})
	b := newEnv(t, &envOptions{shared: a.replicaOf(state)})
	for round := range 3 {
		runID := a.startPaused("req_replicas_" + string(rune('a'+round)))
		var wg sync.WaitGroup
		codes := make([]int, 2)
		for i, env := range []*env{a, b} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				w := lead
				if i == 1 {
					w = lead2
				}
				codes[i] = env.decide(runID, w, server.DecisionApprove, "").status
			}()
		}
		wg.Wait()
		if !(codes[0] == 202 && codes[1] == 409 || codes[0] == 409 && codes[1] == 202) {
			t.Fatalf("round %d: decisions answered %v, want one 202 and one 409", round, codes)
		}
		if m := b.waitEnded(runID); m["status"] != "DECIDED" {
			t.Fatalf("round %d: run ended %v", round, m["status"])
		}
	}
	keys, effects := a.payments.Counts()
	if len(keys) != 3 || len(effects) != 3 {
		t.Errorf("payments got %d requests, %d effects; want 3 each (one per run)", len(keys), len(effects))
	}

	// Paused through a, approved through b: b's view has the events from
	// the start.
	runID := a.startPaused("req_replicas_cross")
	if r := b.decide(runID, lead, server.DecisionApprove, "ok"); r.status != http.StatusAccepted {
		t.Fatalf("approve through b: %d %s", r.status, r.body)
	}
	m := b.waitEnded(runID)
	var evs []struct {
		Kind string `json:"kind"`
	}
	raw, _ := json.Marshal(m["events"])
	json.Unmarshal(raw, &evs)
	if len(evs) < 3 || evs[0].Kind != "tool_result" && evs[0].Kind != "compiled" {
		t.Errorf("b's events of a's run: %s", raw)
	}
	// a sees the run ended too (its stores say so), not its stale pause.
	if m := a.waitEnded(runID); m["status"] != "DECIDED" {
		t.Errorf("a's view: %v", m["status"])
	}
	a.decide(runID, lead2, server.DecisionApprove, "").problem(t, http.StatusConflict, server.CodeAlreadyDecided)
}
