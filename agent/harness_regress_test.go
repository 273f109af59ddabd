package agent_test

// Regressions found by a hostile review of the run protocol: each failed
// before its fix.

import (
	"context"
	"encoding/json"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/contextos/contextos/agent"
)

// A: consumer's loop body panics (or t.FailNow / runtime.Goexit): the
// stream reaches "finality" but forwarding never stops, so the driver
// blocks in Emit forever and Wait never returns.
func TestHarnessConsumerPanicDeadlocksWait(t *testing.T) {
	run := agent.Start(context.Background(), agent.RunConfig{Kind: "toy"},
		func(ctx context.Context, out *agent.Emitter) (agent.Completion, error) {
			for i := 0; i < 100; i++ {
				out.Emit(agent.Event{Kind: agent.EventStatus, Message: "m"})
			}
			return agent.Completion{}, nil
		})
	func() {
		defer func() { recover() }()
		for range run.Events() {
			panic("consumer bug")
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := run.Wait(ctx); err != nil {
		t.Fatalf("Wait after a consumer that stopped reading = %v (driver stuck in Emit)", err)
	}
}

// B: data is measured as the raw compacted bytes, not the serialized JSON
// value (serde_json / json.Marshal of the value): escaped input is dropped
// although its serialized form is far below the bound.
func TestHarnessDataMeasuredAsSerializedValue(t *testing.T) {
	s := strings.Repeat(`\u4e2d`, 15000) // 90000 raw bytes; value serializes to 45000+ bytes
	raw := json.RawMessage(`{"s":"` + s + `"}`)
	var v any
	_ = json.Unmarshal(raw, &v)
	re, _ := json.Marshal(v)
	run := agent.Start(context.Background(), agent.RunConfig{Kind: "toy"},
		func(ctx context.Context, out *agent.Emitter) (agent.Completion, error) {
			out.Emit(agent.Event{Kind: agent.EventStatus, Message: "m", Data: raw})
			return agent.Completion{}, nil
		})
	var got agent.Event
	for ev := range run.Events() {
		got = ev
	}
	run.Wait(context.Background())
	if strings.Contains(string(got.Data), "oversize") {
		t.Fatalf("data whose serialized JSON is %d bytes (≤ %d) was replaced by the oversize marker", len(re), agent.MaxDataBytes)
	}
}

// F: Kind rejects names over 64 bytes, a rule the contract does not have.
func TestHarnessKindHasNoLengthLimit(t *testing.T) {
	if _, err := agent.NewKind(strings.Repeat("a", 65)); err != nil {
		t.Fatalf("NewKind(65×a) = %v; ^[a-z][a-z0-9_]*$ has no length limit", err)
	}
}

// G: the R0 gate accepts any advertised capability as an extension key,
// although most capability ids (agent_api.run, agent_api.events,
// agent_api.control.cancel.v1, …) are not extension keys: unrecognised
// keys must fail closed (upstream gates on supported_extension_keys()).
func TestHarnessNonKeyCapabilityIsNotAnExtensionKey(t *testing.T) {
	caps := agent.NewCapabilities(agent.CapRun, agent.CapEvents, agent.CapCancel)
	for _, k := range []string{agent.CapRun, agent.CapEvents, agent.CapCancel} {
		req := agent.RunRequest{Prompt: "hi", Extensions: map[string]json.RawMessage{k: json.RawMessage(`{"x":1}`)}}
		if _, err := agent.Prepare("toy", caps, req, agent.Defaults{}); err == nil {
			t.Errorf("Prepare accepted extension key %q, which no backend recognises as an extension", k)
		}
	}
}

// H: a run started with an already-ended context is not reliably
// cancelled: a fast driver's outcome wins the race against the AfterFunc.
func TestHarnessStartWithEndedContextIsCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	ok := 0
	for i := 0; i < 200; i++ {
		run := agent.Start(ctx, agent.RunConfig{Kind: "toy"}, func(ctx context.Context, out *agent.Emitter) (agent.Completion, error) {
			return agent.Completion{}, nil
		})
		run.Close()
		if _, err := run.Wait(context.Background()); err == nil {
			ok++
		}
	}
	if ok > 0 {
		t.Fatalf("%d/200 runs started with an ended context completed successfully", ok)
	}
}

// I: Wait with an ended ctx on an already-resolved run.
func TestHarnessWaitResolvedRunWithEndedCtx(t *testing.T) {
	run := agent.Start(context.Background(), agent.RunConfig{Kind: "toy"}, func(ctx context.Context, out *agent.Emitter) (agent.Completion, error) {
		return agent.Completion{}, nil
	})
	for range run.Events() {
	}
	run.Wait(context.Background())
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	bad := 0
	for i := 0; i < 200; i++ {
		if _, err := run.Wait(ctx); err != nil {
			bad++
		}
	}
	if bad > 0 {
		t.Fatalf("%d/200 Waits on a resolved run returned the ctx error", bad)
	}
}

// J: a driver returning a typed-nil *agent.Error crashes the process (nil
// dereference in drive's deferred function, outside its recover).
func TestHarnessTypedNilErrorFromDriver(t *testing.T) {
	run := agent.Start(context.Background(), agent.RunConfig{Kind: "toy"}, func(ctx context.Context, out *agent.Emitter) (agent.Completion, error) {
		var e *agent.Error
		return agent.Completion{}, e
	})
	for range run.Events() {
	}
	run.Wait(context.Background())
}

// K: a driver that calls runtime.Goexit (t.Fatal in a test driver) leaves
// the completion unresolved forever: Wait never returns.
func TestHarnessDriverGoexitHangsWait(t *testing.T) {
	run := agent.Start(context.Background(), agent.RunConfig{Kind: "toy"}, func(ctx context.Context, out *agent.Emitter) (agent.Completion, error) {
		runtime.Goexit()
		return agent.Completion{}, nil
	})
	for range run.Events() {
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := run.Wait(ctx); err == ctx.Err() {
		t.Fatal("Wait never resolves after the driver's goroutine exited via runtime.Goexit")
	}
}
