package gatewaytest

import (
	"context"
	"errors"
	"fmt"
	"github.com/contextos/contextos/internal/sortedkeys"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/internal/canon"
	"github.com/contextos/contextos/runcontext"
)

// AdapterHarness gives RunAdapterTests an adapter and calls to make.
type AdapterHarness struct {
	Adapter gateway.Adapter
	// Valid is a call the adapter completes.
	Valid *gateway.Call
	// Invalid, when set, is a call the adapter must refuse with a
	// non-retryable *gateway.ToolError.
	Invalid *gateway.Call
	// Slow, when set, is a call that runs long enough (≥ 1s) to test
	// cancellation.
	Slow *gateway.Call
}

var canonicalCodes = []string{gateway.CodeInvalidInput, gateway.CodeUnsupportedTool, gateway.CodeRuntimePolicyInvalid, gateway.CodeIsolationUnavailable,
	gateway.CodePermissionDenied, gateway.CodeSecretResolutionFailed, gateway.CodeTimeout, gateway.CodeCanceled, gateway.CodeExecutionFailed,
	gateway.CodeAuthInvalid, gateway.CodeAuthForbidden, gateway.CodeAuthExpired}

// RunAdapterTests checks the Adapter contract: a valid call completes; a
// refused call is a non-retryable ToolError with a canonical code and
// reason; a cancelled context stops a call promptly; calls are safe
// concurrently.
func RunAdapterTests(t *testing.T, newHarness func(t *testing.T) AdapterHarness) {
	t.Helper()
	t.Run("ValidCall", func(t *testing.T) {
		h := newHarness(t)
		out, err := h.Adapter.Call(context.Background(), h.Valid)
		if err != nil || out == nil {
			t.Fatalf("Call(valid) = %v, %v", out, err)
		}
	})
	t.Run("InvalidCall", func(t *testing.T) {
		h := newHarness(t)
		if h.Invalid == nil {
			t.Skip("harness has no invalid call")
		}
		_, err := h.Adapter.Call(context.Background(), h.Invalid)
		var te *gateway.ToolError
		if !errors.As(err, &te) {
			t.Fatalf("Call(invalid) error = %v, want *gateway.ToolError", err)
		}
		if te.Retryable || !slices.Contains(canonicalCodes, te.Code) || te.Reason != gateway.ReasonFor(te.Code) {
			t.Errorf("ToolError = %+v, want a non-retryable canonical code with its reason", te)
		}
	})
	t.Run("Cancellation", func(t *testing.T) {
		h := newHarness(t)
		call := h.Slow
		if call == nil {
			call = h.Valid
		}
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		done := make(chan error, 1)
		go func() { _, err := h.Adapter.Call(ctx, call); done <- err }()
		select {
		case err := <-done:
			if h.Slow != nil && err == nil {
				t.Error("a slow call with a cancelled context succeeded")
			}
		case <-time.After(30 * time.Second):
			// Generous: an adapter that honours cancellation returns at
			// once; only one that ignores it waits out this bound, and a
			// loaded machine under -race must not trip it.
			t.Fatal("a call with a cancelled context did not return within 30s")
		}
	})
	t.Run("ConcurrentSafe", func(t *testing.T) {
		h := newHarness(t)
		var wg sync.WaitGroup
		var failures atomic.Int32
		for i := 0; i < 8; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := h.Adapter.Call(context.Background(), h.Valid); err != nil {
					failures.Add(1)
				}
			}()
		}
		wg.Wait()
		if failures.Load() > 0 {
			t.Errorf("%d concurrent valid calls failed", failures.Load())
		}
	})
}

