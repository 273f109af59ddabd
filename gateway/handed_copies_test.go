package gateway_test

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/gateway/gatewaytest"
	"github.com/contextos/contextos/internal/deepcheck"
	"github.com/contextos/contextos/runcontext"
)

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// richCalls makes calls whose entries reach every kind of member: a
// lookup whose output nests objects and lists, a refund paused at the
// finance gate (its approval request), a completed refund (citations,
// mutations, an idempotency key), and a call refused with error details.
func richCalls(t *testing.T, sink gateway.TranscriptSink) *fixture {
	t.Helper()
	f := newFixture(t, func(f *fixture, _ *runcontext.RunContext, _ *runcontext.InvokeRequest, _ map[string]gateway.Capability) {
		f.opts.Transcript = canonChecked{t, sink}
	})
	f.orders.On("lookup").ReturnOutput(map[string]any{"order_id": "ord_881", "lines": []any{map[string]any{"sku": "a", "qty": 2.0}}, "tags": []any{"x"}})
	for _, c := range []gateway.CallRequest{lookupCall(), refundCall(5000), {CapabilityID: "adp_nowhere.act", Args: map[string]any{"k": []any{"v"}}}} {
		if _, err := f.run.Call(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	low := newFixture(t, lowValue, func(f *fixture, rc *runcontext.RunContext, _ *runcontext.InvokeRequest, _ map[string]gateway.Capability) {
		f.opts.Transcript = canonChecked{t, sink}
		rc.RunID = "run_00000000000000b2" // a run of its own: its own chain
	})
	if res, err := low.run.Call(ctx, refundCall(1200)); err != nil || res.Status != gateway.StatusCompleted {
		t.Fatalf("refund: %v, %v", res, err)
	}
	return f
}

// TestTranscriptReadersHandOutCopies: what a transcript store's reader
// returns is the caller's own. A caller that edits every member of the
// entries (or envelopes) it read changes neither what the store gives
// the next reader (a replay capture, say) nor the chain, which still
// verifies.
func TestTranscriptReadersHandOutCopies(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		read func(t *testing.T) (read func() any, runID string)
	}{
		{"MemoryTranscript.Entries of a run", func(t *testing.T) (func() any, string) {
			m := gateway.NewMemoryTranscript()
			f := richCalls(t, m)
			return func() any { return m.Entries(f.rc.RunID) }, f.rc.RunID
		}},
		{"MemoryTranscript.Entries of every run", func(t *testing.T) (func() any, string) {
			m := gateway.NewMemoryTranscript()
			richCalls(t, m)
			return func() any { return m.Entries("") }, ""
		}},
		{"MemoryTranscript.RunEntries", func(t *testing.T) (func() any, string) {
			m := gateway.NewMemoryTranscript()
			f := richCalls(t, m)
			return func() any {
				es, err := m.RunEntries(ctx, f.rc.RunID)
				if err != nil {
					t.Fatal(err)
				}
				return es
			}, f.rc.RunID
		}},
		{"gatewaytest.Recorder.Entries", func(t *testing.T) (func() any, string) {
			r := &gatewaytest.Recorder{}
			richCalls(t, r)
			return func() any { return r.Entries() }, ""
		}},
		{"gatewaytest.Recorder.RunEntries", func(t *testing.T) (func() any, string) {
			r := &gatewaytest.Recorder{}
			f := richCalls(t, r)
			return func() any {
				es, err := r.RunEntries(ctx, f.rc.RunID)
				if err != nil {
					t.Fatal(err)
				}
				return es
			}, f.rc.RunID
		}},
		{"gatewaytest.Recorder.Calls", func(t *testing.T) (func() any, string) {
			r := &gatewaytest.Recorder{}
			richCalls(t, r)
			return func() any { return r.Calls() }, ""
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			read, runID := tc.read(t)
			want := mustJSON(t, read())
			deepcheck.Vandalize(reflect.ValueOf(read()))
			again := read()
			if got := mustJSON(t, again); got != want {
				t.Errorf("editing what the reader returned changed what it returns next:\n%s", cmp.Diff(want, got))
			}
			if es, ok := again.([]gateway.TranscriptEntry); ok && runID != "" {
				if _, err := gateway.VerifyTranscript(es); err != nil {
					t.Errorf("the stored chain no longer verifies: %v", err)
				}
			}
		})
	}
}

// TestTranscriptEntryCloneSharesNothing: an entry with every member set
// (by reflection, so a member added later is covered) clones to an equal
// entry that shares no list, map or pointer with it.
func TestTranscriptEntryCloneSharesNothing(t *testing.T) {
	t.Parallel()
	var e gateway.TranscriptEntry
	deepcheck.Fill(reflect.ValueOf(&e).Elem())
	c := e.Clone()
	if !reflect.DeepEqual(c, e) {
		t.Fatalf("clone\n%+v\nof\n%+v", c, e)
	}
	if s := deepcheck.Shared("entry", reflect.ValueOf(c), reflect.ValueOf(e)); s != "" {
		t.Errorf("the clone shares %s with the entry", s)
	}
	var zero gateway.TranscriptEntry
	if c := zero.Clone(); !reflect.DeepEqual(c, zero) {
		t.Errorf("the zero entry clones to %+v", c)
	}
}

// TestIdempotencyStoreKeepsItsOwnResult: the in-memory idempotency store
// keeps the result of a write as it was completed and hands each later
// claim its own copy. A caller that edits the result its write returned,
// or the duplicate's result a retry returned, changes nothing a later
// retry gets.
func TestIdempotencyStoreKeepsItsOwnResult(t *testing.T) {
	t.Parallel()
	play := func(t *testing.T, edit bool) []string {
		store := gateway.NewMemoryIdempotency()
		f := newFixture(t, lowValue, sharedStore(store))
		var out []string
		for i := range 3 {
			res, err := f.run.Call(ctx, refundCall(1200))
			if err != nil || !res.Status.Succeeded() || res.Metadata.Duplicate != (i > 0) {
				t.Fatalf("call %d: %+v, %v", i, res, err)
			}
			out = append(out, mustJSON(t, res))
			if edit {
				deepcheck.Vandalize(reflect.ValueOf(res))
			}
		}
		// The store used directly: what Complete was given, and what a
		// Claim returned, are the caller's.
		res := &gateway.ToolResultEnvelope{Status: gateway.StatusCompleted, Output: map[string]any{"id": "t", "lines": []any{map[string]any{"q": 1.0}}},
			Artifacts: []string{"a"}, Citations: []gateway.Citation{{EvidenceRef: "e"}}, Mutations: []string{"m"}, RiskTags: []string{"r"},
			Error: &gateway.ToolError{Code: "c", Details: map[string]any{"d": []any{"x"}}}, Approval: &gateway.ApprovalRequest{GateID: "g"}}
		if err := store.Complete(ctx, "k", res); err != nil {
			t.Fatal(err)
		}
		if edit {
			deepcheck.Vandalize(reflect.ValueOf(res))
		}
		for range 2 {
			prior, claimed, err := store.Claim(ctx, "k")
			if err != nil || claimed {
				t.Fatalf("claim: %v, %v", claimed, err)
			}
			out = append(out, mustJSON(t, prior))
			if edit {
				deepcheck.Vandalize(reflect.ValueOf(prior))
			}
		}
		return out
	}
	want, got := play(t, false), play(t, true)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("editing the results handed out changed what the store hands out next (-plain +edited):\n%s", diff)
	}
}
