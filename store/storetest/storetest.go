// Package storetest is the conformance suite for durable stores: RunTests
// runs every store suite of the SDK (checkpoints, packets, memory,
// decision records, idempotency, approvals, transcripts, pack registry)
// against a store package, each case on a fresh database, and then the
// cases durability adds — what one handle wrote, a second handle on the
// same database (another process, or the same one after a restart) reads
// back, and the promises that must hold across handles (one revision
// wins, one chain, one claim, one use of an approval, one transcript
// position per run), and whose clock leases are counted on (LeaseClock).
// store/sqlite and store/postgres pass it.
package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/compiler"
	"github.com/contextos/contextos/contextostest"
	"github.com/contextos/contextos/decision"
	"github.com/contextos/contextos/decision/decisiontest"
	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/gateway/gatewaytest"
	"github.com/contextos/contextos/internal/fixture"
	"github.com/contextos/contextos/pack"
	"github.com/contextos/contextos/pack/packtest"
	"github.com/contextos/contextos/replay"
)

// Stores is what a durable store package's open store offers.
type Stores interface {
	Checkpoints() contextos.ListingCheckpointStore
	Packets() contextos.PacketStore
	Records() decision.Store
	Idempotency() gateway.IdempotencyStore
	Approvals() gateway.ApprovalLog
	Transcripts() contextos.TranscriptStore
	Memory() contextos.MemoryStore
	PutMemory(ctx context.Context, tenantID string, items ...compiler.MemoryItem) error
	Proposals(ctx context.Context) ([]contextos.MemoryProposal, error)
	Registry(opts *pack.ValidateOptions) pack.Registry
	Close() error
}

// Options are the settings a case opens a handle with.
type Options struct {
	// Now is the handle's clock (zero: the store's default).
	Now func() time.Time
	// ClaimTTL is the handle's idempotency claim lease (zero: default).
	ClaimTTL time.Duration
}

// Opener opens a new handle on one database; the suite closes it.
type Opener func(t *testing.T, o Options) Stores

// LeaseClock is whose clock a store counts leases on: idempotency
// claims, and the claim of a runtime continuing a run (the checkpoint's
// Lease).
type LeaseClock int

const (
	// HostClock counts leases on the handle's clock (Options.Now): the
	// processes sharing the database must read one clock (SQLite: they
	// share a host).
	HostClock LeaseClock = iota + 1
	// ServerClock counts leases on the database server's clock: a
	// handle's clock, however far off, neither ends a live claim nor
	// keeps a lapsed one (PostgreSQL).
	ServerClock
)