// RunIdempotencyStoreTests checks one execution per key: a claimed key
// makes concurrent claimants wait and receive the result; a released key
// can be claimed again; keys are independent; cancelled waits return.
func RunIdempotencyStoreTests(t *testing.T, newStore func(t *testing.T) gateway.IdempotencyStore) {
	t.Helper()
	ctx := context.Background()
	res := &gateway.ToolResultEnvelope{ToolCallID: "tool_1", Status: gateway.StatusCompleted, Mutations: []string{"refund:1"}}
	t.Run("OneExecutionPerKey", func(t *testing.T) {
		s := newStore(t)
		var executed atomic.Int32
		var wg sync.WaitGroup
		results := make(chan *gateway.ToolResultEnvelope, 50)
		for i := 0; i < 50; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				prior, claimed, err := s.Claim(ctx, "ik_1")
				if err != nil {
					t.Error(err)
					return
				}
				if claimed {
					executed.Add(1)
					time.Sleep(time.Millisecond)
					if err := s.Complete(ctx, "ik_1", res); err != nil {
						t.Error(err)
					}
					results <- res
					return
				}
				results <- prior
			}()
		}
		wg.Wait()
		close(results)
		if executed.Load() != 1 {
			t.Errorf("executed %d times, want 1", executed.Load())
		}
		for r := range results {
			if r == nil || r.ToolCallID != "tool_1" {
				t.Errorf("a claimant got %+v", r)
			}
		}
	})
	t.Run("ReleaseLetsAnotherTry", func(t *testing.T) {
		s := newStore(t)
		if _, claimed, _ := s.Claim(ctx, "ik_2"); !claimed {
			t.Fatal("first claim not granted")
		}
		if err := s.Release(ctx, "ik_2"); err != nil {
			t.Fatal(err)
		}
		if _, claimed, _ := s.Claim(ctx, "ik_2"); !claimed {
			t.Error("claim after release not granted")
		}
		if _, claimed, _ := s.Claim(ctx, "ik_other"); !claimed {
			t.Error("keys are not independent")
		}
	})
	t.Run("CompletedKeyReturnsResult", func(t *testing.T) {
		s := newStore(t)
		s.Claim(ctx, "ik_3")
		s.Complete(ctx, "ik_3", res)
		prior, claimed, err := s.Claim(ctx, "ik_3")
		if err != nil || claimed || prior == nil || prior.ToolCallID != "tool_1" {
			t.Errorf("Claim(completed) = %+v, %v, %v", prior, claimed, err)
		}
	})
	t.Run("CancelledWait", func(t *testing.T) {
		s := newStore(t)
		s.Claim(ctx, "ik_4")
		cctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
		defer cancel()
		if _, _, err := s.Claim(cctx, "ik_4"); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("waiting Claim with expired context = %v", err)
		}
		s.Release(ctx, "ik_4")
	})
}

// RunApprovalLogTests checks that an approval is consumed exactly once,
// also under concurrency.
func RunApprovalLogTests(t *testing.T, newLog func(t *testing.T) gateway.ApprovalLog) {
	t.Helper()
	ctx := context.Background()
	t.Run("ConsumeOnce", func(t *testing.T) {
		l := newLog(t)
		if err := l.Consume(ctx, "apr_1"); err != nil {
			t.Fatal(err)
		}
		if err := l.Consume(ctx, "apr_1"); !errors.Is(err, gateway.ErrApprovalUsed) {
			t.Errorf("second Consume = %v, want ErrApprovalUsed", err)
		}
		if err := l.Consume(ctx, "apr_2"); err != nil {
			t.Errorf("another approval: %v", err)
		}
	})
	t.Run("ConcurrentConsumeOnce", func(t *testing.T) {
		l := newLog(t)
		var ok atomic.Int32
		var wg sync.WaitGroup
		for i := 0; i < 32; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if l.Consume(ctx, "apr_c") == nil {
					ok.Add(1)
				}
			}()
		}
		wg.Wait()
		if ok.Load() != 1 {
			t.Errorf("%d concurrent consumes succeeded, want 1", ok.Load())
		}
	})
	t.Run("CancelledContext", func(t *testing.T) {
		l := newLog(t)
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		if err := l.Consume(cctx, "apr_x"); !errors.Is(err, context.Canceled) {
			t.Errorf("Consume(cancelled) = %v", err)
		}
	})
	t.Run("BoundToAnAction", func(t *testing.T) {
		// A log that binds uses to actions lets the same action present
		// an approval again, and no other.
		l, ok := newLog(t).(gateway.ActionApprovalLog)
		if !ok {
			t.Skip("the log does not bind uses to actions")
		}
		if err := l.ConsumeAction(ctx, "apr_a", "ik_1"); err != nil {
			t.Fatal(err)
		}
		if err := l.ConsumeAction(ctx, "apr_a", "ik_1"); err != nil {
			t.Errorf("the same action again = %v, want it granted", err)
		}
		for _, other := range []string{"ik_2", ""} {
			if err := l.ConsumeAction(ctx, "apr_a", other); !errors.Is(err, gateway.ErrApprovalUsed) {
				t.Errorf("action %q after ik_1 = %v, want ErrApprovalUsed", other, err)
			}
		}
		if err := l.Consume(ctx, "apr_a"); !errors.Is(err, gateway.ErrApprovalUsed) {
			t.Errorf("Consume after ConsumeAction = %v, want ErrApprovalUsed", err)
		}
		if err := l.Consume(ctx, "apr_b"); err != nil {
			t.Fatal(err)
		}
		if err := l.ConsumeAction(ctx, "apr_b", "ik_1"); !errors.Is(err, gateway.ErrApprovalUsed) {
			t.Errorf("ConsumeAction after Consume = %v, want ErrApprovalUsed", err)
		}
		var granted atomic.Int32
		var wg sync.WaitGroup
		for i := range 16 {
			wg.Go(func() {
				if l.ConsumeAction(ctx, "apr_c", fmt.Sprintf("ik_%d", i%2)) == nil {
					granted.Add(1)
				}
			})
		}
		wg.Wait()
		if n := granted.Load(); n != 8 {
			t.Errorf("%d of 16 concurrent uses by two actions were granted, want the 8 of one action", n)
		}
	})
}

