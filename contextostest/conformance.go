package contextostest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/compiler"
	"github.com/contextos/contextos/replay"
	"github.com/contextos/contextos/runcontext"
)

// RunCheckpointStoreTests is the conformance suite for CheckpointStore
// implementations: an unknown run is ErrNoCheckpoint; Save replaces the
// run's checkpoint, advancing its revision, and Load returns an
// independent copy of the last one; a save over a stale revision is
// ErrCheckpointConflict;
// concurrent saves of different runs keep each; a cancelled context is
// refused.
func RunCheckpointStoreTests(t *testing.T, newStore func(t *testing.T) contextos.CheckpointStore) {
	ctx := context.Background()
	cp := func(run string, turn int) *contextos.Checkpoint {
		return &contextos.Checkpoint{RunID: run, Turn: turn, Request: &runcontext.InvokeRequest{RequestID: "req_1", Mode: runcontext.ModeBatch}, Run: &runcontext.RunContext{RunID: run, SafetyMode: runcontext.ReadOnly},
			StartedAt: "2026-05-04T09:31:00Z", Plans: []*contextos.Plan{{Steps: []contextos.Step{{CapabilityID: "a.b", Args: map[string]any{"k": "v"}}}}}}
	}
	t.Run("unknown run", func(t *testing.T) {
		if _, err := newStore(t).Load(ctx, "run_x"); !errors.Is(err, contextos.ErrNoCheckpoint) {
			t.Errorf("Load = %v, want ErrNoCheckpoint", err)
		}
	})
	t.Run("save replaces, load copies", func(t *testing.T) {
		s := newStore(t)
		c := cp("run_1", 0)
		for turn := range 3 {
			c.Turn = turn
			if err := s.Save(ctx, c); err != nil {
				t.Fatal(err)
			}
			if c.Rev != turn+1 {
				t.Fatalf("after save %d, Rev = %d", turn+1, c.Rev)
			}
		}
		got, err := s.Load(ctx, "run_1")
		if err != nil || got.Turn != 2 || got.Rev != 3 || got.Plans[0].Steps[0].Args["k"] != "v" || got.Run.RunID != "run_1" {
			t.Fatalf("Load = %+v, %v", got, err)
		}
		got.Plans[0].Steps[0].Args["k"] = "changed"
		again, _ := s.Load(ctx, "run_1")
		if again.Plans[0].Steps[0].Args["k"] != "v" {
			t.Error("a loaded checkpoint shares state with the store")
		}
	})
	t.Run("stale revision conflicts", func(t *testing.T) {
		s := newStore(t)
		if err := s.Save(ctx, cp("run_1", 0)); err != nil {
			t.Fatal(err)
		}
		a, _ := s.Load(ctx, "run_1")
		b, _ := s.Load(ctx, "run_1")
		if err := s.Save(ctx, a); err != nil {
			t.Fatalf("first save over the loaded revision: %v", err)
		}
		if err := s.Save(ctx, b); !errors.Is(err, contextos.ErrCheckpointConflict) {
			t.Errorf("second save over the same revision = %v, want ErrCheckpointConflict", err)
		}
		if err := s.Save(ctx, cp("run_1", 9)); !errors.Is(err, contextos.ErrCheckpointConflict) {
			t.Errorf("a new checkpoint over an existing run = %v, want ErrCheckpointConflict", err)
		}
		if got, _ := s.Load(ctx, "run_1"); got.Rev != 2 {
			t.Errorf("Rev = %d after a refused save, want 2", got.Rev)
		}
	})
	t.Run("concurrent runs", func(t *testing.T) {
		s := newStore(t)
		var wg sync.WaitGroup
		for i := range 20 {
			wg.Go(func() {
				if err := s.Save(ctx, cp(fmt.Sprintf("run_%d", i), i)); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		for i := range 20 {
			if got, err := s.Load(ctx, fmt.Sprintf("run_%d", i)); err != nil || got.Turn != i {
				t.Errorf("run_%d: %+v, %v", i, got, err)
			}
		}
	})
	t.Run("cancelled context", func(t *testing.T) {
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		if err := newStore(t).Save(cctx, cp("run_1", 0)); err == nil {
			t.Error("Save with a cancelled context succeeded")
		}
	})
}

// RunPacketStoreTests is the conformance suite for PacketStore
// implementations: an unknown id wraps ErrNotFound; Get returns what Save
// stored, as an independent copy; a cancelled context is refused.
func RunPacketStoreTests(t *testing.T, newStore func(t *testing.T) contextos.PacketStore) {
	ctx := context.Background()
	p := &replay.Packet{ReplayPacketID: "rp_1", TraceID: "t", SourceKind: replay.SourceDecisionRecord, SourceRef: "dr_1", ContextPackRef: "a@1.0.0",
		CompiledContextHash: "sha256:x", SideEffectPolicy: replay.TranscriptOnly, Expected: replay.Expected{Status: "DECIDED"}, PackRefs: []string{"a@1.0.0"}}
	t.Run("unknown id", func(t *testing.T) {
		if _, err := newStore(t).Get(ctx, "rp_x"); !errors.Is(err, contextos.ErrNotFound) {
			t.Errorf("Get = %v, want ErrNotFound", err)
		}
	})
	t.Run("round trip", func(t *testing.T) {
		s := newStore(t)
		if err := s.Save(ctx, p); err != nil {
			t.Fatal(err)
		}
		got, err := s.Get(ctx, "rp_1")
		if err != nil || got.SourceRef != "dr_1" || got.Expected.Status != "DECIDED" || len(got.PackRefs) != 1 {
			t.Fatalf("Get = %+v, %v", got, err)
		}
		got.PackRefs[0] = "changed"
		again, _ := s.Get(ctx, "rp_1")
		if again.PackRefs[0] != "a@1.0.0" {
			t.Error("a packet read back shares state with the store")
		}
	})
	t.Run("cancelled context", func(t *testing.T) {
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		if err := newStore(t).Save(cctx, p); err == nil {
			t.Error("Save with a cancelled context succeeded")
		}
	})
}

// RunMemoryStoreTests is the conformance suite for MemoryStore
// implementations seeded with items: Recall returns them; Propose accepts
// proposals concurrently; a cancelled context is refused by both.
func RunMemoryStoreTests(t *testing.T, newStore func(t *testing.T, items []compiler.MemoryItem) contextos.MemoryStore) {
	ctx := context.Background()
	items := []compiler.MemoryItem{{MemoryRef: "mem_1", Content: "prefers email", State: compiler.MemoryPromoted, Confidence: 0.97}}
	t.Run("recall", func(t *testing.T) {
		got, err := newStore(t, items).Recall(ctx, compiler.MemoryQuery{TenantID: "tenant_1"})
		if err != nil || len(got) != 1 || got[0].MemoryRef != "mem_1" {
			t.Errorf("Recall = %+v, %v", got, err)
		}
	})
	t.Run("concurrent proposals", func(t *testing.T) {
		s := newStore(t, nil)
		var wg sync.WaitGroup
		for range 10 {
			wg.Go(func() {
				if err := s.Propose(ctx, []contextos.MemoryProposal{{WriteClass: "preference", Content: "x", Confidence: 0.9}}); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
	})
	t.Run("cancelled context", func(t *testing.T) {
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		s := newStore(t, items)
		if _, err := s.Recall(cctx, compiler.MemoryQuery{}); err == nil {
			t.Error("Recall with a cancelled context succeeded")
		}
		if err := s.Propose(cctx, nil); err == nil {
			t.Error("Propose with a cancelled context succeeded")
		}
	})
}