// RunTests runs the suite. newDB returns an opener for a fresh, empty
// database; every handle it opens must share nothing with the others but
// the database. leases says whose clock the store counts leases on.
func RunTests(t *testing.T, newDB func(t *testing.T) Opener, leases LeaseClock) {
	fresh := func(t *testing.T) Stores {
		s := newDB(t)(t, Options{})
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
	t.Run("Checkpoints", func(t *testing.T) {
		contextostest.RunCheckpointStoreTests(t, func(t *testing.T) contextos.CheckpointStore { return fresh(t).Checkpoints() })
	})
	t.Run("CheckpointRunIDs", func(t *testing.T) {
		// The store lists its runs, sorted, for Runtime.PendingApprovals.
		ctx := context.Background()
		cps := fresh(t).Checkpoints()
		for _, id := range []string{"run_b", "run_a", "run_c"} {
			must(t, cps.Save(ctx, &contextos.Checkpoint{RunID: id, Version: 2, Data: []byte(`{}`)}))
		}
		ids, err := cps.RunIDs(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]string{"run_a", "run_b", "run_c"}, ids); diff != "" {
			t.Errorf("RunIDs (-want +got):\n%s", diff)
		}
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		if _, err := cps.RunIDs(cctx); !errors.Is(err, context.Canceled) {
			t.Errorf("RunIDs with a cancelled context = %v, want context.Canceled", err)
		}
	})
	t.Run("Packets", func(t *testing.T) {
		contextostest.RunPacketStoreTests(t, func(t *testing.T) contextos.PacketStore { return fresh(t).Packets() })
	})
	t.Run("Memory", func(t *testing.T) {
		contextostest.RunMemoryStoreTests(t, func(t *testing.T, items []compiler.MemoryItem) (contextos.MemoryStore, func(context.Context) ([]contextos.MemoryProposal, error)) {
			s := fresh(t)
			if err := s.PutMemory(context.Background(), "tenant_1", items...); err != nil {
				t.Fatal(err)
			}
			return s.Memory(), s.Proposals
		})
	})
	t.Run("Records", func(t *testing.T) {
		decisiontest.RunStoreTests(t, func(t *testing.T) decision.Store { return fresh(t).Records() })
	})
	t.Run("Idempotency", func(t *testing.T) {
		gatewaytest.RunIdempotencyStoreTests(t, func(t *testing.T) gateway.IdempotencyStore { return fresh(t).Idempotency() })
	})
	t.Run("Approvals", func(t *testing.T) {
		gatewaytest.RunApprovalLogTests(t, func(t *testing.T) gateway.ApprovalLog { return fresh(t).Approvals() })
	})
	t.Run("Transcripts", func(t *testing.T) {
		gatewaytest.RunTranscriptSinkTests(t, func(t *testing.T) (gateway.TranscriptSink, func() []gateway.TranscriptEntry) {
			s := fresh(t).Transcripts()
			return s, func() []gateway.TranscriptEntry {
				var all []gateway.TranscriptEntry
				for _, run := range []string{"run_1", "run_a", "run_b"} {
					es, err := s.RunEntries(context.Background(), run)
					if err != nil {
						t.Fatal(err)
					}
					all = append(all, es...)
				}
				return all
			}
		})
		gatewaytest.RunTranscriptReaderTests(t, func(t *testing.T) (gateway.TranscriptSink, gateway.TranscriptReader) {
			s := fresh(t).Transcripts()
			return s, s
		})
	})
	t.Run("Registry", func(t *testing.T) {
		base, err := pack.Decode(fixture.SupportPack())
		if err != nil {
			t.Fatal(err)
		}
		packtest.RunRegistryTests(t, base, func(t *testing.T) pack.Registry { return fresh(t).Registry(nil) })
		packtest.RunLifecycleTests(t, base, func(t *testing.T, opts *pack.ValidateOptions) (pack.LifecycleRegistry, func(*testing.T) pack.LifecycleRegistry) {
			open := newDB(t)
			handle := func(t *testing.T) pack.LifecycleRegistry {
				s := open(t, Options{})
				t.Cleanup(func() { _ = s.Close() })
				lr, ok := s.Registry(opts).(pack.LifecycleRegistry)
				if !ok {
					t.Fatalf("%T is not a pack.LifecycleRegistry", s.Registry(opts))
				}
				return lr
			}
			return handle(t), handle
		})
	})
	t.Run("Durability", func(t *testing.T) { runDurability(t, newDB, leases) })
}

func runDurability(t *testing.T, newDB func(t *testing.T) Opener, leases LeaseClock) {
	ctx := context.Background()
	// pair opens two handles on one fresh database.
	pair := func(t *testing.T, o Options) (a, b Stores) {
		open := newDB(t)
		a, b = open(t, o), open(t, o)
		t.Cleanup(func() { _ = a.Close(); _ = b.Close() })
		return a, b
	}
	suite := &durabilitySuite{ctx: ctx, newDB: newDB, leases: leases, pair: pair}
	for _, c := range durabilityCases {
		t.Run(c.name, func(t *testing.T) { c.run(t, suite) })
	}
}

// durabilitySuite is what the cases of runDurability share: its
// parameters and the helpers it sets up. Each case opens what it uses.
type durabilitySuite struct {
	ctx    context.Context
	newDB  func(t *testing.T) Opener
	leases LeaseClock
	pair   func(t *testing.T, o Options) (a, b Stores)
}