// RunTranscriptSinkTests checks that a sink keeps every entry, of
// concurrent appends too, and each run's entries in the order they were
// appended (so each run's chain verifies), and honours ctx. entries
// returns every entry the sink holds (runs may come in any order, but
// each run's entries in append order).
func RunTranscriptSinkTests(t *testing.T, newSink func(t *testing.T) (gateway.TranscriptSink, func() []gateway.TranscriptEntry)) {
	t.Helper()
	ctx := context.Background()
	t.Run("KeepsEveryEntry", func(t *testing.T) {
		s, entries := newSink(t)
		var wg sync.WaitGroup
		for i := 0; i < 40; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := s.Append(ctx, gateway.TranscriptEntry{RunID: "run_1", Kind: "call"}); err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
		if n := len(entries()); n != 40 {
			t.Errorf("sink holds %d entries, want 40", n)
		}
	})
	t.Run("KeepsEachRunInOrder", func(t *testing.T) {
		s, entries := newSink(t)
		runs := appendInterleaved(t, s, "run_a", "run_b")
		got := map[string][]gateway.TranscriptEntry{}
		for _, e := range entries() {
			got[e.RunID] = append(got[e.RunID], e)
		}
		for id, want := range runs {
			checkRun(t, id, got[id], want)
		}
		if len(got) != len(runs) {
			t.Errorf("sink holds runs %v, want %d runs", sortedkeys.Of(got), len(runs))
		}
	})
	t.Run("CancelledContext", func(t *testing.T) {
		s, _ := newSink(t)
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		if err := s.Append(cctx, gateway.TranscriptEntry{RunID: "run_1"}); !errors.Is(err, context.Canceled) {
			t.Errorf("Append(cancelled) = %v", err)
		}
	})
	t.Run("RefusesAForkedPosition", func(t *testing.T) {
		// A runtime taken over while its call still ran comes back with
		// the next position of its own chain: a chained entry at a
		// position the run already holds one at is refused, so the chain
		// cannot fork. Another run's position, and entries without a
		// chain hash, are not refused.
		s, entries := newSink(t)
		first := gateway.TranscriptEntry{RunID: "run_1", Seq: 0, Kind: "call", PrevHash: gateway.GenesisHash, EntryHash: "sha256:e1", ChainHash: "sha256:c1"}
		next := gateway.TranscriptEntry{RunID: "run_1", Seq: 1, Kind: "result", PrevHash: "sha256:c1", EntryHash: "sha256:e2", ChainHash: "sha256:c2"}
		for _, e := range []gateway.TranscriptEntry{first, next} {
			if err := s.Append(ctx, e); err != nil {
				t.Fatal(err)
			}
		}
		fork := next
		fork.EntryHash, fork.ChainHash = "sha256:e3", "sha256:c3"
		if err := s.Append(ctx, fork); err == nil {
			t.Error("a second chained entry at position 1 of run_1 was kept: the chain forked")
		}
		zero := first
		zero.ChainHash = "sha256:c4"
		if err := s.Append(ctx, zero); err == nil {
			t.Error("a second chained entry at position 0 of run_1 was kept: the chain forked")
		}
		other := first
		other.RunID = "run_2"
		if err := s.Append(ctx, other); err != nil {
			t.Errorf("run_2's first entry was refused: %v", err)
		}
		var got []string
		for _, e := range entries() {
			if e.RunID == "run_1" {
				got = append(got, e.ChainHash)
			}
		}
		if !slices.Equal(got, []string{"sha256:c1", "sha256:c2"}) {
			t.Errorf("run_1 holds chain hashes %v, want [sha256:c1 sha256:c2]", got)
		}
	})
}

