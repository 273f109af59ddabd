package gateway

import (
	"context"
	"encoding/json"
	"math"
	"reflect"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// jsonShaped is a value of every JSON shape, nested.
func jsonShaped() map[string]any {
	return map[string]any{
		"nil": nil, "false": false, "true": true, "s": "é\x00\xff", "f": 1.5, "neg": -0.25, "big": 1e300,
		"inf": math.Inf(-1), "empty_obj": map[string]any{}, "nil_obj": map[string]any(nil),
		"empty_arr": []any{}, "nil_arr": []any(nil),
		"nested": map[string]any{"a": []any{1.0, "x", nil, true, map[string]any{"deep": []any{[]any{}}}}},
	}
}

// fill sets every field of the struct v points at to a value that is not
// its zero (lists and maps of one element or more, pointers set), and
// fails on a field of a kind it does not know: a field added to an
// envelope must be added to the encoding, and to this test.
func fill(t *testing.T, v reflect.Value, path string) {
	t.Helper()
	switch v.Kind() {
	case reflect.String:
		v.SetString(path)
	case reflect.Int, reflect.Int64:
		v.SetInt(int64(len(path)) - 40) // negative for the short paths
	case reflect.Float64:
		v.SetFloat(float64(len(path)) + 0.125)
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(t, v.Elem(), path)
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 2, 2))
		for i := range 2 {
			fill(t, v.Index(i), path+"["+string(rune('0'+i))+"]")
		}
	case reflect.Map:
		if v.Type() != reflect.TypeFor[map[string]any]() {
			t.Fatalf("%s: a map of %s", path, v.Type())
		}
		m := jsonShaped()
		m["path"] = path
		v.Set(reflect.ValueOf(m))
	case reflect.Struct:
		for i := range v.NumField() {
			f := v.Type().Field(i)
			if f.Name == "Approval" && v.Type() == reflect.TypeFor[ToolResultEnvelope]() {
				continue // an approval request is kept as it is (TestEntryCodecKeepsOddEntries)
			}
			fill(t, v.Field(i), path+"."+f.Name)
		}
	default:
		t.Fatalf("%s: a field of kind %s the test (and the encoding) does not know", path, v.Kind())
	}
}

// empty sets every list and map field of the struct v points at to an
// empty one that is not nil, and every pointer to its zero value.
func empty(t *testing.T, v reflect.Value) {
	t.Helper()
	for i := range v.NumField() {
		f := v.Field(i)
		switch f.Kind() {
		case reflect.Slice:
			f.Set(reflect.MakeSlice(f.Type(), 0, 0))
		case reflect.Map:
			f.Set(reflect.MakeMap(f.Type()))
		case reflect.Pointer:
			if v.Type().Field(i).Name != "Approval" {
				f.Set(reflect.New(f.Type().Elem()))
				if f.Elem().Kind() == reflect.Struct {
					empty(t, f.Elem())
				}
			}
		case reflect.Struct:
			empty(t, f)
		}
	}
}

func roundTrip(t *testing.T, e TranscriptEntry) TranscriptEntry {
	t.Helper()
	b, ok := appendEntry([]byte("prefix"), &e)
	if !ok {
		t.Fatalf("the encoding refused %+v", e)
	}
	d := entryDecoder{s: string(b), i: len("prefix")}
	got := d.entry()
	if d.i != len(b) {
		t.Errorf("decoded %d of %d bytes", d.i, len(b))
	}
	return got
}

// Every field of an entry, its call and its result comes back as it was,
// nil and empty lists and maps told apart, every float's bits kept.
func TestEntryCodecRoundTripsEveryField(t *testing.T) {
	var full TranscriptEntry
	fill(t, reflect.ValueOf(&full).Elem(), "e")
	var none TranscriptEntry
	none.Call, none.Result = &ToolCallEnvelope{}, &ToolResultEnvelope{}
	var blank TranscriptEntry
	blank.Call, blank.Result = &ToolCallEnvelope{}, &ToolResultEnvelope{}
	empty(t, reflect.ValueOf(blank.Call).Elem())
	empty(t, reflect.ValueOf(blank.Result).Elem())
	for name, e := range map[string]TranscriptEntry{"full": full, "zero": {}, "nil lists": none, "empty lists": blank} {
		got := roundTrip(t, e)
		if !reflect.DeepEqual(got, e) {
			t.Errorf("%s: read back (-appended +read):\n%s", name, cmp.Diff(e, got))
		}
	}
	// Each read is a copy: editing one changes neither the encoding nor
	// the next read.
	b, _ := appendEntry(nil, &full)
	first := (&entryDecoder{s: string(b)}).entry()
	if f := first.Call.Args["inf"].(float64); !math.IsInf(f, -1) {
		t.Errorf("-Inf read back as %v", f)
	}
	first.Call.Args["nested"].(map[string]any)["a"].([]any)[0] = "changed"
	first.Result.Metadata.Signals[0] = "changed"
	if again := (&entryDecoder{s: string(b)}).entry(); !reflect.DeepEqual(again, full) {
		t.Error("an edit of an entry read back reached the next read")
	}
}