// durabilityCases are the cases of runDurability, in order.
var durabilityCases = []struct {
	name string
	run  func(t *testing.T, suite *durabilitySuite)
}{
	{"ReopenReadsBackEverything", durabilityReopenReadsBackEverything},
	{"OneRevisionWinsAcrossHandles", durabilityOneRevisionWinsAcrossHandles},
	{"OneChainAcrossHandles", durabilityOneChainAcrossHandles},
	{"ClaimHeldAcrossHandlesThenLapses", durabilityClaimHeldAcrossHandlesThenLapses},
	{"ClaimOnServerClock", durabilityClaimOnServerClock},
	{"CheckpointLeaseAcrossHandles", durabilityCheckpointLeaseAcrossHandles},
	{"LiveHolderKeepsItsClaim", durabilityLiveHolderKeepsItsClaim},
	{"HugeIDsAreClippedInErrors", durabilityHugeIDsAreClippedInErrors},
	{"ApprovalUsedOnceAcrossHandles", durabilityApprovalUsedOnceAcrossHandles},
	{"TranscriptPositionTakenOnce", durabilityTranscriptPositionTakenOnce},
	{"MemoryIsPerTenant", durabilityMemoryIsPerTenant},
	{"PacketsAcrossHandles", durabilityPacketsAcrossHandles},
	{"RegistryImmutableAcrossHandles", durabilityRegistryImmutableAcrossHandles},
}

func durabilityReopenReadsBackEverything(t *testing.T, suite *durabilitySuite) {
	ctx, newDB := suite.ctx, suite.newDB
	open := newDB(t)
	a := open(t, Options{})
	cp := &contextos.Checkpoint{RunID: "run_1", Version: 2, Data: []byte("state \x00\xff")}
	must(t, a.Checkpoints().Save(ctx, cp))
	rec, err := a.Records().Append(ctx, decisiontest.Sample("dr_1", decision.Decided))
	must(t, err)
	if _, claimed, err := a.Idempotency().Claim(ctx, "ik_1"); err != nil || !claimed {
		t.Fatalf("Claim = %v, %v", claimed, err)
	}
	must(t, a.Idempotency().Complete(ctx, "ik_1", &gateway.ToolResultEnvelope{ToolCallID: "tool_1", Status: gateway.StatusCompleted}))
	must(t, a.Approvals().Consume(ctx, "apr_1"))
	entry := gateway.TranscriptEntry{RunID: "run_1", Seq: 0, Kind: "call", EntryHash: "sha256:e", PrevHash: gateway.GenesisHash, ChainHash: "sha256:c"}
	must(t, a.Transcripts().Append(ctx, entry))
	must(t, a.PutMemory(ctx, "tenant_1", compiler.MemoryItem{MemoryRef: "mem_1", Content: "prefers email", State: compiler.MemoryPromoted}))
	must(t, a.Memory().Propose(ctx, []contextos.MemoryProposal{{WriteClass: "preference", Content: "x", RunID: "run_1"}}))
	doc, err := json.Marshal(mustPack(t))
	must(t, err)
	if _, err := a.Registry(nil).Put(ctx, doc); err != nil {
		t.Fatal(err)
	}
	must(t, a.Close())

	b := open(t, Options{})
	defer b.Close()
	got, err := b.Checkpoints().Load(ctx, "run_1")
	must(t, err)
	if diff := cmp.Diff(cp, got); diff != "" {
		t.Errorf("checkpoint after reopen (-saved +loaded):\n%s", diff)
	}
	r, err := b.Records().Get(ctx, "dr_1")
	if err != nil || r.RecordHash != rec.RecordHash {
		t.Errorf("record after reopen = %v, %v", r, err)
	}
	must(t, b.Records().Verify(ctx))
	prior, claimed, err := b.Idempotency().Claim(ctx, "ik_1")
	if err != nil || claimed || prior == nil || prior.ToolCallID != "tool_1" {
		t.Errorf("Claim of a completed key after reopen = %+v, %v, %v", prior, claimed, err)
	}
	if err := b.Approvals().Consume(ctx, "apr_1"); !errors.Is(err, gateway.ErrApprovalUsed) {
		t.Errorf("Consume of a used approval after reopen = %v, want ErrApprovalUsed", err)
	}
	es, err := b.Transcripts().RunEntries(ctx, "run_1")
	if err != nil || len(es) != 1 || es[0].ChainHash != "sha256:c" {
		t.Errorf("transcript after reopen = %+v, %v", es, err)
	}
	items, err := b.Memory().Recall(ctx, compiler.MemoryQuery{TenantID: "tenant_1"})
	if err != nil || len(items) != 1 || items[0].MemoryRef != "mem_1" {
		t.Errorf("Recall after reopen = %+v, %v", items, err)
	}
	ps, err := b.Proposals(ctx)
	if err != nil || len(ps) != 1 || ps[0].RunID != "run_1" {
		t.Errorf("Proposals after reopen = %+v, %v", ps, err)
	}
	ref, _ := mustPack(t).Ref()
	if e, err := b.Registry(nil).Get(ctx, ref); err != nil || e.State != pack.StateDraft {
		t.Errorf("registry entry after reopen = %+v, %v", e, err)
	}
}

