package engine

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/contextos/contextos/decision"
	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/replay"
	"github.com/contextos/contextos/runcontext"
)

// TestMarshalCheckpointIsJSONMarshal holds marshalCheckpoint to the bytes
// json.Marshal writes of the same state: with every member set (strings
// that encoding/json escapes among them), with every member zero, with
// each member alone left zero, and after the request and run context
// kept from a save are replaced.
func TestMarshalCheckpointIsJSONMarshal(t *testing.T) {
	same := func(t *testing.T, st *checkpointState) {
		t.Helper()
		got, err := marshalCheckpoint(st)
		if err != nil {
			t.Fatal(err)
		}
		want, err := json.Marshal(st)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("marshalCheckpoint wrote\n%s\njson.Marshal writes\n%s", got, want)
		}
	}
	same(t, &checkpointState{})
	full := fullCheckpoint()
	same(t, full)
	// Every exported member is set in full (so every key is written) and
	// each, left zero alone, is written as encoding/json writes it.
	v := reflect.ValueOf(full).Elem()
	for i := range v.NumField() {
		f := v.Type().Field(i)
		if !f.IsExported() {
			continue
		}
		if v.Field(i).IsZero() {
			t.Fatalf("fullCheckpoint leaves %s zero: set it", f.Name)
		}
		st := fullCheckpoint()
		reflect.ValueOf(st).Elem().Field(i).SetZero()
		same(t, st)
	}
	// A new request or run context (a resume's new budget) is encoded
	// anew, not taken from the last save.
	st := fullCheckpoint()
	same(t, st)
	next := st.Run.Clone()
	next.RunBudget.MaxToolCalls++
	st.Origin, st.Run = st.Run, next
	same(t, st)
	st.Request = &runcontext.InvokeRequest{RequestID: "req_other"}
	same(t, st)
}

// fullCheckpoint is a state with every member set.
func fullCheckpoint() *checkpointState {
	odd := "a<b>&c \u2028 \"q\" \\ é \x7f bad\xff"
	res := &gateway.ToolResultEnvelope{CapabilityID: "adp.cap", ToolCallID: "tc_" + odd, Output: map[string]any{"k": odd, "n": 1.5}}
	at := time.Date(2026, 12, 6, 10, 0, 0, 5, time.UTC)
	rc := &runcontext.RunContext{RunID: "run_1", TenantID: odd, Metadata: map[string]any{"m": odd},
		Extensions: map[string]json.RawMessage{"x_ext": json.RawMessage(`{"b":1,"a":"<"}`)}}
	return &checkpointState{
		RunID: "run_" + odd, Active: true,
		Request:     &runcontext.InvokeRequest{RequestID: "req_" + odd, ContextPackRefs: []string{"p@1.0.0"}, Extensions: map[string]json.RawMessage{"x_ext": json.RawMessage(`[1, 2]`)}},
		Run:         rc,
		LedgerPacks: "sha256:" + odd, Turn: 2, Replans: 1, Plan: &Plan{Replan: odd}, StepIndex: 1,
		Results:    []StepResult{{Turn: 1, Index: 0, Step: Step{CapabilityID: "adp.cap", Args: map[string]any{"a": odd}}, Result: res}},
		Usage:      PlanUsage{Tokens: 3, CostCents: 0.25},
		MeterUsage: runcontext.Usage{Tokens: 3, ToolCalls: 1, CostCents: 0.25, WallClockMS: 9},
		StartedAt:  at.Format(time.RFC3339Nano), Pending: &gateway.ApprovalRequest{GateID: odd},
		Deferred: "dr_&1", InFlight: "dr_\x7f", Open: []string{"dr_1", odd}, LeaseUntil: at.Format(time.RFC3339Nano),
		Plans: []*Plan{{Replan: odd}, nil}, Seq: 4, Terminal: true, Chain: gateway.ChainState{Seq: 2, Hash: odd},
		Outcomes: []replay.AdapterOutcome{{ToolCallID: "tc_1", CapabilityID: "adp.cap", Attempt: 1}},
		Clock:    []time.Time{at, at.Add(time.Second)},
		Resumes:  []replay.Resume{{Budget: &runcontext.RunBudget{MaxToolCalls: 2}}},
		Denials:  []decision.Approval{{GateID: "g", Approver: odd, ApprovalModeEffective: runcontext.ReadOnly}},
		Stopped:  strings.Repeat(odd, 2), Origin: &runcontext.RunContext{RunID: "run_1", TenantID: "t"},
		PlannerCalls: 2, PlannerErrors: []replay.PlannerError{{Call: 1, Reason: odd}}, Checks: 5,
		Interrupts:    []replay.Interrupt{{Check: 3, Reason: odd}},
		StoreFailures: []replay.StoreFailure{{ToolCallID: odd, Store: replay.StoreTranscript, Op: replay.StoreOpAppend, Kind: "call", Seq: 4}},
		Unconfirmed:   &unconfirmedRecord{Record: &decision.Record{RecordID: "dr_3"}, Stopped: odd},
		Points:        3, Priors: []replay.PriorResult{{IdempotencyKey: odd, Result: res}}, InputsLost: true,
		SpentSincePoint:  &replay.Spent{Tokens: 5000, CostCents: 0.1 + 0.2, WallClockMS: 1234},
		CallInProgress:   &callInProgress{ToolCallID: "tc_" + odd, Seq: 7, Tokens: 3000, CostCents: 0.7 + 0.1},
		FailedSincePoint: []replay.StoreFailure{{ToolCallID: "tc_" + odd, Store: replay.StoreTranscript, Op: replay.StoreOpAppend, Kind: "result", Seq: 8}},
	}
}