// Results as the idempotency store keeps them round-trip too.
func TestResultCodecRoundTrips(t *testing.T) {
	var r ToolResultEnvelope
	fill(t, reflect.ValueOf(&r).Elem(), "r")
	b, ok := appendResult(nil, &r)
	if !ok {
		t.Fatal("the encoding refused a JSON-shaped result")
	}
	d := entryDecoder{s: string(b)}
	if got := d.result(); !reflect.DeepEqual(got, &r) {
		t.Errorf("read back (-completed +read):\n%s", cmp.Diff(&r, got))
	}
}

// An entry holding what the encoding cannot give back exactly (a value
// that is not JSON-shaped, an approval request) is kept as it was
// appended, and read back as a copy, in its place among the run's others.
func TestEntryCodecKeepsOddEntries(t *testing.T) {
	type custom struct{ N int }
	odd := []TranscriptEntry{
		{RunID: "run_1", Seq: 1, Kind: "call", ChainHash: "c1", Call: &ToolCallEnvelope{Args: map[string]any{"n": 3}}},
		{RunID: "run_1", Seq: 2, Kind: "result", ChainHash: "c2", Result: &ToolResultEnvelope{Output: map[string]any{"c": custom{N: 1}}}},
		{RunID: "run_1", Seq: 3, Kind: "result", ChainHash: "c3", Result: &ToolResultEnvelope{Approval: &ApprovalRequest{GateID: "g"}}},
	}
	for _, e := range odd {
		if _, ok := appendEntry(nil, &e); ok {
			t.Errorf("entry %d: encoded, cannot be given back exactly", e.Seq)
		}
	}
	deep := map[string]any{}
	for v, i := deep, 0; i <= maxEncodeDepth; i++ {
		n := map[string]any{}
		v["x"], v = n, n
	}
	if _, ok := appendEntry(nil, &TranscriptEntry{Call: &ToolCallEnvelope{Args: deep}}); ok {
		t.Error("args nested beyond the encoding's depth were encoded")
	}
	m := NewMemoryTranscript()
	ctx := context.Background()
	want := []TranscriptEntry{{RunID: "run_1", Seq: 0, Kind: "call", ChainHash: "c0", Call: &ToolCallEnvelope{Args: map[string]any{"n": 1.0}}}}
	want = append(want, odd...)
	want = append(want, TranscriptEntry{RunID: "run_1", Seq: 4, Kind: "call", ChainHash: "c4", Call: &ToolCallEnvelope{Args: jsonShaped()}})
	for _, e := range want {
		if err := m.Append(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	got, err := m.RunEntries(ctx, "run_1")
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("read back %v (-appended +read):\n%s", err, cmp.Diff(want, got))
	}
	got[1].Call.Args["n"] = 4
	if again, _ := m.RunEntries(ctx, "run_1"); again[1].Call.Args["n"] != 3 {
		t.Error("an edit of an odd entry read back reached the store")
	}
	// The refusal of a fork finds odd and encoded entries alike.
	for _, seq := range []int{0, 2} {
		if err := m.Append(ctx, TranscriptEntry{RunID: "run_1", Seq: seq, Kind: "call", ChainHash: "other"}); err == nil {
			t.Errorf("a second chained entry at position %d was kept", seq)
		}
	}
}

// FuzzEntryCodec round-trips JSON documents as an entry's args, metadata,
// output and error details.
func FuzzEntryCodec(f *testing.F) {
	f.Add([]byte(`{"a":[1,"x",null,true,{"b":{}}],"c":-0.5e-300}`))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, doc []byte) {
		var v map[string]any
		if json.Unmarshal(doc, &v) != nil {
			return
		}
		e := TranscriptEntry{RunID: "run_1", Kind: "call", Call: &ToolCallEnvelope{Args: v, Metadata: v},
			Result: &ToolResultEnvelope{Output: v, Error: &ToolError{Details: v}}}
		b, ok := appendEntry(nil, &e)
		if !ok {
			return // nested beyond the encoding's depth
		}
		d := entryDecoder{s: string(b)}
		if got := d.entry(); !reflect.DeepEqual(got, e) {
			t.Errorf("read back (-appended +read):\n%s", cmp.Diff(e, got))
		}
	})
}

// The in-memory idempotency store hands each Claim of a completed key
// the result it was given, exactly, as a copy: an encoded one and one the
// encoding cannot give back exactly (kept as a deep copy) alike.
func TestMemoryIdempotencyGivesBackItsResult(t *testing.T) {
	var full ToolResultEnvelope
	fill(t, reflect.ValueOf(&full).Elem(), "r")
	odd := &ToolResultEnvelope{Output: map[string]any{"n": 3}, Approval: &ApprovalRequest{GateID: "g"}}
	ctx := context.Background()
	for name, res := range map[string]*ToolResultEnvelope{"encoded": &full, "odd": odd} {
		m := NewMemoryIdempotency()
		if _, claimed, err := m.Claim(ctx, "k"); !claimed || err != nil {
			t.Fatalf("%s: first claim = %v, %v", name, claimed, err)
		}
		want := res.Clone()
		if err := m.Complete(ctx, "k", res); err != nil {
			t.Fatal(err)
		}
		res.Output["n"] = "edited after Complete"
		got, claimed, err := m.Claim(ctx, "k")
		if claimed || err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: claim = %v, %v (-completed +claimed):\n%s", name, claimed, err, cmp.Diff(want, got))
		}
		got.Output["n"] = "edited after Claim"
		if again, _, _ := m.Claim(ctx, "k"); !reflect.DeepEqual(again, want) {
			t.Errorf("%s: an edit of a claimed result reached the store", name)
		}
	}
}