func durabilityOneRevisionWinsAcrossHandles(t *testing.T, suite *durabilitySuite) {
	ctx, pair := suite.ctx, suite.pair
	a, b := pair(t, Options{})
	must(t, a.Checkpoints().Save(ctx, &contextos.Checkpoint{RunID: "run_1", Version: 2, Data: []byte("v1")}))
	ca, err := a.Checkpoints().Load(ctx, "run_1")
	must(t, err)
	cb, err := b.Checkpoints().Load(ctx, "run_1")
	must(t, err)
	ca.Data, cb.Data = []byte("from a"), []byte("from b")
	must(t, b.Checkpoints().Save(ctx, cb))
	if err := a.Checkpoints().Save(ctx, ca); !errors.Is(err, contextos.ErrCheckpointConflict) {
		t.Errorf("a save over a revision the other handle moved past = %v, want ErrCheckpointConflict", err)
	}
	got, err := a.Checkpoints().Load(ctx, "run_1")
	if err != nil || string(got.Data) != "from b" || got.Revision != 2 {
		t.Errorf("after the conflict: %+v, %v", got, err)
	}
}

func durabilityOneChainAcrossHandles(t *testing.T, suite *durabilitySuite) {
	ctx, pair := suite.ctx, suite.pair
	a, b := pair(t, Options{})
	for i, s := range []Stores{a, b, a, b, b, a} {
		if _, err := s.Records().Append(ctx, decisiontest.Sample("dr_"+string(rune('a'+i)), decision.Decided)); err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range []Stores{a, b} {
		must(t, s.Records().Verify(ctx))
		all, err := s.Records().List(ctx, decision.Filter{})
		if err != nil || len(all) != 6 {
			t.Fatalf("List = %d records, %v", len(all), err)
		}
		for i := 1; i < len(all); i++ {
			if all[i].PrevRecordHash != all[i-1].RecordHash {
				t.Errorf("record %d does not follow record %d", i, i-1)
			}
		}
	}
	if _, err := b.Records().Append(ctx, decisiontest.Sample("dr_a", decision.Decided)); !errors.Is(err, decision.ErrDuplicate) {
		t.Errorf("a record id the other handle stored = %v, want ErrDuplicate", err)
	}
}

func durabilityClaimHeldAcrossHandlesThenLapses(t *testing.T, suite *durabilitySuite) {
	ctx, leases, pair := suite.ctx, suite.leases, suite.pair
	if leases == ServerClock {
		t.Skip("the store counts leases on its server's clock: ClaimOnServerClock")
	}
	var now time.Time = contextostest.FixedTime()
	clock := func() time.Time { return now }
	a, b := pair(t, Options{Now: clock, ClaimTTL: time.Minute})
	if _, claimed, err := a.Idempotency().Claim(ctx, "ik_1"); err != nil || !claimed {
		t.Fatalf("first Claim = %v, %v", claimed, err)
	}
	short, cancel := context.WithTimeout(ctx, 150*time.Millisecond)
	defer cancel()
	if _, _, err := b.Idempotency().Claim(short, "ik_1"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Claim of a key the other handle holds = %v, want it to wait until the deadline", err)
	}
	// The holder never completes: once its lease lapses, the key is
	// handed over, once.
	now = now.Add(time.Minute + time.Second)
	if _, claimed, err := b.Idempotency().Claim(ctx, "ik_1"); err != nil || !claimed {
		t.Fatalf("Claim after the lease lapsed = %v, %v, want the key", claimed, err)
	}
	short2, cancel2 := context.WithTimeout(ctx, 150*time.Millisecond)
	defer cancel2()
	if _, _, err := a.Idempotency().Claim(short2, "ik_1"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("the dead holder's handle claimed the key again: %v", err)
	}
	// The dead holder's late result is refused; the new holder's is
	// the key's.
	if err := a.Idempotency().Complete(ctx, "ik_1", &gateway.ToolResultEnvelope{ToolCallID: "tool_a", Status: gateway.StatusFailed}); err == nil {
		t.Error("a holder whose claim was taken over completed the key")
	}
	must(t, b.Idempotency().Complete(ctx, "ik_1", &gateway.ToolResultEnvelope{ToolCallID: "tool_b", Status: gateway.StatusCompleted}))
	prior, claimed, err := a.Idempotency().Claim(ctx, "ik_1")
	if err != nil || claimed || prior.ToolCallID != "tool_b" {
		t.Errorf("Claim after completion = %+v, %v, %v", prior, claimed, err)
	}
	// A release by a handle that does not hold the key frees nothing.
	if _, claimed, _ := a.Idempotency().Claim(ctx, "ik_2"); !claimed {
		t.Fatal("ik_2 not granted")
	}
	must(t, b.Idempotency().Release(ctx, "ik_2"))
	short3, cancel3 := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel3()
	if _, _, err := b.Idempotency().Claim(short3, "ik_2"); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("another handle's Release freed a key it did not hold: %v", err)
	}
}