func BenchmarkMarshalCheckpoint(b *testing.B) {
	st := fullCheckpoint()
	b.Run("cached", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := marshalCheckpoint(st); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := json.Marshal(st); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestOwnStoreKeepsEncodedCheckpoint holds the runtime's save into its own
// in-memory store (which keeps the encoder's bytes without a copy) to the
// bytes json.Marshal writes of the state, after later saves of other runs
// reuse the encoder's buffer; and the store's public Save to its copy of
// what it was given.
func TestOwnStoreKeepsEncodedCheckpoint(t *testing.T) {
	cps := NewInMemoryCheckpoints()
	rt := &Runtime{opts: Options{Checkpoints: cps, Now: time.Now}}
	ctx := t.Context()
	a, b := fullCheckpoint(), fullCheckpoint()
	a.RunID, b.RunID = "run_a", "run_b"
	b.Plan = &Plan{Replan: strings.Repeat("x", 300)}
	want, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.saveCheckpoint(ctx, a); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := rt.saveCheckpoint(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	got, err := cps.Load(ctx, "run_a")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Data, want) || got.Revision != 1 || a.rev != 1 {
		t.Fatalf("run_a's checkpoint reads back (revision %d, state at %d) as\n%s\nnot\n%s", got.Revision, a.rev, got.Data, want)
	}
	// Save, for any other caller, keeps its own copy.
	c := &Checkpoint{RunID: "run_c", Version: checkpointV2, Data: []byte(`{"run_id":"run_c"}`)}
	if err := cps.Save(ctx, c); err != nil {
		t.Fatal(err)
	}
	copy(c.Data, "XXXXXXXXXX")
	if got, err := cps.Load(ctx, "run_c"); err != nil || string(got.Data) != `{"run_id":"run_c"}` {
		t.Fatalf("an edit after Save reached the store: %s %v", got.Data, err)
	}
}

// TestSaveSpentKeepsTheSavedState holds a spend save (run.saveSpent) to
// the state last saved, byte for byte, with spent_since_point set: the
// bytes are what encoding/json writes of that state with the member (as a
// save of it would be), at version 4, over the run's revision; the state
// it decodes to is the saved one, so a takeover continues from it. The
// run's state edited since (a plan, a turn, a point) is not saved, and a
// second spend save replaces the member rather than adding one. A save of
// what a call's attempts spent (SaveAttemptsSpent) adds call_in_progress
// after it, at version 5, and the next spend save, once the call
// returned, drops it (version 4 again).
func TestSaveSpentKeepsTheSavedState(t *testing.T) {
	for _, name := range []string{"plain", "spent before"} {
		t.Run(name, func(t *testing.T) {
			cps := NewInMemoryCheckpoints()
			rt := &Runtime{opts: Options{Checkpoints: cps, Now: time.Now}}
			ctx := t.Context()
			st := fullCheckpoint()
			st.Unconfirmed, st.Active, st.FailedSincePoint = nil, true, nil
			if name == "plain" {
				st.SpentSincePoint = nil
			}
			if err := rt.saveCheckpoint(ctx, st); err != nil {
				t.Fatal(err)
			}
			saved := *st
			saved.SpentSincePoint, saved.CallInProgress = nil, nil
			st.Turn, st.Points, st.Plan = 9, 9, &Plan{Replan: "edited since"}
			// The state's run context has no wall clock budget: the wall
			// clock spent since reads 0.
			r := &run{rt: rt, rc: st.Run, cp: st, meter: runcontext.NewMeter(st.Run.RunBudget, time.Now())}
			for i, tokens := range []int{700, 1200} {
				r.spent, r.spentUnsaved = replay.Spent{Tokens: tokens, CostCents: 0.5}, true
				if err := r.saveSpent(ctx); err != nil {
					t.Fatal(err)
				}
				got, err := cps.Load(ctx, st.RunID)
				if err != nil {
					t.Fatal(err)
				}
				want := saved
				want.SpentSincePoint = &replay.Spent{Tokens: tokens, CostCents: 0.5}
				wb, err := json.Marshal(&want)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got.Data, wb) || got.Version != checkpointV4 || got.Revision != 2+i || st.rev != 2+i {
					t.Fatalf("spend save %d stored (version %d, revision %d, state at %d)\n%s\nwant (version 4, revision %d)\n%s", i, got.Version, got.Revision, st.rev, got.Data, 2+i, wb)
				}
				var dec struct {
					Turn            int           `json:"turn"`
					Points          int           `json:"points"`
					SpentSincePoint *replay.Spent `json:"spent_since_point"`
				}
				if err := json.Unmarshal(got.Data, &dec); err != nil {
					t.Fatalf("spend save %d does not decode: %v", i, err)
				}
				if dec.Turn != saved.Turn || dec.Points != saved.Points || dec.SpentSincePoint == nil || dec.SpentSincePoint.Tokens != tokens {
					t.Fatalf("spend save %d decodes to turn %d, point %d, spent %+v", i, dec.Turn, dec.Points, dec.SpentSincePoint)
				}
			}
			// Nothing charged since: no save.
			if err := r.saveSpent(ctx); err != nil || st.rev != 3 {
				t.Fatalf("a spend save with nothing charged moved the revision to %d (%v)", st.rev, err)
			}
			// A call's attempts: the planner's spend and the call's, at
			// version 5; then the call returns and the next turn's save
			// holds the planner's alone, at version 4.
			if err := r.SaveAttemptsSpent(ctx, "tc_x", 11, 4.5, 3000); err != nil {
				t.Fatal(err)
			}
			for i, step := range []string{"call", "next turn"} {
				got, err := cps.Load(ctx, st.RunID)
				if err != nil {
					t.Fatal(err)
				}
				want := saved
				want.SpentSincePoint = &replay.Spent{Tokens: 1200 + 100*i, CostCents: 0.5}
				version := checkpointV4
				if step == "call" {
					want.CallInProgress, version = &callInProgress{ToolCallID: "tc_x", Seq: 11, Tokens: 3000, CostCents: 4.5}, checkpointV5
				}
				wb, err := json.Marshal(&want)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got.Data, wb) || got.Version != version || st.rev != 4+i {
					t.Fatalf("%s: spend save stored (version %d, state at %d)\n%s\nwant (version %d, revision %d)\n%s", step, got.Version, st.rev, got.Data, version, 4+i, wb)
				}
				var dec struct {
					CallInProgress *callInProgress `json:"call_in_progress"`
				}
				if err := json.Unmarshal(got.Data, &dec); err != nil {
					t.Fatal(err)
				}
				if (dec.CallInProgress != nil) != (step == "call") || dec.CallInProgress != nil && *dec.CallInProgress != *want.CallInProgress {
					t.Fatalf("%s: the save decodes with call %+v", step, dec.CallInProgress)
				}
				r.call, r.spent.Tokens, r.spentUnsaved = nil, 1300, true
				if err := r.saveSpent(ctx); err != nil {
					t.Fatal(err)
				}
			}
			// The member is read at versions 4 and 5 only, call_in_progress
			// at version 5 only: a checkpoint of an earlier version
			// claiming one is read without it.
			for v, want := range map[int]int{checkpointV2: 0, checkpointV3: 0, checkpointV4: 5, checkpointV5: 5} {
				c := &Checkpoint{RunID: "r", Version: v, Data: []byte(`{"run_id":"r","spent_since_point":{"tokens":5},"call_in_progress":{"tool_call_id":"tc","seq":2,"tokens":7}}`)}
				dec, err := decodeCheckpoint(c)
				if err != nil {
					t.Fatal(err)
				}
				if got := dec.SpentSincePoint; (got == nil) != (want == 0) || got != nil && got.Tokens != want {
					t.Fatalf("a version-%d checkpoint decodes with spent %+v", v, got)
				}
				if got := dec.CallInProgress; (got != nil) != (v == checkpointV5) || got != nil && (got.Tokens != 7 || got.Seq != 2 || got.ToolCallID != "tc") {
					t.Fatalf("a version-%d checkpoint decodes with call %+v", v, got)
				}
			}
			// Only a version-6 checkpoint has the store failures since
			// its state.
			for _, v := range []int{checkpointV5, checkpointV6} {
				c := &Checkpoint{RunID: "r", Version: v, Data: []byte(`{"run_id":"r","store_failures_since_point":[{"tool_call_id":"tc","store":"idempotency","op":"claim","idempotency_key":"k"}]}`)}
				dec, err := decodeCheckpoint(c)
				if err != nil {
					t.Fatal(err)
				}
				if got := dec.FailedSincePoint; (len(got) == 1) != (v == checkpointV6) {
					t.Fatalf("a version-%d checkpoint decodes with store failures %+v", v, got)
				}
			}
			// A runtime that reads only versions 1 to 4 refuses a
			// version-5 checkpoint, as this one refuses version 7.
			if _, err := decodeCheckpoint(&Checkpoint{RunID: "r", Version: checkpointV6 + 1, Data: []byte(`{"run_id":"r"}`)}); !errors.Is(err, ErrCheckpointVersion) {
				t.Fatalf("a version-7 checkpoint decodes (%v)", err)
			}
		})
	}
}

