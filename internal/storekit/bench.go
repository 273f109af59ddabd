package storekit

import (
	"bytes"
	"context"
	"encoding/json"
	"strconv"
	"testing"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/compiler"
	"github.com/contextos/contextos/contextostest"
	"github.com/contextos/contextos/decision"
	"github.com/contextos/contextos/decision/decisiontest"
	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/internal/canon"
	"github.com/contextos/contextos/internal/fixture"
	"github.com/contextos/contextos/pack"
	"github.com/contextos/contextos/replay"
	"github.com/contextos/contextos/runcontext"
	"github.com/contextos/contextos/store/storetest"
)

// Engine is what the benchmarks use of a durable store: its stores, and
// Configure to wire them into a runtime.
type Engine interface {
	storetest.Stores
	Configure(o *contextos.Options)
}

// Stores times each store operation on a fresh store from
// open, with the data of a real refund run where the operation stores
// one (its checkpoint, replay packet and record).
func Stores(b *testing.B, open func(b *testing.B) Engine) {
	ctx := context.Background()
	run := refundRun(b)
	b.Run("CheckpointSave", func(b *testing.B) {
		cps := open(b).Checkpoints()
		cp := &contextos.Checkpoint{RunID: run.checkpoint.RunID, Version: run.checkpoint.Version, Data: run.checkpoint.Data}
		b.SetBytes(int64(len(cp.Data)))
		b.ReportAllocs()
		for b.Loop() {
			if err := cps.Save(ctx, cp); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("CheckpointLoad", func(b *testing.B) {
		cps := open(b).Checkpoints()
		cp := &contextos.Checkpoint{RunID: run.checkpoint.RunID, Version: run.checkpoint.Version, Data: run.checkpoint.Data}
		if err := cps.Save(ctx, cp); err != nil {
			b.Fatal(err)
		}
		b.SetBytes(int64(len(cp.Data)))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := cps.Load(ctx, cp.RunID); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("PacketSave", func(b *testing.B) {
		ps := open(b).Packets()
		p := *run.packet
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			i++
			p.ReplayPacketID = "rp_bench_" + strconv.Itoa(i)
			if err := ps.Save(ctx, &p); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("PacketGet", func(b *testing.B) {
		ps := open(b).Packets()
		if err := ps.Save(ctx, run.packet); err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for b.Loop() {
			if _, err := ps.Get(ctx, run.packet.ReplayPacketID); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("RecordAppend", func(b *testing.B) {
		rs := open(b).Records()
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			i++
			r := *run.record
			r.RecordID, r.RunID, r.PrevRecordHash, r.RecordHash = "dr_bench_"+strconv.Itoa(i), "run_bench_"+strconv.Itoa(i), "", ""
			if _, err := rs.Append(ctx, &r); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("RecordGet", func(b *testing.B) {
		rs := open(b).Records()
		for i := range 100 { // a store with some history
			r := decisiontest.Sample("dr_"+strconv.Itoa(i), decision.Decided)
			if _, err := rs.Append(ctx, r); err != nil {
				b.Fatal(err)
			}
		}
		r := *run.record
		r.PrevRecordHash, r.RecordHash = "", ""
		if _, err := rs.Append(ctx, &r); err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for b.Loop() {
			if _, err := rs.Get(ctx, r.RecordID); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("IdempotencyClaimComplete", func(b *testing.B) {
		idem := open(b).Idempotency()
		res := run.writeResult
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			i++
			key := "idem_bench_" + strconv.Itoa(i)
			if _, claimed, err := idem.Claim(ctx, key); err != nil || !claimed {
				b.Fatalf("Claim = %v, %v", claimed, err)
			}
			if err := idem.Complete(ctx, key, res); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("ApprovalConsume", func(b *testing.B) {
		log := open(b).Approvals()
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			i++
			if err := log.Consume(ctx, "apr_bench_"+strconv.Itoa(i)); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("TranscriptAppend", func(b *testing.B) {
		ts := open(b).Transcripts()
		prev := gateway.GenesisHash
		b.ReportAllocs()
		seq := 0
		for b.Loop() {
			// Building the entry (hashing it) is the gateway's cost, not
			// the store's: it is outside the timing.
			b.StopTimer()
			e := transcriptEntry(b, "run_bench", seq, prev)
			b.StartTimer()
			if err := ts.Append(ctx, e); err != nil {
				b.Fatal(err)
			}
			prev = e.ChainHash
			seq++
		}
	})
	b.Run("TranscriptRead", func(b *testing.B) {
		ts := open(b).Transcripts()
		prev := gateway.GenesisHash
		for seq := range 6 { // a refund run: three calls and their results
			e := transcriptEntry(b, "run_bench", seq, prev)
			if err := ts.Append(ctx, e); err != nil {
				b.Fatal(err)
			}
			prev = e.ChainHash
		}
		b.ReportAllocs()
		for b.Loop() {
			if es, err := ts.RunEntries(ctx, "run_bench"); err != nil || len(es) != 6 {
				b.Fatalf("RunEntries = %d entries, %v", len(es), err)
			}
		}
	})
	b.Run("MemoryRecall", func(b *testing.B) {
		st := open(b)
		if err := st.PutMemory(ctx, "tenant_acme_prod", run.memory...); err != nil {
			b.Fatal(err)
		}
		mem := st.Memory()
		q := compiler.MemoryQuery{TenantID: "tenant_acme_prod", UserID: "usr_2", Intent: "support.refund"}
		b.ReportAllocs()
		for b.Loop() {
			if items, err := mem.Recall(ctx, q); err != nil || len(items) == 0 {
				b.Fatalf("Recall = %d items, %v", len(items), err)
			}
		}
	})
	b.Run("MemoryPropose", func(b *testing.B) {
		mem := open(b).Memory()
		p := []contextos.MemoryProposal{{WriteClass: "episodic", SubjectIDs: []string{"customer:cus_77"}, Content: "Refund of INR 1200 issued for ord_881.",
			EvidenceRefs: []string{"kg:order:ord_881#snapshot_kg_2026_05_03_T0930"}, Confidence: 0.9, RunID: "run_bench"}}
		b.ReportAllocs()
		for b.Loop() {
			if err := mem.Propose(ctx, p); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("RegistryPut", func(b *testing.B) {
		reg := open(b).Registry(nil)
		doc := fixture.SupportPack()
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			i++
			// A new version each time: Put of stored content is a no-op.
			next := bytes.Replace(doc, []byte(`"pack_version": "1.0.0"`), []byte(`"pack_version": "1.0.`+strconv.Itoa(i)+`"`), 1)
			if _, err := reg.Put(ctx, next); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("RegistryGet", func(b *testing.B) {
		reg := open(b).Registry(nil)
		e, err := reg.Put(ctx, run.signedPack)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for b.Loop() {
			if _, err := reg.Get(ctx, e.Ref); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// refundData is what one refund run stores, for the store benchmarks.
type refundData struct {
	checkpoint  *contextos.Checkpoint
	packet      *replay.Packet
	record      *decision.Record
	writeResult *gateway.ToolResultEnvelope
	memory      []compiler.MemoryItem
	signedPack  []byte
}

// refundRun runs the 1200 refund in memory, every run captured, and
// returns what it stored.
func refundRun(b *testing.B) *refundData {
	b.Helper()
	ctx := context.Background()
	h := RefundHarness(b, contextos.Options{ReplaySampleRate: 1})
	req, rc := Request(b)
	rc.RunID = "run_bench_data"
	res := h.Invoke(req, rc)
	if res.Status != decision.Decided {
		b.Fatalf("the refund run is %s", res.Status)
	}
	cp, err := h.Checkpoints.Load(ctx, rc.RunID)
	if err != nil {
		b.Fatal(err)
	}
	p, err := h.Replays.Get(ctx, res.ReplayPacketID)
	if err != nil {
		b.Fatal(err)
	}
	d := &refundData{checkpoint: cp, packet: p, record: res.Record, writeResult: res.ToolResults[len(res.ToolResults)-1]}
	if err := json.Unmarshal(fixture.Memory(), &d.memory); err != nil {
		b.Fatal(err)
	}
	e, err := h.Registry.Get(ctx, pack.MustParseRef("ctxpack.support@1.0.0"))
	if err != nil {
		b.Fatal(err)
	}
	d.signedPack = e.Document
	return d
}

// transcriptEntry is entry seq of a run's transcript, chained to prev: a
// call when seq is even, its result when odd.
func transcriptEntry(b *testing.B, runID string, seq int, prev string) gateway.TranscriptEntry {
	id := "tool_" + runID + "_" + strconv.Itoa(seq/2)
	e := gateway.TranscriptEntry{RunID: runID, Seq: seq, Kind: "call", PrevHash: prev}
	var body any
	if seq%2 == 0 {
		e.Call = &gateway.ToolCallEnvelope{EnvelopeVersion: gateway.CallEnvelopeVersion, ToolCallID: id, RunID: runID, TraceID: "4bf92f3577b34da6a3ce929d0e0e4736",
			CapabilityID: "adp_orders.lookup", Args: map[string]any{"order_id": "ord_881"}, PrincipalChain: []runcontext.Principal{{Kind: "user", ID: "usr_2"}},
			ApprovalModeRequested: runcontext.ReadOnly, ApprovalModeEffective: runcontext.ReadOnly, ApprovalModeHighest: runcontext.ReadOnly, EvidenceRefs: []string{}}
		body = e.Call
	} else {
		e.Kind = "result"
		e.Result = &gateway.ToolResultEnvelope{EnvelopeVersion: gateway.ResultEnvelopeVersion, ToolCallID: id, RunID: runID, TraceID: "4bf92f3577b34da6a3ce929d0e0e4736",
			CapabilityID: "adp_orders.lookup", Status: gateway.StatusOK, Output: map[string]any{"order_id": "ord_881", "status": "delivered", "total_inr": 4200.0},
			Artifacts: []string{}, Citations: []gateway.Citation{}, Mutations: []string{}, RiskTags: []string{}}
		body = e.Result
	}
	h, err := canon.Digest(body)
	if err != nil {
		b.Fatal(err)
	}
	e.EntryHash, e.ChainHash = h, canon.DigestBytes([]byte(prev+h))
	return e
}

// RefundHarness is the root package's BenchmarkInvokeRefund runtime: the
// canonical support pack, scripted orders, policy and payments, and the
// 1200 refund's two planner turns, with opts's stores.
func RefundHarness(b *testing.B, opts contextos.Options) *contextostest.Harness {
	b.Helper()
	opts.Evidence = Evidence(b)
	h := contextostest.New(b, contextostest.NewPlanner(LookupPlan(), RefundPlan(1200)), [][]byte{fixture.SupportPack()},
		&contextostest.Options{Runtime: opts, Scopes: map[string][]string{"adp_payments.issue_refund": {"payments.refund"}}})
	h.Adapter("adp_orders").On("lookup").ReturnOutput(map[string]any{"order_id": "ord_881", "status": "delivered", "total_inr": 4200})
	h.Adapter("adp_policy").On("eval").ReturnOutput(map[string]any{"eligible": true})
	h.Adapter("adp_payments").On("issue_refund").ReturnOutput(map[string]any{"transaction_id": "txn_q9"}, "refund:txn_q9")
	return h
}

// Request is the canonical 1200 refund, identity verified.
func Request(b *testing.B) (*runcontext.InvokeRequest, *runcontext.RunContext) {
	b.Helper()
	return RefundRequest(b, "", 1200)
}

// InvokeRefund is the root package's BenchmarkInvokeRefund (the 1200
// refund end to end, default replay sampling) with every runtime store
// but the pack registry in the database: the run's claim and final
// checkpoints, its record, its six transcript entries and the payments
// call's idempotency claim.
func InvokeRefund(b *testing.B, open func(b *testing.B) Engine) {
	var opts contextos.Options
	open(b).Configure(&opts)
	h := RefundHarness(b, opts)
	req, rc := Request(b)
	ctx := context.Background()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		rc.RunID = "run_bench_" + strconv.Itoa(i)
		res, err := h.Runtime.Invoke(ctx, req, rc)
		if err != nil || res.Status != decision.Decided {
			b.Fatalf("%v %v", res, err)
		}
	}
}