func durabilityClaimOnServerClock(t *testing.T, suite *durabilitySuite) {
	ctx, newDB, leases := suite.ctx, suite.newDB, suite.leases
	if leases != ServerClock {
		t.Skip("the store counts leases on the host's clock: ClaimHeldAcrossHandlesThenLapses")
	}
	// b's clock is an hour ahead (far past ClaimTTL): it cannot take
	// the key a live holder claimed, nor the run a live runtime holds.
	ahead := func() time.Time { return time.Now().Add(time.Hour) }
	open := newDB(t)
	a := open(t, Options{ClaimTTL: 600 * time.Millisecond})
	b := open(t, Options{Now: ahead, ClaimTTL: 600 * time.Millisecond})
	t.Cleanup(func() { _ = a.Close(); _ = b.Close() })
	if _, claimed, err := a.Idempotency().Claim(ctx, "ik_1"); err != nil || !claimed {
		t.Fatalf("first Claim = %v, %v", claimed, err)
	}
	short, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if _, claimed, err := b.Idempotency().Claim(short, "ik_1"); claimed || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Claim from a handle whose clock is an hour ahead = %v, %v; want the live claim held", claimed, err)
	}
	cp := &contextos.Checkpoint{RunID: "run_1", Version: 2, Data: []byte("claimed"), Lease: time.Minute}
	must(t, a.Checkpoints().Save(ctx, cp))
	got, err := b.Checkpoints().Load(ctx, "run_1")
	if err != nil || got.Lease <= 59*time.Second {
		t.Errorf("a 1 min lease, loaded by a handle whose clock is an hour ahead: %v, %v; want about 1 min left", got.Lease, err)
	}
	// The holder dies (its renewals stop): once the lease lapses on
	// the server's clock, the key is handed over, even to a handle
	// whose clock is behind.
	must(t, a.Close())
	c := open(t, Options{Now: func() time.Time { return time.Now().Add(-time.Hour) }, ClaimTTL: 600 * time.Millisecond})
	t.Cleanup(func() { _ = c.Close() })
	wait, cancel2 := context.WithTimeout(ctx, 5*time.Second)
	defer cancel2()
	if _, claimed, err := c.Idempotency().Claim(wait, "ik_1"); err != nil || !claimed {
		t.Fatalf("Claim after the dead holder's lease lapsed = %v, %v; want the key", claimed, err)
	}
}

