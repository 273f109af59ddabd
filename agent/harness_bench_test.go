package agent_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/contextos/contextos/agent"
)

// BenchmarkEventPipe measures events per second through Start, Emit and
// Events (a small status event with data, bounds applied).
func BenchmarkEventPipe(b *testing.B) {
	b.ReportAllocs()
	ev := agent.Event{Kind: agent.EventStatus, Channel: "status", Message: "working", Data: json.RawMessage(`{"n":1}`)}
	n := b.N
	b.ResetTimer()
	began := time.Now()
	run := agent.Start(context.Background(), agent.RunConfig{Kind: hk}, func(ctx context.Context, out *agent.Emitter) (agent.Completion, error) {
		for range n {
			out.Emit(ev)
		}
		return agent.Completion{}, nil
	})
	got := 0
	for range run.Events() {
		got++
	}
	if _, err := run.Wait(context.Background()); err != nil || got != n {
		b.Fatalf("%d events, %v", got, err)
	}
	b.ReportMetric(float64(n)/time.Since(began).Seconds(), "events/s")
}

// BenchmarkPrepare measures the validation of a typical request.
func BenchmarkPrepare(b *testing.B) {
	b.ReportAllocs()
	dir := b.TempDir()
	r := agent.RunRequest{
		Prompt:  "fix the failing test",
		Env:     map[string]string{"A": "1", "B": "2"},
		Timeout: agent.Timeout(time.Minute),
		Extensions: map[string]json.RawMessage{
			agent.CapNonInteractive: json.RawMessage(`true`),
			agent.CapModel:          json.RawMessage(`"gpt-5"`),
			agent.CapAddDirs:        json.RawMessage(`{"dirs":["` + dir + `"]}`),
			agent.CapSessionResume:  json.RawMessage(`{"selector":"id","id":"thr_123"}`),
			"backend.toy.exec.mode": json.RawMessage(`"x"`),
		},
	}
	d := agent.Defaults{WorkingDir: dir, Env: map[string]string{"HOME": "/h"}, Keys: toyKeys.Keys}
	for b.Loop() {
		if _, err := agent.Prepare(pk, allCaps, r, d); err != nil {
			b.Fatal(err)
		}
	}
}