// TestMarshalCheckpointClock holds the clock member, which marshalCheckpoint
// writes without encoding/json, to json.Marshal's bytes and errors: times
// in other zones, with and without fractions, the zero time, and times
// with no RFC 3339 form (a year beyond 9999 or before 0, a zone offset of
// a day or more) anywhere in the list.
func TestMarshalCheckpointClock(t *testing.T) {
	at := time.Date(2026, 5, 4, 9, 31, 0, 0, time.UTC)
	ist := time.FixedZone("IST", 5*3600+30*60)
	odd := time.FixedZone("odd", -(3*3600 + 7*60 + 9)) // seconds in the offset
	far := time.FixedZone("far", 24*3600)
	good := []time.Time{at, at.Add(123456789), at.In(ist), at.In(odd), {}, time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC),
		time.Date(0, 1, 1, 0, 0, 0, 1, time.UTC), at.Local(), time.Unix(0, 0)}
	bad := []time.Time{time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC), at.In(far)}
	cases := [][]time.Time{nil, {}, good, {at}}
	for _, b := range bad {
		cases = append(cases, []time.Time{b}, append([]time.Time{at, at}, b), append(slices.Clone(good), b, at))
	}
	for _, clock := range cases {
		st := &checkpointState{RunID: "run_c", Clock: clock}
		got, err := marshalCheckpoint(st)
		want, werr := json.Marshal(st)
		if (err == nil) != (werr == nil) || err != nil && err.Error() != werr.Error() || !bytes.Equal(got, want) {
			t.Fatalf("clock %v: marshalCheckpoint wrote\n%s (%v)\njson.Marshal writes\n%s (%v)", clock, got, err, want, werr)
		}
	}
	// The member is written with its own writer, not left to encoding/json.
	w := objectWriter{}
	w.times("clock", good)
	if want, _ := json.Marshal(good); !bytes.Equal(w.b, append([]byte(`{"clock":`), want...)) {
		t.Fatalf("times wrote %s", w.b)
	}
}

