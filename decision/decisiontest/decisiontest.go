// Package decisiontest holds the conformance suites for decision.Store
// implementations:
//
//	func TestMyStore(t *testing.T) {
//		decisiontest.RunStoreTests(t, func(t *testing.T) decision.Store { return newMyStore(t) })
//	}
//
// and RunUnreadableTests, for a store that can be built holding records
// as an earlier release stored them.
package decisiontest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/contextos/contextos/decision"
	"github.com/contextos/contextos/internal/canon"
)

// Sample returns a minimal well-formed record of run "run_1" with the
// given record id and status (set RunID for another run).
func Sample(id string, status decision.Status) *decision.Record {
	return sampleIn("run_1", id, status)
}

// sampleIn is Sample in another run.
func sampleIn(run, id string, status decision.Status) *decision.Record {
	return &decision.Record{
		RecordID: id, DecisionKey: "support.refund.execute", DecisionVersion: "1.0.0", Timestamp: "2026-05-04T09:31:42Z",
		Status: status, Actor: decision.Actor{Type: "AGENT", ID: "agt_support"}, IntentRef: "support.refund",
		InputsRefs: decision.InputsRefs{Request: "req_1"}, Outputs: map[string]any{"refund_amount_inr": 4200.0},
		EvidenceRefs: []string{}, PolicyDecisions: []decision.PolicyDecisionRef{}, Approvals: []decision.Approval{},
		Lineage: decision.Lineage{PackVersion: "ctxpack.support@1.0.0", CompiledContextHash: "sha256:00"},
		TraceID: "4bf92f3577b34da6a3ce929d0e0e4736", RunID: run, TenantID: "tenant_acme_prod",
	}
}

// RunStoreTests checks the Store contract: appended records come back
// equal with hashes set, chained in order; ids are unique; List filters;
// Verify passes on an untouched store; concurrent appends keep every
// record and a valid chain, and of concurrent appends of one id exactly
// one is stored and the others are ErrDuplicate; a cancelled context is honoured by every
// method; a refused append leaves no trace in the chain; records handed in
// and out are copies; a record's replay handle is kept, with
// replay.record_hash set to the record_hash; and a chain of some hundred
// records of interleaved runs lists each run's in order and verifies.
func RunStoreTests(t *testing.T, newStore func(t *testing.T) decision.Store) {
	t.Helper()
	ctx := context.Background()
	suite := &storeSuite{ctx: ctx, newStore: newStore}
	for _, c := range storeCases {
		t.Run(c.name, func(t *testing.T) { c.run(t, suite) })
	}
}

// storeSuite is what the cases of RunStoreTests share: its
// parameters and the helpers it sets up. Each case opens what it uses.
type storeSuite struct {
	ctx      context.Context
	newStore func(t *testing.T) decision.Store
}

// storeCases are the cases of RunStoreTests, in order.
var storeCases = []struct {
	name string
	run  func(t *testing.T, suite *storeSuite)
}{
	{"AppendChainsAndReturns", storeAppendChainsAndReturns},
	{"UniqueIDsAndNotFound", storeUniqueIDsAndNotFound},
	{"ListFilters", storeListFilters},
	{"ConcurrentAppends", storeConcurrentAppends},
	{"ConcurrentDuplicateAppends", storeConcurrentDuplicateAppends},
	{"CancelledContext", storeCancelledContext},
	{"RefusedAppendLeavesNoTrace", storeRefusedAppendLeavesNoTrace},
	{"ReplayHandle", storeReplayHandle},
	{"StoredRecordsAreCopies", storeStoredRecordsAreCopies},
	{"LongChain", storeLongChain},
}

