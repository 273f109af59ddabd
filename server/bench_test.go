package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/internal/storekit"
)

// BenchmarkPostRun is the cost of POST /v1/runs over Runtime.Invoke: the
// 1200 refund (no pause) invoked directly, and posted to the handler
// (authentication, body decoding and checks, the run-starter entry, the
// worker, event redaction, the answer) without a network in between.
// The difference of the two ns/op is the handler's overhead.
func BenchmarkPostRun(b *testing.B) {
	b.Run("invoke", func(b *testing.B) {
		e := benchEnv(b)
		ctx := context.Background()
		b.ReportAllocs()
		b.ResetTimer()
		defer cpuPerOp(b)()
		for i := range b.N {
			req, rc := storekit.RefundRequest(b, fmt.Sprintf("run_bench_%d", i), 1200)
			req.RequestID = fmt.Sprintf("req_bench_%d", i)
			if _, err := e.harness.Runtime.Invoke(ctx, req, rc); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("post", func(b *testing.B) {
		e := benchEnv(b)
		tok := "Bearer " + token(b, secret, agent, e.clock.Now())
		bodies := make([][]byte, b.N)
		for i := range bodies {
			bodies[i] = refundBody(b, fmt.Sprintf("req_bench_%d", i), 1200)
		}
		b.ReportAllocs()
		b.ResetTimer()
		defer cpuPerOp(b)()
		for i := range b.N {
			req := httptest.NewRequest("POST", "/v1/runs", bytes.NewReader(bodies[i]))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", tok)
			rec := httptest.NewRecorder()
			e.handler.ServeHTTP(rec, req)
			if rec.Code != http.StatusOK {
				b.Fatalf("%d %s", rec.Code, rec.Body)
			}
		}
	})
}

// cpuPerOp reports the process's CPU time (user and system, every
// goroutine: the run's, the handler's, the in-process payments service's)
// per operation as cpu-ns/op, from now until the returned func is called:
// on a shared machine it moves less than ns/op, which counts waiting.
func cpuPerOp(b *testing.B) func() {
	start := cpuTime(b)
	return func() {
		b.StopTimer()
		b.ReportMetric(float64((cpuTime(b)-start).Nanoseconds())/float64(b.N), "cpu-ns/op")
	}
}

func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// benchEnv is newEnv for a benchmark, capturing no replay packet (the
// runtime's default), so the run's own cost does not drown the handler's.
func benchEnv(b *testing.B) *env {
	return newEnvTB(b, &envOptions{runtime: func(o *contextos.Options) { o.ReplaySampleRate = 0 }})
}

// BenchmarkListApprovals is GET /v1/approvals as a finance lead, over
// 1,000 to 100,000 stored runs in the in-memory checkpoint store of
// which ten are paused at the finance gate (the others are copies of an
// ended run's checkpoint, seeded outside the timing). The listing reads
// the store's pending index, the caller's tenant's only.
func BenchmarkListApprovals(b *testing.B) {
	ctx := context.Background()
	for _, n := range []int{1_000, 10_000, 100_000} {
		b.Run("runs="+strconv.Itoa(n), func(b *testing.B) {
			e := benchEnv(b)
			for i := range 10 {
				e.startPaused(fmt.Sprintf("req_paused_%d", i))
			}
			r := e.do("POST", "/v1/runs", e.token(agent), refundBody(b, "req_ended", 1200))
			if r.status != http.StatusOK {
				b.Fatalf("POST /v1/runs: %d %s", r.status, r.body)
			}
			ended, err := e.harness.Checkpoints.Load(ctx, r.json(b)["run_id"].(string))
			if err != nil {
				b.Fatal(err)
			}
			for i := range n - 11 {
				if err := e.harness.Checkpoints.Save(ctx, &contextos.Checkpoint{RunID: "run_seed_" + strconv.Itoa(i), Version: ended.Version, Data: ended.Data}); err != nil {
					b.Fatal(err)
				}
			}
			tok := "Bearer " + token(b, secret, lead, e.clock.Now())
			list := func() *httptest.ResponseRecorder {
				req := httptest.NewRequest("GET", "/v1/approvals", nil)
				req.Header.Set("Authorization", tok)
				rec := httptest.NewRecorder()
				e.handler.ServeHTTP(rec, req)
				if rec.Code != http.StatusOK {
					b.Fatalf("%d %s", rec.Code, rec.Body)
				}
				return rec
			}
			var got struct {
				Approvals []json.RawMessage `json:"approvals"`
			}
			if err := json.Unmarshal(list().Body.Bytes(), &got); err != nil || len(got.Approvals) != 10 {
				b.Fatalf("GET /v1/approvals lists %d, %v; want 10", len(got.Approvals), err)
			}
			b.ReportAllocs()
			for b.Loop() {
				list()
			}
		})
	}
}