func durabilityCheckpointLeaseAcrossHandles(t *testing.T, suite *durabilitySuite) {
	ctx, leases, pair := suite.ctx, suite.leases, suite.pair
	// The lease a handle saves is counted down for every handle; on
	// the host's clock, a handle whose clock is ahead sees it lapsed.
	var now time.Time = contextostest.FixedTime()
	a, b := pair(t, Options{Now: func() time.Time { return now }})
	must(t, a.Checkpoints().Save(ctx, &contextos.Checkpoint{RunID: "run_1", Version: 2, Data: []byte("claimed"), Lease: time.Minute}))
	got, err := b.Checkpoints().Load(ctx, "run_1")
	if err != nil || got.Lease <= 50*time.Second || got.Lease > time.Minute {
		t.Fatalf("lease read from the other handle = %v, %v; want about 1 min", got.Lease, err)
	}
	if leases == HostClock {
		now = now.Add(2 * time.Minute)
		if got, err := b.Checkpoints().Load(ctx, "run_1"); err != nil || got.Lease != 0 {
			t.Errorf("lease 2 min later on the host's clock = %v, %v; want lapsed", got.Lease, err)
		}
	}
}

func durabilityLiveHolderKeepsItsClaim(t *testing.T, suite *durabilitySuite) {
	ctx, pair := suite.ctx, suite.pair
	// A call that runs longer than ClaimTTL: its holder renews the
	// lease, so no one takes the key over while it runs.
	a, b := pair(t, Options{ClaimTTL: 1500 * time.Millisecond})
	if _, claimed, err := a.Idempotency().Claim(ctx, "ik_long"); err != nil || !claimed {
		t.Fatalf("Claim = %v, %v", claimed, err)
	}
	wait, cancel := context.WithTimeout(ctx, 3500*time.Millisecond)
	defer cancel()
	if _, claimed, err := b.Idempotency().Claim(wait, "ik_long"); claimed || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Claim of a key a live holder has held for over two leases = %v, %v; want it still held", claimed, err)
	}
	must(t, a.Idempotency().Complete(ctx, "ik_long", &gateway.ToolResultEnvelope{ToolCallID: "tool_long", Status: gateway.StatusCompleted}))
	prior, claimed, err := b.Idempotency().Claim(ctx, "ik_long")
	if err != nil || claimed || prior.ToolCallID != "tool_long" {
		t.Errorf("Claim after completion = %+v, %v, %v", prior, claimed, err)
	}
}

func durabilityHugeIDsAreClippedInErrors(t *testing.T, suite *durabilitySuite) {
	ctx, pair := suite.ctx, suite.pair
	a, _ := pair(t, Options{})
	huge := strings.Repeat("r", 1<<20)
	err := a.Checkpoints().Save(ctx, &contextos.Checkpoint{RunID: huge, Revision: 5, Version: 2, Data: []byte("x")})
	if !errors.Is(err, contextos.ErrCheckpointConflict) || len(err.Error()) > 400 {
		t.Errorf("Save of an unknown run at revision 5 = ErrCheckpointConflict %v, %d-byte message", errors.Is(err, contextos.ErrCheckpointConflict), len(err.Error()))
	}
	if _, err := a.Checkpoints().Load(ctx, huge); !errors.Is(err, contextos.ErrNotFound) || len(err.Error()) > 400 {
		t.Errorf("Load of an unknown huge run id: %d-byte message", len(err.Error()))
	}
}