// storeLongChain appends records of three runs, interleaved, past a few
// hundred (more than a store reads at a time): each run's listing is its
// records in order, and the whole chain verifies.
func storeLongChain(t *testing.T, suite *storeSuite) {
	ctx, s := suite.ctx, suite.newStore(t)
	const n = 600
	runs := []string{"run_1", "run_2", "run_3"}
	want := map[string][]string{}
	for i := range n {
		run, id := runs[i%len(runs)], fmt.Sprintf("dr_%04d", i)
		if _, err := s.Append(ctx, sampleIn(run, id, decision.Decided)); err != nil {
			t.Fatal(err)
		}
		want[run] = append(want[run], id)
	}
	for _, run := range runs {
		got, err := s.List(ctx, decision.Filter{RunID: run})
		if err != nil {
			t.Fatal(err)
		}
		ids := make([]string, len(got))
		for i, r := range got {
			ids[i] = r.RecordID
		}
		if !slices.Equal(ids, want[run]) {
			t.Errorf("List(%s) = %d records %v…, want %d in append order", run, len(ids), ids[:min(3, len(ids))], len(want[run]))
		}
	}
	if err := s.Verify(ctx); err != nil {
		t.Errorf("Verify of %d records: %v", n, err)
	}
}

func storeAppendChainsAndReturns(t *testing.T, suite *storeSuite) {
	ctx, newStore := suite.ctx, suite.newStore
	s := newStore(t)
	a, err := s.Append(ctx, Sample("dr_1", decision.Deferred))
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.Append(ctx, Sample("dr_2", decision.Decided))
	if err != nil {
		t.Fatal(err)
	}
	if a.PrevRecordHash != decision.GenesisHash || b.PrevRecordHash != a.RecordHash || a.RecordHash == "" {
		t.Errorf("chain: a %s→%s, b %s→%s", a.PrevRecordHash, a.RecordHash, b.PrevRecordHash, b.RecordHash)
	}
	if h, _ := decision.Hash(b); h != b.RecordHash {
		t.Errorf("record_hash %s, recomputed %s", b.RecordHash, h)
	}
	got, err := s.Get(ctx, "dr_2")
	if err != nil || got.RecordHash != b.RecordHash || got.Outputs["refund_amount_inr"] != 4200.0 {
		t.Errorf("Get = %+v, %v", got, err)
	}
	if err := s.Verify(ctx); err != nil {
		t.Errorf("Verify = %v", err)
	}
}

func storeUniqueIDsAndNotFound(t *testing.T, suite *storeSuite) {
	ctx, newStore := suite.ctx, suite.newStore
	s := newStore(t)
	s.Append(ctx, Sample("dr_1", decision.Decided))
	if _, err := s.Append(ctx, sampleIn("run_2", "dr_1", decision.Decided)); !errors.Is(err, decision.ErrDuplicate) {
		t.Errorf("duplicate id = %v", err)
	}
	if _, err := s.Get(ctx, "dr_nope"); !errors.Is(err, decision.ErrNotFound) {
		t.Errorf("Get(unknown) = %v", err)
	}
}

func storeListFilters(t *testing.T, suite *storeSuite) {
	ctx, newStore := suite.ctx, suite.newStore
	s := newStore(t)
	s.Append(ctx, Sample("dr_1", decision.Deferred))
	s.Append(ctx, Sample("dr_2", decision.Decided))
	s.Append(ctx, sampleIn("run_2", "dr_3", decision.Decided))
	for _, c := range []struct {
		f    decision.Filter
		want int
	}{{decision.Filter{}, 3}, {decision.Filter{RunID: "run_1"}, 2}, {decision.Filter{Status: decision.Decided}, 2}, {decision.Filter{RunID: "run_2", Status: decision.Deferred}, 0}} {
		got, err := s.List(ctx, c.f)
		if err != nil || len(got) != c.want {
			t.Errorf("List(%+v) = %d records, %v; want %d", c.f, len(got), err, c.want)
		}
	}
	all, _ := s.List(ctx, decision.Filter{})
	if all[0].RecordID != "dr_1" || all[2].RecordID != "dr_3" {
		t.Error("List is not in append order")
	}
}

func storeConcurrentAppends(t *testing.T, suite *storeSuite) {
	ctx, newStore := suite.ctx, suite.newStore
	s := newStore(t)
	var wg sync.WaitGroup
	for i := 0; i < 20; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := s.Append(ctx, sampleIn("run_c", fmt.Sprintf("dr_%d", i), decision.Decided)); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	all, _ := s.List(ctx, decision.Filter{})
	if len(all) != 20 {
		t.Errorf("%d records kept, want 20", len(all))
	}
	if err := s.Verify(ctx); err != nil {
		t.Errorf("Verify after concurrent appends = %v", err)
	}
}

