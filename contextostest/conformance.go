package contextostest

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/compiler"
	"github.com/contextos/contextos/decision"
	"github.com/contextos/contextos/replay"
	"github.com/contextos/contextos/runcontext"
)

// RunCheckpointStoreTests is the conformance suite for CheckpointStore
// implementations. It checks that an unknown run is ErrNotFound; that
// Save stores a checkpoint opaquely (Load gives back RunID, Version and
// Data byte for byte, in a copy the caller may change) and advances its
// revision; that a save over a stale revision is ErrCheckpointConflict
// and stores nothing; that concurrent saves of different runs keep each;
// that a saved Lease is counted down (in real time: the store's clock
// must be the wall clock or a server's) and ends; that a cancelled
// context is refused with an error wrapping context.Canceled; and,
// through a Runtime using the store, that of many takeovers of one run
// whose runtime stopped, for batch, stream and long_running runs alike,
// exactly one continues it, the others are refused before doing anything,
// and the stopped runtime, come back, stops without recording anything;
// that a version-1 checkpoint (the encoding before checkpoints were
// versioned, from a fixture) still resumes and that a checkpoint of a
// version the runtime does not know is refused with a
// *contextos.CheckpointVersionError. A store that is a
// contextos.PendingIndex is checked to keep each save's Awaiting entry
// with it, atomically: listed by tenant and for every tenant, dropped by
// a save that awaits nothing, untouched by a refused save.
func RunCheckpointStoreTests(t *testing.T, newStore func(t *testing.T) contextos.CheckpointStore) {
	ctx := context.Background()
	cp := func(run string, data string) *contextos.Checkpoint {
		return &contextos.Checkpoint{RunID: run, Version: 1, Data: []byte(data)}
	}
	t.Run("unknown run", func(t *testing.T) {
		if _, err := newStore(t).Load(ctx, "run_x"); !errors.Is(err, contextos.ErrNotFound) {
			t.Errorf("Load = %v, want ErrNotFound", err)
		}
	})
	t.Run("save replaces, load copies", func(t *testing.T) {
		s := newStore(t)
		c := cp("run_1", "")
		for i := range 3 {
			// Data is opaque: not JSON, and not valid UTF-8.
			c.Version, c.Data = i+1, []byte(fmt.Sprintf("state %d \xff\x00", i))
			if err := s.Save(ctx, c); err != nil {
				t.Fatal(err)
			}
			if c.Revision != i+1 {
				t.Fatalf("after save %d, Revision = %d", i+1, c.Revision)
			}
		}
		c.Data[0] = 'X' // the store kept its own copy
		got, err := s.Load(ctx, "run_1")
		if err != nil {
			t.Fatal(err)
		}
		want := &contextos.Checkpoint{RunID: "run_1", Revision: 3, Version: 3, Data: []byte("state 2 \xff\x00")}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("Load (-want +got):\n%s", diff)
		}
		got.Data[0] = 'X'
		again, err := s.Load(ctx, "run_1")
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, again); diff != "" {
			t.Errorf("a loaded checkpoint shares memory with the store (-want +got):\n%s", diff)
		}
	})
	t.Run("stale revision conflicts", func(t *testing.T) {
		s := newStore(t)
		if err := s.Save(ctx, cp("run_1", "first")); err != nil {
			t.Fatal(err)
		}
		a, err := s.Load(ctx, "run_1")
		if err != nil {
			t.Fatal(err)
		}
		b, err := s.Load(ctx, "run_1")
		if err != nil {
			t.Fatal(err)
		}
		a.Data = []byte("second")
		if err := s.Save(ctx, a); err != nil {
			t.Fatalf("first save over the loaded revision: %v", err)
		}
		b.Data = []byte("lost")
		if err := s.Save(ctx, b); !errors.Is(err, contextos.ErrCheckpointConflict) {
			t.Errorf("second save over the same revision = %v, want ErrCheckpointConflict", err)
		}
		if b.Revision != 1 {
			t.Errorf("a refused save moved the caller's Revision to %d", b.Revision)
		}
		if err := s.Save(ctx, cp("run_1", "new")); !errors.Is(err, contextos.ErrCheckpointConflict) {
			t.Errorf("a new checkpoint over an existing run = %v, want ErrCheckpointConflict", err)
		}
		got, err := s.Load(ctx, "run_1")
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(&contextos.Checkpoint{RunID: "run_1", Revision: 2, Version: 1, Data: []byte("second")}, got); diff != "" {
			t.Errorf("after refused saves (-want +got):\n%s", diff)
		}
	})
	t.Run("pending index", func(t *testing.T) {
		s := newStore(t)
		idx, ok := s.(contextos.PendingIndex)
		if !ok {
			t.Skip("the store keeps no pending index (contextos.PendingIndex)")
		}
		pending := func(tenant string, want ...string) {
			t.Helper()
			got, err := idx.PendingRunIDs(ctx, tenant)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("PendingRunIDs(%q) (-want +got):\n%s", tenant, diff)
			}
		}
		awaiting := func(run, tenant string) *contextos.Checkpoint {
			c := cp(run, "paused")
			c.Awaiting = &contextos.AwaitedApproval{TenantID: tenant, GateID: "gate_refund"}
			return c
		}
		pending("")
		a, b, c := awaiting("run_a", "tenant_1"), awaiting("run_b", "tenant_2"), cp("run_c", "running")
		for _, x := range []*contextos.Checkpoint{b, c, a, awaiting("run_d", "tenant_1")} {
			if err := s.Save(ctx, x); err != nil {
				t.Fatal(err)
			}
		}
		pending("", "run_a", "run_b", "run_d")
		pending("tenant_1", "run_a", "run_d")
		pending("tenant_2", "run_b")
		pending("tenant_3")
		// The entry is not part of what Load gives back.
		if got, err := s.Load(ctx, "run_a"); err != nil || got.Awaiting != nil {
			t.Errorf("Load of an awaiting run: Awaiting = %v, %v; want nil", got.Awaiting, err)
		}
		// A save that no longer awaits drops the entry (a resumed run);
		// one that awaits adds it (a run that pauses).
		a.Awaiting, a.Data = nil, []byte("resumed")
		if err := s.Save(ctx, a); err != nil {
			t.Fatal(err)
		}
		c.Awaiting = &contextos.AwaitedApproval{TenantID: "tenant_2", GateID: "gate_refund"}
		if err := s.Save(ctx, c); err != nil {
			t.Fatal(err)
		}
		pending("", "run_b", "run_c", "run_d")
		pending("tenant_1", "run_d")
		pending("tenant_2", "run_b", "run_c")
		// A refused save changes the index no more than the checkpoint.
		stale := awaiting("run_a", "tenant_1")
		stale.Revision = 1
		if err := s.Save(ctx, stale); !errors.Is(err, contextos.ErrCheckpointConflict) {
			t.Fatalf("save over a stale revision = %v, want ErrCheckpointConflict", err)
		}
		stale = cp("run_b", "over")
		stale.Revision = 0
		if err := s.Save(ctx, stale); !errors.Is(err, contextos.ErrCheckpointConflict) {
			t.Fatalf("new checkpoint over an existing run = %v, want ErrCheckpointConflict", err)
		}
		pending("", "run_b", "run_c", "run_d")
		// A run moving to another tenant's entry (never in practice, but
		// the entry is the last save's) leaves the first tenant's list.
		d, err := s.Load(ctx, "run_d")
		if err != nil {
			t.Fatal(err)
		}
		d.Awaiting = &contextos.AwaitedApproval{TenantID: "tenant_2", GateID: "gate_other"}
		if err := s.Save(ctx, d); err != nil {
			t.Fatal(err)
		}
		pending("tenant_1")
		pending("tenant_2", "run_b", "run_c", "run_d")
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		if _, err := idx.PendingRunIDs(cctx, ""); !errors.Is(err, context.Canceled) {
			t.Errorf("PendingRunIDs with a cancelled context = %v, want context.Canceled", err)
		}
	})
	t.Run("concurrent runs", func(t *testing.T) {
		s := newStore(t)
		var wg sync.WaitGroup
		for i := range 20 {
			wg.Go(func() {
				if err := s.Save(ctx, cp(fmt.Sprintf("run_%d", i), fmt.Sprint(i))); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		for i := range 20 {
			got, err := s.Load(ctx, fmt.Sprintf("run_%d", i))
			if err != nil {
				t.Errorf("run_%d: %v", i, err)
				continue
			}
			if diff := cmp.Diff(&contextos.Checkpoint{RunID: fmt.Sprintf("run_%d", i), Revision: 1, Version: 1, Data: []byte(fmt.Sprint(i))}, got); diff != "" {
				t.Errorf("run_%d (-want +got):\n%s", i, diff)
			}
		}
	})
	t.Run("cancelled context", func(t *testing.T) {
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		s := newStore(t)
		if err := s.Save(cctx, cp("run_1", "x")); !errors.Is(err, context.Canceled) {
			t.Errorf("Save with a cancelled context = %v, want context.Canceled", err)
		}
		if _, err := s.Load(cctx, "run_1"); !errors.Is(err, context.Canceled) {
			t.Errorf("Load with a cancelled context = %v, want context.Canceled", err)
		}
	})
	t.Run("lease", func(t *testing.T) {
		s := newStore(t)
		c := cp("run_1", "claimed")
		c.Lease = time.Hour
		if err := s.Save(ctx, c); err != nil {
			t.Fatal(err)
		}
		got, err := s.Load(ctx, "run_1")
		if err != nil {
			t.Fatal(err)
		}
		if got.Lease <= 59*time.Minute || got.Lease > time.Hour {
			t.Errorf("Load after a save with a 1 h lease: Lease = %v, want just under 1 h", got.Lease)
		}
		// A save without a lease gives the claim up.
		got.Lease = 0
		if err := s.Save(ctx, got); err != nil {
			t.Fatal(err)
		}
		if again, err := s.Load(ctx, "run_1"); err != nil || again.Lease != 0 {
			t.Errorf("Load after a save without a lease: Lease = %v, %v; want 0", again.Lease, err)
		}
		// A refused save leaves the stored lease as it was.
		stale := cp("run_1", "stale")
		stale.Revision, stale.Lease = 1, time.Hour
		if err := s.Save(ctx, stale); !errors.Is(err, contextos.ErrCheckpointConflict) {
			t.Fatalf("stale save = %v", err)
		}
		if again, err := s.Load(ctx, "run_1"); err != nil || again.Lease != 0 {
			t.Errorf("a refused save set the lease: %v, %v", again.Lease, err)
		}
		// A short lease ends.
		short := cp("run_2", "claimed")
		short.Lease = 150 * time.Millisecond
		if err := s.Save(ctx, short); err != nil {
			t.Fatal(err)
		}
		time.Sleep(400 * time.Millisecond)
		if again, err := s.Load(ctx, "run_2"); err != nil || again.Lease != 0 {
			t.Errorf("Load after the lease ended: Lease = %v, %v; want 0", again.Lease, err)
		}
	})
	t.Run("one takeover wins", func(t *testing.T) {
		for _, mode := range []string{"batch", "stream", "long_running"} {
			t.Run(mode, func(t *testing.T) { testOneTakeoverWins(t, newStore(t), mode) })
		}
	})
	t.Run("version 1 resumes", func(t *testing.T) {
		s := newStore(t)
		data := fixture(t, "checkpoint.json")
		const runID = "run_a1b2c3d4e5f60718"
		if err := s.Save(ctx, &contextos.Checkpoint{RunID: runID, Version: 1, Data: data}); err != nil {
			t.Fatal(err)
		}
		h := checkpointHarness(t, s)
		// The run's runtime died after claiming it: a takeover continues
		// it from its first turn.
		res, err := h.Runtime.Resume(ctx, runID, contextos.ResumeInput{Takeover: true})
		if err != nil {
			t.Fatalf("Resume of a version-1 checkpoint: %v", err)
		}
		if res.RunID != runID || res.Status != decision.Decided || res.Record.Outcome != "denied" {
			t.Errorf("Resume = run %s %s %q, want run %s DECIDED \"denied\"", res.RunID, res.Status, res.Record.Outcome, runID)
		}
		AssertCalls(t, h.Adapter("adp_orders"), "lookup", 1)
		got, err := s.Load(ctx, runID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Version == 1 || got.Revision < 2 {
			t.Errorf("after the resume the store holds version %d at revision %d, want the runtime's current version over revision 1", got.Version, got.Revision)
		}
	})
	t.Run("unknown version refused", func(t *testing.T) {
		s := newStore(t)
		const runID, future = "run_a1b2c3d4e5f60718", 1 << 20
		if err := s.Save(ctx, &contextos.Checkpoint{RunID: runID, Version: future, Data: fixture(t, "checkpoint.json")}); err != nil {
			t.Fatal(err)
		}
		h := checkpointHarness(t, s)
		_, err := h.Runtime.Resume(ctx, runID, contextos.ResumeInput{Takeover: true})
		var ve *contextos.CheckpointVersionError
		if !errors.Is(err, contextos.ErrCheckpointVersion) || !errors.As(err, &ve) {
			t.Fatalf("Resume of a version-%d checkpoint = %v, want a *CheckpointVersionError", future, err)
		}
		if ve.Version != future || !slices.Contains(ve.Supported, 1) {
			t.Errorf("CheckpointVersionError = %+v, want version %d and version 1 supported", ve, future)
		}
		AssertCalls(t, h.Adapter("adp_orders"), "lookup", 0)
	})
}

// stallingPlanner looks the order up, then denies the refund; its first
// plan waits until released, as a runtime that stopped (a process frozen
// or killed) while planning.
type stallingPlanner struct {
	entered, release chan struct{}
	stalled          atomic.Bool
}

func (p *stallingPlanner) Plan(_ context.Context, req *contextos.PlanRequest) (*contextos.Plan, error) {
	if !p.stalled.Swap(true) {
		close(p.entered)
		<-p.release
	}
	if req.Turn == 0 {
		return &contextos.Plan{Steps: []contextos.Step{{CapabilityID: "adp_orders.lookup", Args: map[string]any{"order_id": "ord_881"}}}}, nil
	}
	return &contextos.Plan{Decision: &contextos.DecisionProposal{DecisionKey: "support.refund.execute", Outcome: "denied", Confidence: 0.9,
		SubjectIDs: []string{"order:ord_881"}, Rationale: "the order is not eligible"}}, nil
}

// testOneTakeoverWins: a runtime claims a run (mode batch, stream or
// long_running) and stops while planning; once its claim's lease has
// lapsed (on the store's clock), eight takeovers at once: exactly one
// continues the run and ends it, every other is refused before doing
// anything (ErrLeaseHeld, or ErrCheckpointConflict when it lost the race
// to claim). The stopped runtime, come back, finds the run taken and
// stops without recording anything: the run has one terminal record.
func testOneTakeoverWins(t *testing.T, s contextos.CheckpointStore, mode string) {
	ctx := context.Background()
	const ttl = 400 * time.Millisecond
	planner := &stallingPlanner{entered: make(chan struct{}), release: make(chan struct{})}
	h := New(t, planner, [][]byte{fixture(t, "pack.json")}, &Options{Now: time.Now, Runtime: contextos.Options{Checkpoints: s, HeartbeatTTL: ttl, ReplaySampleRate: 1}})
	// The takeover that continues the run holds it (in its lookup) until
	// every other one was refused, so they all meet its claim or lose
	// the race to claim.
	const takers = 8
	refused := make(chan struct{}, takers)
	h.Adapter("adp_orders").On("lookup").When(func(map[string]any) bool {
		deadline := time.After(5 * time.Second)
		for range takers - 1 {
			select {
			case <-refused:
			case <-deadline:
				return false
			}
		}
		return false
	})
	h.Adapter("adp_orders").On("lookup").ReturnOutput(map[string]any{"status": "delivered"})
	var st struct {
		Request *runcontext.InvokeRequest `json:"request"`
		Run     *runcontext.RunContext    `json:"run_context"`
	}
	if err := json.Unmarshal(fixture(t, "checkpoint.json"), &st); err != nil {
		t.Fatal(err)
	}
	req, rc := st.Request, st.Run
	rc.RunID = "run_takeover_" + mode
	if mode == "long_running" {
		req.Mode = runcontext.ModeLongRunning
		rc.RunBudget.WallClockMS = time.Hour.Milliseconds()
	}
	stalled := make(chan error, 1)
	go func() {
		if mode == "stream" {
			var err error
			for _, e := range h.Runtime.Stream(ctx, req, rc) {
				err = e
			}
			stalled <- err
			return
		}
		_, err := h.Runtime.Invoke(ctx, req, rc)
		stalled <- err
	}()
	<-planner.entered
	time.Sleep(ttl + 200*time.Millisecond)
	errs := make([]error, takers)
	results := make([]*contextos.Result, takers)
	var wg sync.WaitGroup
	for i := range takers {
		wg.Go(func() {
			defer func() {
				if errs[i] != nil {
					refused <- struct{}{}
				}
			}()
			if mode == "stream" {
				for e, err := range h.Runtime.ResumeStream(ctx, rc.RunID, contextos.ResumeInput{Takeover: true}) {
					if err != nil {
						errs[i] = err
					} else if e.Kind == contextos.EventResult {
						results[i] = e.Final
					}
				}
				return
			}
			results[i], errs[i] = h.Runtime.Resume(ctx, rc.RunID, contextos.ResumeInput{Takeover: true})
		})
	}
	wg.Wait()
	won := 0
	for i, err := range errs {
		switch {
		case err == nil && results[i] != nil:
			won++
			if results[i].Status != decision.Decided || results[i].Record.Outcome != "denied" {
				t.Errorf("the takeover that continued the run ended %s %q, want DECIDED \"denied\"", results[i].Status, results[i].Record.Outcome)
			}
		case errors.Is(err, contextos.ErrLeaseHeld), errors.Is(err, contextos.ErrCheckpointConflict):
		default:
			t.Errorf("takeover %d = %v, want the run's result, ErrLeaseHeld or ErrCheckpointConflict", i, err)
		}
	}
	if won != 1 {
		t.Errorf("%d of %d takeovers continued the run, want exactly 1", won, takers)
	}
	close(planner.release)
	if err := <-stalled; !errors.Is(err, contextos.ErrRunInProgress) {
		t.Errorf("the stopped runtime, come back = %v, want ErrRunInProgress", err)
	}
	recs, err := h.Decisions.List(ctx, decision.Filter{RunID: rc.RunID})
	if err != nil {
		t.Fatal(err)
	}
	terminal := 0
	for _, r := range recs {
		if r.Status != decision.Closed && r.Status != decision.InFlight && r.Status != decision.Deferred {
			terminal++
		}
	}
	if terminal != 1 {
		t.Errorf("the run has %d terminal records, want 1", terminal)
	}
	if err := h.Decisions.Verify(ctx); err != nil {
		t.Error(err)
	}
	if n := h.ReplayAll(); n == 0 {
		t.Error("the run captured no replay packet")
	}
}

// checkpointFixture holds a version-1 checkpoint and the pack its run ran
// under (testdata/checkpoint-v1/README.md).
//
//go:embed testdata/checkpoint-v1/checkpoint.json testdata/checkpoint-v1/pack.json
var checkpointFixture embed.FS

func fixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := checkpointFixture.ReadFile("testdata/checkpoint-v1/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// checkpointHarness is a runtime over store, with the fixture's pack and a
// planner that looks the order up and then denies the refund.
func checkpointHarness(t *testing.T, store contextos.CheckpointStore) *Harness {
	t.Helper()
	planner := NewPlanner(
		&contextos.Plan{Steps: []contextos.Step{{CapabilityID: "adp_orders.lookup", Args: map[string]any{"order_id": "ord_881"}}}},
		&contextos.Plan{Decision: &contextos.DecisionProposal{DecisionKey: "support.refund.execute", Outcome: "denied", Confidence: 0.9,
			SubjectIDs: []string{"order:ord_881"}, Rationale: "the order is not eligible"}})
	h := New(t, planner, [][]byte{fixture(t, "pack.json")}, &Options{Runtime: contextos.Options{Checkpoints: store}})
	h.Adapter("adp_orders").On("lookup").ReturnOutput(map[string]any{"status": "delivered"})
	return h
}

// RunPacketStoreTests is the conformance suite for PacketStore
// implementations: an unknown id wraps ErrNotFound; Get returns what Save
// stored, equal member for member, as an independent copy; saving a
// packet id again replaces the packet; a cancelled context is refused
// with an error wrapping context.Canceled.
func RunPacketStoreTests(t *testing.T, newStore func(t *testing.T) contextos.PacketStore) {
	ctx := context.Background()
	packet := func() *replay.Packet {
		return &replay.Packet{ReplayPacketID: "rp_1", TraceID: "t", SourceKind: replay.SourceDecisionRecord, SourceRef: "dr_1", ContextPackRef: "a@1.0.0",
			CompiledContextHash: "sha256:x", SideEffectPolicy: replay.TranscriptOnly, Expected: replay.Expected{Status: "DECIDED"}, PackRefs: []string{"a@1.0.0"},
			PackHashes: map[string]string{"a@1.0.0": "sha256:a"}, Invoke: json.RawMessage(`{"request_id":"req_1"}`), RunContext: json.RawMessage(`{"run_id":"run_1"}`),
			PlannerOutput: []json.RawMessage{json.RawMessage(`{"steps":[]}`)}, Clock: []time.Time{FixedTime()}, Record: json.RawMessage(`{"record_id":"dr_1"}`)}
	}
	// A store may give an empty list back as nil or as empty.
	equal := cmpopts.EquateEmpty()
	t.Run("unknown id", func(t *testing.T) {
		if _, err := newStore(t).Get(ctx, "rp_x"); !errors.Is(err, contextos.ErrNotFound) {
			t.Errorf("Get = %v, want ErrNotFound", err)
		}
	})
	t.Run("round trip", func(t *testing.T) {
		s := newStore(t)
		p := packet()
		if err := s.Save(ctx, p); err != nil {
			t.Fatal(err)
		}
		p.PackRefs[0] = "changed after save"
		got, err := s.Get(ctx, "rp_1")
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(packet(), got, equal); diff != "" {
			t.Fatalf("Get (-saved +got):\n%s", diff)
		}
		got.PackRefs[0] = "changed"
		got.PackHashes["a@1.0.0"] = "changed"
		again, err := s.Get(ctx, "rp_1")
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(packet(), again, equal); diff != "" {
			t.Errorf("a packet read back shares state with the store (-saved +got):\n%s", diff)
		}
	})
	t.Run("save replaces", func(t *testing.T) {
		s := newStore(t)
		if err := s.Save(ctx, packet()); err != nil {
			t.Fatal(err)
		}
		next := packet()
		next.SourceRef = "dr_2"
		if err := s.Save(ctx, next); err != nil {
			t.Fatal(err)
		}
		got, err := s.Get(ctx, "rp_1")
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(next, got, equal); diff != "" {
			t.Errorf("Get after a second save (-saved +got):\n%s", diff)
		}
	})
	t.Run("cancelled context", func(t *testing.T) {
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		s := newStore(t)
		if err := s.Save(cctx, packet()); !errors.Is(err, context.Canceled) {
			t.Errorf("Save with a cancelled context = %v, want context.Canceled", err)
		}
		if _, err := s.Get(cctx, "rp_1"); !errors.Is(err, context.Canceled) {
			t.Errorf("Get with a cancelled context = %v, want context.Canceled", err)
		}
	})
}

// RunMemoryStoreTests is the conformance suite for MemoryStore
// implementations. newStore returns a store seeded with items and a
// function that reads back, through the store's own storage, every
// proposal it has kept. The suite checks that Recall returns the promoted
// items and only those (never a candidate or a captured item, nor a
// proposal); that every proposal Propose accepts is kept, concurrent
// ones included, member for member; and that a cancelled context is
// refused by both with an error wrapping context.Canceled.
func RunMemoryStoreTests(t *testing.T, newStore func(t *testing.T, items []compiler.MemoryItem) (store contextos.MemoryStore, proposals func(ctx context.Context) ([]contextos.MemoryProposal, error))) {
	ctx := context.Background()
	items := []compiler.MemoryItem{
		{MemoryRef: "mem_1", Content: "prefers email", State: compiler.MemoryPromoted, Confidence: 0.97},
		{MemoryRef: "mem_2", Content: "asked about refunds", State: compiler.MemoryCandidate, Confidence: 0.6},
		{MemoryRef: "mem_3", Content: "said hello", State: compiler.MemoryCapture, Confidence: 0.5},
		{MemoryRef: "mem_4", Content: "speaks Hindi", Tier: "profile", State: compiler.MemoryPromoted, Confidence: 0.9},
	}
	promoted := []compiler.MemoryItem{items[0], items[3]}
	byRef := cmpopts.SortSlices(func(a, b compiler.MemoryItem) bool { return a.MemoryRef < b.MemoryRef })
	t.Run("recall returns the promoted items", func(t *testing.T) {
		s, _ := newStore(t, items)
		got, err := s.Recall(ctx, compiler.MemoryQuery{TenantID: "tenant_1"})
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(promoted, got, byRef); diff != "" {
			t.Errorf("Recall (-promoted +got):\n%s", diff)
		}
	})
	t.Run("proposals are kept, not recalled", func(t *testing.T) {
		s, kept := newStore(t, items)
		ps := []contextos.MemoryProposal{
			{WriteClass: "preference", Content: "prefers SMS", Confidence: 0.9, SubjectIDs: []string{"customer:cus_77"}, EvidenceRefs: []string{"kg:c#1"}, RunID: "run_1"},
			{WriteClass: "decision_outcome", Content: "refund approved", Confidence: 0.8, PII: true, RunID: "run_1"},
		}
		if err := s.Propose(ctx, ps); err != nil {
			t.Fatal(err)
		}
		got, err := kept(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(ps, got); diff != "" {
			t.Errorf("kept proposals (-proposed +kept):\n%s", diff)
		}
		recalled, err := s.Recall(ctx, compiler.MemoryQuery{TenantID: "tenant_1"})
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(promoted, recalled, byRef); diff != "" {
			t.Errorf("Recall after proposals (-promoted +got): a proposal is not a promoted memory:\n%s", diff)
		}
	})
	t.Run("concurrent proposals", func(t *testing.T) {
		s, kept := newStore(t, nil)
		var wg sync.WaitGroup
		for i := range 10 {
			wg.Go(func() {
				if err := s.Propose(ctx, []contextos.MemoryProposal{{WriteClass: "preference", Content: fmt.Sprint("x", i), Confidence: 0.9}}); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		got, err := kept(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var want []contextos.MemoryProposal
		for i := range 10 {
			want = append(want, contextos.MemoryProposal{WriteClass: "preference", Content: fmt.Sprint("x", i), Confidence: 0.9})
		}
		if diff := cmp.Diff(want, got, cmpopts.SortSlices(func(a, b contextos.MemoryProposal) bool { return a.Content < b.Content })); diff != "" {
			t.Errorf("kept proposals (-proposed +kept):\n%s", diff)
		}
	})
	t.Run("cancelled context", func(t *testing.T) {
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		s, kept := newStore(t, items)
		if _, err := s.Recall(cctx, compiler.MemoryQuery{}); !errors.Is(err, context.Canceled) {
			t.Errorf("Recall with a cancelled context = %v, want context.Canceled", err)
		}
		if err := s.Propose(cctx, []contextos.MemoryProposal{{WriteClass: "preference", Content: "x"}}); !errors.Is(err, context.Canceled) {
			t.Errorf("Propose with a cancelled context = %v, want context.Canceled", err)
		}
		if got, err := kept(ctx); err != nil || len(got) != 0 {
			t.Errorf("after a refused Propose the store keeps %+v (%v), want nothing", got, err)
		}
	})
}