func durabilityApprovalUsedOnceAcrossHandles(t *testing.T, suite *durabilitySuite) {
	ctx, pair := suite.ctx, suite.pair
	a, b := pair(t, Options{})
	must(t, a.Approvals().Consume(ctx, "apr_1"))
	if err := b.Approvals().Consume(ctx, "apr_1"); !errors.Is(err, gateway.ErrApprovalUsed) {
		t.Errorf("second use from another handle = %v, want ErrApprovalUsed", err)
	}
}

func durabilityTranscriptPositionTakenOnce(t *testing.T, suite *durabilitySuite) {
	ctx, pair := suite.ctx, suite.pair
	a, b := pair(t, Options{})
	e := gateway.TranscriptEntry{RunID: "run_1", Seq: 0, Kind: "call", EntryHash: "sha256:e", PrevHash: gateway.GenesisHash, ChainHash: "sha256:c1"}
	must(t, a.Transcripts().Append(ctx, e))
	e.ChainHash = "sha256:c2"
	if err := b.Transcripts().Append(ctx, e); err == nil {
		t.Error("a second chained entry at one position of a run was kept: the chain forked")
	}
	es, err := b.Transcripts().RunEntries(ctx, "run_1")
	if err != nil || len(es) != 1 || es[0].ChainHash != "sha256:c1" {
		t.Errorf("entries = %+v, %v", es, err)
	}
}

func durabilityMemoryIsPerTenant(t *testing.T, suite *durabilitySuite) {
	ctx, pair := suite.ctx, suite.pair
	a, b := pair(t, Options{})
	must(t, a.PutMemory(ctx, "tenant_1", compiler.MemoryItem{MemoryRef: "mem_1", Content: "tenant one's", State: compiler.MemoryPromoted}))
	items, err := b.Memory().Recall(ctx, compiler.MemoryQuery{TenantID: "tenant_2"})
	if err != nil || len(items) != 0 {
		t.Errorf("tenant_2 recalled %+v, %v", items, err)
	}
	if err := a.PutMemory(ctx, "", compiler.MemoryItem{MemoryRef: "m", State: compiler.MemoryPromoted}); err == nil {
		t.Error("memory without a tenant was stored")
	}
}

func durabilityPacketsAcrossHandles(t *testing.T, suite *durabilitySuite) {
	ctx, pair := suite.ctx, suite.pair
	a, b := pair(t, Options{})
	if _, err := b.Packets().Get(ctx, "rp_1"); !errors.Is(err, contextos.ErrNotFound) {
		t.Fatalf("Get = %v, want ErrNotFound", err)
	}
	p := packet()
	must(t, a.Packets().Save(ctx, p))
	got, err := b.Packets().Get(ctx, p.ReplayPacketID)
	if err != nil || got.SourceRef != p.SourceRef {
		t.Errorf("Get from the other handle = %+v, %v", got, err)
	}
}

func durabilityRegistryImmutableAcrossHandles(t *testing.T, suite *durabilitySuite) {
	ctx, pair := suite.ctx, suite.pair
	a, b := pair(t, Options{})
	p := mustPack(t)
	doc, err := json.Marshal(p)
	must(t, err)
	if _, err := a.Registry(nil).Put(ctx, doc); err != nil {
		t.Fatal(err)
	}
	p.BusinessContext.NonNegotiables = append(p.BusinessContext.NonNegotiables, "changed content under the same version")
	doc2, err := json.Marshal(p)
	must(t, err)
	if _, err := b.Registry(nil).Put(ctx, doc2); !errors.Is(err, pack.ErrImmutable) {
		t.Errorf("Put of other content under a stored version from another handle = %v, want ErrImmutable", err)
	}
}

func packet() *replay.Packet {
	return &replay.Packet{ReplayPacketID: "rp_1", TraceID: "t", SourceKind: replay.SourceDecisionRecord, SourceRef: "dr_1", ContextPackRef: "a@1.0.0",
		CompiledContextHash: "sha256:x", SideEffectPolicy: replay.TranscriptOnly, Invoke: json.RawMessage(`{"request_id":"req_1"}`)}
}

func mustPack(t *testing.T) *pack.Pack {
	t.Helper()
	p, err := pack.Decode(fixture.SupportPack())
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