func storeConcurrentDuplicateAppends(t *testing.T, suite *storeSuite) {
	ctx, newStore := suite.ctx, suite.newStore
	// Writers racing with the same ids onto a chain that has a head:
	// each id is stored once, every other append of it is
	// ErrDuplicate, and the chain stays one chain.
	s := newStore(t)
	if _, err := s.Append(ctx, Sample("dr_0", decision.Decided)); err != nil {
		t.Fatal(err)
	}
	const ids, writers = 6, 4
	var stored [ids]atomic.Int32
	var wg sync.WaitGroup
	for i := range ids * writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := i % ids
			switch _, err := s.Append(ctx, sampleIn("run_d", fmt.Sprintf("dr_d%d", id), decision.Decided)); {
			case err == nil:
				stored[id].Add(1)
			case !errors.Is(err, decision.ErrDuplicate):
				t.Errorf("append of dr_d%d = %v, want success or ErrDuplicate", id, err)
			}
		}()
	}
	wg.Wait()
	for id := range stored {
		if n := stored[id].Load(); n != 1 {
			t.Errorf("dr_d%d stored %d times, want once", id, n)
		}
	}
	if all, err := s.List(ctx, decision.Filter{}); err != nil || len(all) != ids+1 {
		t.Errorf("List = %d records, %v; want %d", len(all), err, ids+1)
	}
	if err := s.Verify(ctx); err != nil {
		t.Errorf("Verify after racing duplicate appends = %v", err)
	}
}

func storeCancelledContext(t *testing.T, suite *storeSuite) {
	ctx, newStore := suite.ctx, suite.newStore
	s := newStore(t)
	s.Append(ctx, Sample("dr_1", decision.Decided))
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := s.Append(cctx, sampleIn("run_x", "dr_x", decision.Decided)); !errors.Is(err, context.Canceled) {
		t.Errorf("Append(cancelled) = %v", err)
	}
	if _, err := s.Get(cctx, "dr_1"); !errors.Is(err, context.Canceled) {
		t.Errorf("Get(cancelled) = %v", err)
	}
	if _, err := s.List(cctx, decision.Filter{}); !errors.Is(err, context.Canceled) {
		t.Errorf("List(cancelled) = %v", err)
	}
	if err := s.Verify(cctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Verify(cancelled) = %v", err)
	}
}

func storeRefusedAppendLeavesNoTrace(t *testing.T, suite *storeSuite) {
	ctx, newStore := suite.ctx, suite.newStore
	s := newStore(t)
	a, _ := s.Append(ctx, Sample("dr_1", decision.Decided))
	s.Append(ctx, Sample("dr_1", decision.Escalated))
	s.Append(ctx, Sample("", decision.Escalated))
	b, err := s.Append(ctx, Sample("dr_2", decision.Decided))
	if err != nil || b.PrevRecordHash != a.RecordHash {
		t.Fatalf("the append after refused ones does not chain onto the last stored record: %+v, %v", b, err)
	}
	all, _ := s.List(ctx, decision.Filter{})
	if len(all) != 2 || all[0].Status != decision.Decided {
		t.Errorf("refused appends left %d records, first %s", len(all), all[0].Status)
	}
	if err := s.Verify(ctx); err != nil {
		t.Errorf("Verify = %v", err)
	}
}