// RunTranscriptReaderTests checks the TranscriptReader contract of a
// sink that reads back (newSink returns the sink and its reader, usually
// one value): RunEntries returns exactly the run's entries, in the
// order they were appended (so the run's chain verifies), as the caller's
// own slice; a run with no entries reads back empty, without error; a
// cancelled ctx is an error.
func RunTranscriptReaderTests(t *testing.T, newSink func(t *testing.T) (gateway.TranscriptSink, gateway.TranscriptReader)) {
	t.Helper()
	ctx := context.Background()
	t.Run("ReadsBackEachRunInOrder", func(t *testing.T) {
		s, r := newSink(t)
		runs := appendInterleaved(t, s, "run_a", "run_b")
		for id, want := range runs {
			got, err := r.RunEntries(ctx, id)
			if err != nil {
				t.Fatalf("RunEntries(%s) = %v", id, err)
			}
			checkRun(t, id, got, want)
		}
	})
	t.Run("UnknownRunIsEmpty", func(t *testing.T) {
		s, r := newSink(t)
		appendInterleaved(t, s, "run_a")
		got, err := r.RunEntries(ctx, "run_none")
		if err != nil || len(got) != 0 {
			t.Errorf("RunEntries(unknown run) = %d entries, %v; want none, no error", len(got), err)
		}
	})
	t.Run("ReturnsACopy", func(t *testing.T) {
		s, r := newSink(t)
		want := appendInterleaved(t, s, "run_a")["run_a"]
		got, err := r.RunEntries(ctx, "run_a")
		if err != nil || len(got) == 0 {
			t.Fatalf("RunEntries = %d entries, %v", len(got), err)
		}
		got[0] = gateway.TranscriptEntry{RunID: "run_a", Kind: "changed"}
		again, err := r.RunEntries(ctx, "run_a")
		if err != nil {
			t.Fatal(err)
		}
		checkRun(t, "run_a", again, want)
	})
	t.Run("CancelledContext", func(t *testing.T) {
		s, r := newSink(t)
		appendInterleaved(t, s, "run_a")
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		if _, err := r.RunEntries(cctx, "run_a"); !errors.Is(err, context.Canceled) {
			t.Errorf("RunEntries(cancelled) = %v", err)
		}
	})
}

// appendInterleaved appends a hash-chained transcript of a few calls and
// results for each run, the runs' entries interleaved, and returns each
// run's entries in the order appended.
func appendInterleaved(t *testing.T, s gateway.TranscriptSink, runIDs ...string) map[string][]gateway.TranscriptEntry {
	t.Helper()
	const perRun = 6
	runs := map[string][]gateway.TranscriptEntry{}
	prev := map[string]string{}
	for i := 0; i < perRun; i++ {
		for _, id := range runIDs {
			if i == 0 {
				prev[id] = gateway.GenesisHash
			}
			e := chainedEntry(t, id, i, prev[id])
			if err := s.Append(context.Background(), e); err != nil {
				t.Fatalf("Append(%s #%d) = %v", id, i, err)
			}
			prev[id] = e.ChainHash
			runs[id] = append(runs[id], e)
		}
	}
	return runs
}

// chainedEntry is entry seq of a run's transcript: a call when seq is
// even, its result when odd, chained to prev.
func chainedEntry(t *testing.T, runID string, seq int, prev string) gateway.TranscriptEntry {
	t.Helper()
	id := fmt.Sprintf("tool_%s_%d", runID, seq/2)
	e := gateway.TranscriptEntry{RunID: runID, Seq: seq, Kind: "call", PrevHash: prev}
	var body any
	if seq%2 == 0 {
		e.Call = &gateway.ToolCallEnvelope{EnvelopeVersion: gateway.CallEnvelopeVersion, ToolCallID: id, RunID: runID, TraceID: "trace_1",
			CapabilityID: "adp_x.lookup", Args: map[string]any{"n": float64(seq)}, PrincipalChain: []runcontext.Principal{{Kind: "user", ID: "usr_1"}},
			ApprovalModeRequested: runcontext.ReadOnly, ApprovalModeEffective: runcontext.ReadOnly, ApprovalModeHighest: runcontext.ReadOnly, EvidenceRefs: []string{}}
		body = e.Call
	} else {
		e.Kind = "result"
		e.Result = &gateway.ToolResultEnvelope{EnvelopeVersion: gateway.ResultEnvelopeVersion, ToolCallID: id, RunID: runID, TraceID: "trace_1",
			CapabilityID: "adp_x.lookup", Status: gateway.StatusOK, Output: map[string]any{"n": float64(seq)},
			Artifacts: []string{}, Citations: []gateway.Citation{}, Mutations: []string{}, RiskTags: []string{}}
		body = e.Result
	}
	h, err := canon.Digest(body)
	if err != nil {
		t.Fatal(err)
	}
	e.EntryHash, e.ChainHash = h, canon.DigestBytes([]byte(prev+h))
	return e
}

// checkRun compares a run's entries as read back with those appended, and
// verifies their chain.
func checkRun(t *testing.T, runID string, got, want []gateway.TranscriptEntry) {
	t.Helper()
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("run %s read back (-appended +read):\n%s", runID, diff)
		return
	}
	if _, err := gateway.VerifyTranscript(got); err != nil {
		t.Errorf("run %s: %v", runID, err)
	}
}
