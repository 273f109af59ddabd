package gateway_test

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/gateway/gatewaytest"
	"github.com/contextos/contextos/runcontext"
)

// vandalize changes, in place, everything v reaches through pointers,
// lists, maps and interfaces: every string, number and bool, and every
// open object gains a member. What v shares with anything else is changed
// there too.
func vandalize(v reflect.Value) {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			return
		}
		e := v.Elem()
		if v.Kind() == reflect.Interface && v.CanSet() {
			switch e.Kind() {
			case reflect.String, reflect.Bool, reflect.Float64, reflect.Int:
				v.Set(reflect.ValueOf("vandalized"))
				return
			}
		}
		vandalize(e)
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				vandalize(v.Field(i))
			}
		}
	case reflect.Slice, reflect.Array:
		for i := range v.Len() {
			vandalize(v.Index(i))
		}
	case reflect.Map:
		if v.IsNil() {
			return
		}
		for _, k := range v.MapKeys() {
			e := reflect.New(v.Type().Elem()).Elem()
			e.Set(v.MapIndex(k))
			vandalize(e)
			v.SetMapIndex(k, e)
		}
		if v.Type().Key().Kind() == reflect.String && v.Type().Elem().Kind() == reflect.Interface {
			v.SetMapIndex(reflect.ValueOf("vandalized").Convert(v.Type().Key()), reflect.ValueOf(true))
		}
	case reflect.String:
		if v.CanSet() {
			v.SetString(v.String() + "~vandalized")
		}
	case reflect.Int, reflect.Int64:
		if v.CanSet() {
			v.SetInt(v.Int() + 1)
		}
	case reflect.Float64:
		if v.CanSet() {
			v.SetFloat(v.Float() + 1)
		}
	case reflect.Bool:
		if v.CanSet() {
			v.SetBool(!v.Bool())
		}
	}
}

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
			vandalize(reflect.ValueOf(read()))
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
	fill(reflect.ValueOf(&e).Elem())
	c := e.Clone()
	if !reflect.DeepEqual(c, e) {
		t.Fatalf("clone\n%+v\nof\n%+v", c, e)
	}
	if s := sharedPath("entry", reflect.ValueOf(c), reflect.ValueOf(e)); s != "" {
		t.Errorf("the clone shares %s with the entry", s)
	}
	var zero gateway.TranscriptEntry
	if c := zero.Clone(); !reflect.DeepEqual(c, zero) {
		t.Errorf("the zero entry clones to %+v", c)
	}
}

// fill sets every member v reaches to a value that is not its zero value:
// one-element lists, maps holding a nested object and list, and pointers
// to filled values.
func fill(v reflect.Value) {
	switch v.Kind() {
	case reflect.String:
		v.SetString("s")
	case reflect.Int, reflect.Int64:
		v.SetInt(7)
	case reflect.Float64:
		v.SetFloat(0.5)
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fill(v.Field(i))
			}
		}
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		fill(p.Elem())
		v.Set(p)
	case reflect.Slice:
		s := reflect.MakeSlice(v.Type(), 1, 1)
		fill(s.Index(0))
		v.Set(s)
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		if v.Type().Elem().Kind() == reflect.Interface {
			m.SetMapIndex(reflect.ValueOf("obj"), reflect.ValueOf(map[string]any{"list": []any{"x", map[string]any{"k": 1.5}}}))
		} else {
			e := reflect.New(v.Type().Elem()).Elem()
			fill(e)
			m.SetMapIndex(reflect.ValueOf("k").Convert(v.Type().Key()), e)
		}
		v.Set(m)
	case reflect.Interface:
		v.Set(reflect.ValueOf("x"))
	}
}

// sharedPath names the first list, map or pointer a and b share, "" for
// none.
func sharedPath(path string, a, b reflect.Value) string {
	switch a.Kind() {
	case reflect.Struct:
		for i := range a.NumField() {
			if a.Type().Field(i).IsExported() {
				if s := sharedPath(path+"."+a.Type().Field(i).Name, a.Field(i), b.Field(i)); s != "" {
					return s
				}
			}
		}
	case reflect.Pointer, reflect.Slice, reflect.Map:
		if a.IsNil() || b.IsNil() {
			return ""
		}
		if (a.Kind() != reflect.Slice || a.Len() > 0) && a.Pointer() == b.Pointer() {
			return path
		}
		switch a.Kind() {
		case reflect.Pointer:
			return sharedPath(path, a.Elem(), b.Elem())
		case reflect.Slice:
			for i := range a.Len() {
				if s := sharedPath(path+"[]", a.Index(i), b.Index(i)); s != "" {
					return s
				}
			}
		case reflect.Map:
			for _, k := range a.MapKeys() {
				if s := sharedPath(path+"["+k.String()+"]", a.MapIndex(k), b.MapIndex(k)); s != "" {
					return s
				}
			}
		}
	case reflect.Interface:
		if !a.IsNil() && !b.IsNil() {
			return sharedPath(path, a.Elem(), b.Elem())
		}
	}
	return ""
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
				vandalize(reflect.ValueOf(res))
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
			vandalize(reflect.ValueOf(res))
		}
		for range 2 {
			prior, claimed, err := store.Claim(ctx, "k")
			if err != nil || claimed {
				t.Fatalf("claim: %v, %v", claimed, err)
			}
			out = append(out, mustJSON(t, prior))
			if edit {
				vandalize(reflect.ValueOf(prior))
			}
		}
		return out
	}
	want, got := play(t, false), play(t, true)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("editing the results handed out changed what the store hands out next (-plain +edited):\n%s", diff)
	}
}
