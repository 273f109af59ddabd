package server_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/contextos/contextos/server"
)

// Close refuses new work, waits for the runs in flight, and when its
// context ends cancels them (the run stops with its record); no goroutine
// of the handler outlives it.
func TestCloseStopsWorkers(t *testing.T) {
	leaks := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, leaks) })
	e := newEnv(t, &envOptions{gateTurn: true, handler: server.Options{SweepInterval: time.Hour}})
	r := e.do("POST", "/v1/runs", e.token(agent), refundBody(t, "req_close_1", 1200), "Prefer", "respond-async")
	if r.status != http.StatusAccepted {
		t.Fatalf("async POST: %d %s", r.status, r.body)
	}
	runID := r.json(t)["run_id"].(string)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := e.handler.Close(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Close with a held run: %v", err)
	}
	e.do("POST", "/v1/runs", e.token(agent), refundBody(t, "req_close_2", 1200)).problem(t, http.StatusServiceUnavailable, server.CodeUnavailable)
	e.do("GET", "/readyz", "", nil).problem(t, http.StatusServiceUnavailable, server.CodeUnavailable)
	m := e.do("GET", "/v1/runs/"+runID, e.token(agent), nil).json(t)
	if m["state"] != server.StateEnded || m["status"] != "ESCALATED" {
		t.Errorf("the cancelled run: %v %v", m["state"], m["status"])
	}
}

// MaxRuns bounds the runs in flight: one over it is answered 503.
func TestBusy(t *testing.T) {
	e := newEnv(t, &envOptions{gateTurn: true, handler: server.Options{MaxRuns: 1}})
	if r := e.do("POST", "/v1/runs", e.token(agent), refundBody(t, "req_busy_1", 1200), "Prefer", "respond-async"); r.status != http.StatusAccepted {
		t.Fatalf("first: %d %s", r.status, r.body)
	}
	e.do("POST", "/v1/runs", e.token(agent), refundBody(t, "req_busy_2", 1200), "Prefer", "respond-async").problem(t, http.StatusServiceUnavailable, server.CodeBusy)
}
