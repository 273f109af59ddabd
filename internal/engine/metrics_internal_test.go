package engine

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/contextos/contextos/compiler"
	"github.com/contextos/contextos/decision"
	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/internal/opmetrics"
	"github.com/contextos/contextos/pack"
	"github.com/contextos/contextos/replay"
	"github.com/contextos/contextos/runcontext"
)

func TestErrorTypeIsAClosedSet(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{fmt.Errorf("%w: ctxpack.support", pack.ErrUnpinnedRef), "pack_unpinned"},
		{fmt.Errorf("%w: ctxpack.x@1.0.0", pack.ErrNotFound), "pack_not_found"},
		{fmt.Errorf("%w: key kid_1", pack.ErrSignature), "pack_signature"},
		{fmt.Errorf("%w: runtime >=9.0.0", pack.ErrIncompatible), "pack_incompatible"},
		{&pack.StateError{Ref: "ctxpack.support@1.0.0", State: pack.StateRevoked}, "pack_not_usable"},
		{&compiler.Error{Stage: 3, Kind: compiler.ErrInput, Err: &compiler.OverlayVersionError{PackID: "p"}}, "overlay_version"},
		{&compiler.Error{Stage: 2, Kind: compiler.ErrTenant}, "tenant_mismatch"},
		{&compiler.Error{Stage: 4, Kind: compiler.ErrOntology}, "ontology"},
		{&compiler.Error{Stage: 1, Kind: compiler.ErrIntent}, "intent"},
		{&compiler.Error{Stage: 5, Kind: compiler.ErrPolicy}, "policy"},
		{&compiler.Error{Stage: 7, Kind: compiler.ErrEvidence}, "evidence"},
		{&compiler.Error{Stage: 8, Kind: compiler.ErrBudget}, "budget_exceeded"},
		{&runcontext.BudgetError{Dimension: runcontext.DimWallClock}, "budget_exceeded"},
		{&compiler.Error{Stage: 9, Kind: compiler.ErrInput}, "compile_input"},
		{&runcontext.ClaimError{Field: "identity_claim", Reason: "missing"}, "identity_claim"},
		{&PanicError{Plugin: "tokenizer"}, "panic"},
		{fmt.Errorf("claim: %w", ErrCheckpointConflict), "checkpoint_conflict"},
		{context.Canceled, "canceled"},
		{context.DeadlineExceeded, "timeout"},
		{errors.New("store: password=hunter2 refused"), "_OTHER"},
	} {
		if got := errorType(tc.err); got != tc.want {
			t.Errorf("errorType(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}

// A stop's reason begins with its kind's word, and a reason read back
// from a packet has the kind it began with (planner_failed for any other
// text), so the span label of a replayed stop is the live run's.
func TestStopKinds(t *testing.T) {
	for _, k := range stopKinds() {
		s := stopped(k, "detail")
		if s.kind != k || s.why != string(k)+": detail" || stopKindOf(s.why) != k {
			t.Errorf("stopped(%s) = %+v, kind read back %s", k, s, stopKindOf(s.why))
		}
	}
	for _, tc := range []struct {
		why  string
		want stopKind
	}{
		{"budget_exceeded: tool_calls (tool-call budget exhausted)", stopBudget},
		{"planner_failed: usage_unknown: the provider did not report the turn's usage", stopPlanner},
		{"invalid_usage: the planner reported -1 tokens", stopInvalidUsage},
		{"Secret: sk-live-123", stopPlanner},
		{"", stopPlanner},
	} {
		if got := stopKindOf(tc.why); got != tc.want {
			t.Errorf("stopKindOf(%q) = %q, want %q", tc.why, got, tc.want)
		}
	}
	if (stop{}).none() != true || stopped(stopBudget, "x").none() {
		t.Error("none() is not the zero stop")
	}
}

// observeAll calls every recording hook of the runtime once.
func observeAll(ctx context.Context, r *run) {
	start := r.rt.compileStart(ctx)
	r.observeCompile(ctx, start, nil, true)
	r.observeCompile(ctx, start, pack.ErrNotFound, true)
	r.observeCall(ctx, &gateway.ToolResultEnvelope{CapabilityID: "adp_orders.lookup", Status: gateway.StatusBlocked})
	r.observeGuardrailRefusal(ctx)
	r.observeRecord(ctx, &decision.Record{Status: decision.Decided})
	r.rt.observeReplay(ctx, &replay.Packet{PackRefs: []string{"p@1.0.0"}}, &replay.Report{Status: replay.ReplayEqual})
}

// With the default (no-op) meter provider the runtime's hooks return at
// once: they read no clock, build no label and allocate nothing.
func TestDisabledMetricsCostNothing(t *testing.T) {
	m, err := opmetrics.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	reads := 0
	r := &run{rt: &Runtime{metrics: m, opts: Options{Now: func() time.Time { reads++; return time.Time{} }}}}
	ctx := context.Background()
	if n := testing.AllocsPerRun(100, func() { observeAll(ctx, r) }); n != 0 {
		t.Errorf("%v allocations per call of every hook, want 0", n)
	}
	if reads != 0 {
		t.Errorf("the clock was read %d times for disabled metrics", reads)
	}
}

func BenchmarkObserveDisabled(b *testing.B) {
	m, err := opmetrics.New(nil)
	if err != nil {
		b.Fatal(err)
	}
	r := &run{rt: &Runtime{metrics: m, opts: Options{Now: time.Now}}}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		observeAll(ctx, r)
	}
}