// TestCheckpointKeepsMembersInItsData: the JSON a save keeps of the run's
// request and run context (for the next save) is its bytes in that
// save's own Data, not another copy, and a later save of the same state
// (after other encodings reused the pooled buffer) still writes what
// json.Marshal does. An encoding that fails keeps nothing: the next one
// encodes the members anew.
func TestCheckpointKeepsMembersInItsData(t *testing.T) {
	plain := func() *checkpointState {
		return &checkpointState{RunID: "run_p", Active: true,
			Request: &runcontext.InvokeRequest{RequestID: "req_p", ContextPackRefs: []string{"p@1.0.0"}},
			Run: &runcontext.RunContext{RunID: "run_p", TenantID: "t", Metadata: map[string]any{"m": "v"},
				RunBudget: runcontext.RunBudget{TotalTokens: 9, BucketTokens: map[runcontext.Bucket]int{"session": 5, "a<&>\u2028\"": -3, "business": 7, "": 1}}},
			Origin: &runcontext.RunContext{RunID: "run_p", TenantID: "o"},
			Plans:  []*Plan{}}
	}
	same := func(t *testing.T, st *checkpointState) []byte {
		t.Helper()
		got, err := marshalCheckpoint(st)
		if err != nil {
			t.Fatal(err)
		}
		want, err := json.Marshal(st)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("marshalCheckpoint wrote\n%s\njson.Marshal writes\n%s", got, want)
		}
		return got
	}
	st := plain()
	first := same(t, st)
	within := func(name string, b []byte) {
		t.Helper()
		i := bytes.Index(first, b)
		if len(b) == 0 || i < 0 || &first[i] != &b[0] || cap(b) != len(b) {
			t.Fatalf("the %s's JSON kept is not its bytes in the save's Data (len %d, cap %d)", name, len(b), cap(b))
		}
	}
	within("request", st.enc.reqJSON)
	within("run context", st.enc.rcJSON)
	within("original run context", st.enc.orgJSON)
	for range 3 {
		other := fullCheckpoint()
		other.Plan = &Plan{Replan: strings.Repeat("y", 500)}
		same(t, other)
	}
	st.Turn, st.Active = 1, false
	same(t, st)
	// A failed encoding (an argument with no JSON form) keeps nothing.
	st = plain()
	st.Plan = &Plan{Steps: []Step{{CapabilityID: "a.b", Args: map[string]any{"x": func() {}}}}}
	if _, err := marshalCheckpoint(st); err == nil {
		t.Fatal("a plan with no JSON form was encoded")
	}
	if st.enc.req != nil || st.enc.reqJSON != nil || st.enc.rcJSON != nil {
		t.Fatal("a failed encoding kept members")
	}
	st.Plan = nil
	for range 2 {
		other := fullCheckpoint()
		same(t, other)
	}
	same(t, st)
	same(t, st)
}