func storeReplayHandle(t *testing.T, suite *storeSuite) {
	ctx, newStore := suite.ctx, suite.newStore
	s := newStore(t)
	in := Sample("dr_1", decision.Decided)
	in.SetReplayPacketID("rp_1")
	in.Replay.ToolTranscriptChainHash = "sha256:11"
	in.Lineage.ToolTranscriptChainHash = "sha256:11"
	// A stale copy of a hash is the store's to overwrite.
	in.Replay.RecordHash = "sha256:stale"
	out, err := s.Append(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.Get(ctx, "dr_1")
	if err != nil || got.Replay == nil {
		t.Fatalf("Get = %+v, %v", got, err)
	}
	for _, r := range []*decision.Record{out, got} {
		h, _ := decision.Hash(r)
		switch {
		case r.Replay.RecordHash != r.RecordHash || h != r.RecordHash:
			t.Errorf("replay.record_hash %s, record_hash %s, recomputed %s", r.Replay.RecordHash, r.RecordHash, h)
		case r.Replay.ReplayPacketID != "rp_1" || r.Lineage.ReplayPacketID != "rp_1":
			t.Errorf("packet id: replay %q, lineage %q", r.Replay.ReplayPacketID, r.Lineage.ReplayPacketID)
		case r.Replay.CompiledContextHash != "sha256:00" || r.Replay.ToolTranscriptChainHash != "sha256:11":
			t.Errorf("replay hashes %+v", r.Replay)
		}
	}
	// The packet id is inside record_hash; replay.record_hash is not.
	c := *got
	rp := *got.Replay
	c.Replay = &rp
	c.Replay.RecordHash = ""
	if h, _ := decision.Hash(&c); h != got.RecordHash {
		t.Error("record_hash covers replay.record_hash")
	}
	c.Replay.ReplayPacketID = "rp_2"
	if h, _ := decision.Hash(&c); h == got.RecordHash {
		t.Error("record_hash does not cover replay.replay_packet_id")
	}
	if err := s.Verify(ctx); err != nil {
		t.Errorf("Verify = %v", err)
	}
}

func storeStoredRecordsAreCopies(t *testing.T, suite *storeSuite) {
	ctx, newStore := suite.ctx, suite.newStore
	s := newStore(t)
	in := Sample("dr_1", decision.Decided)
	out, err := s.Append(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	in.Outputs["refund_amount_inr"] = 1.0
	out.Outputs["refund_amount_inr"] = 2.0
	got, _ := s.Get(ctx, "dr_1")
	got.Outputs["refund_amount_inr"] = 3.0
	again, err := s.Get(ctx, "dr_1")
	if err != nil || again.Outputs["refund_amount_inr"] != 4200.0 {
		t.Errorf("a caller's change reached the stored record: %v, %v", again.Outputs, err)
	}
	if err := s.Verify(ctx); err != nil {
		t.Errorf("Verify = %v", err)
	}
}

// Unreadable stored records, as an earlier release sealed them: each is
// chained and hashed as Seal does, but does not decode as a
// decision.Record.
const (
	// unreadableTokens is a token count of 2^63−1 written as the nearest
	// double (how the encoder once wrote an int it could not hold).
	unreadableTokens = "9223372036854776000"
	// unreadableSecret stands in a numeric member where it cannot decode;
	// no error may quote it.
	unreadableSecret = "sk_live_51HyQ2mStoredSecret"
)

// sealStored returns the stored bytes of r chained after prev, with the
// member at path (object keys from the top) set to the raw JSON value v
// before hashing, as a record carrying that value would have been
// sealed; v "" keeps r as it is.
func sealStored(t *testing.T, r *decision.Record, prev string, path []string, v string) []byte {
	t.Helper()
	_, b, err := decision.Seal(r, prev)
	if err != nil {
		t.Fatal(err)
	}
	if v == "" {
		return b
	}
	var doc map[string]any
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(&doc); err != nil {
		t.Fatal(err)
	}
	m := doc
	for _, k := range path[:len(path)-1] {
		m = m[k].(map[string]any)
	}
	m[path[len(path)-1]] = json.RawMessage(v)
	delete(doc, "record_hash")
	raw, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	h, err := canon.Digest(json.RawMessage(raw))
	if err != nil {
		t.Fatal(err)
	}
	doc["record_hash"] = h
	if raw, err = json.Marshal(doc); err != nil {
		t.Fatal(err)
	}
	out, err := canon.JSON(json.RawMessage(raw))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := decision.DecodeStored(out, 0); !errors.Is(err, decision.ErrUnreadable) {
		t.Fatalf("the stored record decodes (%v); the suite needs one that does not", err)
	}
	return out
}

// storedChain seals the records (a nil value path keeps one readable)
// into one chain from GenesisHash and returns the stored bytes.
func storedChain(t *testing.T, recs []storedRecord) [][]byte {
	t.Helper()
	var out [][]byte
	prev := decision.GenesisHash
	for _, s := range recs {
		b := sealStored(t, s.r, prev, s.path, s.value)
		var k struct {
			RecordHash string `json:"record_hash"`
		}
		if err := json.Unmarshal(b, &k); err != nil {
			t.Fatal(err)
		}
		out, prev = append(out, b), k.RecordHash
	}
	return out
}

type storedRecord struct {
	r     *decision.Record
	path  []string
	value string
}

// UnreadableChain returns the stored records RunUnreadableTests reads:
// dr_1 (run_1), dr_2 (run_1, ESCALATED, a token count of 2^63−1 as an
// earlier release sealed it), dr_3 (run_2), dr_4 (run_2, a string where
// budget_usage.wall_clock_ms belongs) and dr_5 (run_1), chained from
// GenesisHash; dr_2 and dr_4 do not decode as a decision.Record.
func UnreadableChain(t *testing.T) [][]byte {
	t.Helper()
	return storedChain(t, []storedRecord{
		{r: Sample("dr_1", decision.Decided)},
		{r: Sample("dr_2", decision.Escalated), path: []string{"budget_usage", "tokens"}, value: unreadableTokens},
		{r: sampleIn("run_2", "dr_3", decision.Decided)},
		{r: sampleIn("run_2", "dr_4", decision.Decided), path: []string{"budget_usage", "wall_clock_ms"}, value: `"` + unreadableSecret + `"`},
		{r: Sample("dr_5", decision.Decided)},
	})
}

// RunUnreadableTests checks how a Store reads a chain that holds records
// that do not decode as a decision.Record (sealed by an earlier release
// with a token count of 2^63−1, or with a string in a numeric member):
// every other record still reads; List returns the records it selects
// that read, in order, with an *UnreadableError naming (by index and id)
// the selected ones that do not; Get of one returns that error, of the
// others the record; Verify finds the chain intact (no ErrChain) and
// names them; an append chains after an unreadable last record; no error
// quotes a stored value.
//
// newStore returns a store that already holds stored: the records' bytes
// exactly as Seal gave them, chained from GenesisHash, as a store written
// by an earlier release holds them (a durable store writes its rows and
// head around the handle; the in-memory store is built holding them).
func RunUnreadableTests(t *testing.T, newStore func(t *testing.T, stored [][]byte) decision.Store) {
	t.Helper()
	ctx := context.Background()
	tokens := []string{"budget_usage", "tokens"}
	chain := UnreadableChain
	// named checks err is an *UnreadableError naming exactly ids at
	// indexes, and quoting no stored value.
	named := func(t *testing.T, what string, err error, ids []string, indexes []int) {
		t.Helper()
		var ue *decision.UnreadableError
		if !errors.Is(err, decision.ErrUnreadable) || !errors.As(err, &ue) || errors.Is(err, decision.ErrChain) {
			t.Fatalf("%s = %v, want a *decision.UnreadableError (and not ErrChain)", what, err)
		}
		var gotIdx []int
		for _, r := range ue.Records {
			gotIdx = append(gotIdx, r.Index)
			if r.Reason == "" {
				t.Errorf("%s: record %s has no reason", what, r.RecordID)
			}
		}
		if got := ue.RecordIDs(); fmt.Sprint(got) != fmt.Sprint(ids) || fmt.Sprint(gotIdx) != fmt.Sprint(indexes) {
			t.Errorf("%s names %v at %v, want %v at %v", what, got, gotIdx, ids, indexes)
		}
		if msg := err.Error(); strings.Contains(msg, unreadableSecret) || strings.Contains(msg, unreadableTokens) {
			t.Errorf("%s quotes a stored value: %s", what, msg)
		}
	}
	ids := func(recs []*decision.Record) []string {
		var out []string
		for _, r := range recs {
			out = append(out, r.RecordID)
		}
		return out
	}
	t.Run("ListReadsTheOthers", func(t *testing.T) {
		s := newStore(t, chain(t))
		for _, c := range []struct {
			f       decision.Filter
			want    []string
			bad     []string
			indexes []int
		}{
			{decision.Filter{}, []string{"dr_1", "dr_3", "dr_5"}, []string{"dr_2", "dr_4"}, []int{1, 3}},
			{decision.Filter{RunID: "run_1"}, []string{"dr_1", "dr_5"}, []string{"dr_2"}, []int{1}},
			{decision.Filter{RunID: "run_2"}, []string{"dr_3"}, []string{"dr_4"}, []int{3}},
			{decision.Filter{Status: decision.Escalated}, nil, []string{"dr_2"}, []int{1}},
			{decision.Filter{RunID: "run_2", Status: decision.Escalated}, nil, nil, nil},
			{decision.Filter{RunID: "run_other"}, nil, nil, nil},
		} {
			got, err := s.List(ctx, c.f)
			if fmt.Sprint(ids(got)) != fmt.Sprint(c.want) {
				t.Errorf("List(%+v) = %v, want %v", c.f, ids(got), c.want)
			}
			if c.bad == nil {
				if err != nil {
					t.Errorf("List(%+v) = %v; it selects no unreadable record", c.f, err)
				}
				continue
			}
			named(t, fmt.Sprintf("List(%+v)", c.f), err, c.bad, c.indexes)
		}
	})
	t.Run("GetNamesTheRecord", func(t *testing.T) {
		s := newStore(t, chain(t))
		for _, id := range []string{"dr_1", "dr_3", "dr_5"} {
			if r, err := s.Get(ctx, id); err != nil || r.RecordID != id {
				t.Errorf("Get(%s) = %+v, %v", id, r, err)
			}
		}
		r, err := s.Get(ctx, "dr_2")
		if r != nil {
			t.Errorf("Get(dr_2) returned a record: %+v", r)
		}
		named(t, "Get(dr_2)", err, []string{"dr_2"}, []int{1})
		_, err = s.Get(ctx, "dr_4")
		named(t, "Get(dr_4)", err, []string{"dr_4"}, []int{3})
		if _, err := s.Get(ctx, "dr_nope"); !errors.Is(err, decision.ErrNotFound) {
			t.Errorf("Get(unknown) = %v, want ErrNotFound", err)
		}
	})
	t.Run("VerifyFindsTheChainIntact", func(t *testing.T) {
		s := newStore(t, chain(t))
		named(t, "Verify", s.Verify(ctx), []string{"dr_2", "dr_4"}, []int{1, 3})
	})
	t.Run("AppendAfterAnUnreadableHead", func(t *testing.T) {
		stored := storedChain(t, []storedRecord{
			{r: Sample("dr_1", decision.Decided)},
			{r: Sample("dr_2", decision.Escalated), path: tokens, value: unreadableTokens},
		})
		var head struct {
			RecordHash string `json:"record_hash"`
		}
		if err := json.Unmarshal(stored[1], &head); err != nil {
			t.Fatal(err)
		}
		s := newStore(t, stored)
		c, err := s.Append(ctx, Sample("dr_3", decision.Decided))
		if err != nil || c.PrevRecordHash != head.RecordHash {
			t.Fatalf("Append = %+v, %v; want it chained after the unreadable record %s", c, err, head.RecordHash)
		}
		got, err := s.List(ctx, decision.Filter{})
		if fmt.Sprint(ids(got)) != fmt.Sprint([]string{"dr_1", "dr_3"}) {
			t.Errorf("List = %v, want [dr_1 dr_3]", ids(got))
		}
		named(t, "List", err, []string{"dr_2"}, []int{1})
		named(t, "Verify", s.Verify(ctx), []string{"dr_2"}, []int{1})
	})
	t.Run("TheEncoderRefusesWhatCannotBeRead", func(t *testing.T) {
		// What made these records can no longer be appended: a count
		// beyond 2^53−1 is refused, and nothing is stored.
		s := newStore(t, nil)
		r := Sample("dr_big", decision.Escalated)
		r.BudgetUsage.Tokens = math.MaxInt
		if _, err := s.Append(ctx, r); !errors.Is(err, canon.ErrUnsafeInteger) {
			t.Errorf("Append of 2^63−1 tokens = %v, want canon.ErrUnsafeInteger", err)
		}
		if all, err := s.List(ctx, decision.Filter{}); err != nil || len(all) != 0 {
			t.Errorf("List after the refused append = %d records, %v", len(all), err)
		}
		if err := s.Verify(ctx); err != nil {
			t.Errorf("Verify = %v", err)
		}
	})
}
