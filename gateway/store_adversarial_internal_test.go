package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/contextos/contextos/internal/canon"
	"github.com/contextos/contextos/runcontext"
)

// exact reports where a and b differ, "" when they are the same Go values:
// the same dynamic types, floats bit for bit (-0 and NaN payloads too),
// nil and empty lists and maps told apart, pointers nil or set alike.
// reflect.DeepEqual tells neither -0 from 0 nor a NaN from itself.
func exact(a, b reflect.Value, path string) string {
	if a.IsValid() != b.IsValid() {
		return path + ": one is invalid"
	}
	if !a.IsValid() {
		return ""
	}
	if a.Type() != b.Type() {
		return fmt.Sprintf("%s: type %s, want %s", path, b.Type(), a.Type())
	}
	switch a.Kind() {
	case reflect.Float32, reflect.Float64:
		if math.Float64bits(a.Float()) != math.Float64bits(b.Float()) {
			return fmt.Sprintf("%s: %v (bits %x), want %v (bits %x)", path, b.Float(), math.Float64bits(b.Float()), a.Float(), math.Float64bits(a.Float()))
		}
	case reflect.String:
		if a.String() != b.String() {
			return fmt.Sprintf("%s: %q, want %q", path, b.String(), a.String())
		}
	case reflect.Bool:
		if a.Bool() != b.Bool() {
			return path + ": bool differs"
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		if a.Int() != b.Int() {
			return fmt.Sprintf("%s: %d, want %d", path, b.Int(), a.Int())
		}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		if a.Uint() != b.Uint() {
			return fmt.Sprintf("%s: %d, want %d", path, b.Uint(), a.Uint())
		}
	case reflect.Pointer:
		if a.IsNil() != b.IsNil() {
			return path + ": nil and set pointers"
		}
		if a.IsNil() || a.Pointer() == b.Pointer() {
			return ""
		}
		return exact(a.Elem(), b.Elem(), path)
	case reflect.Interface:
		if a.IsNil() != b.IsNil() {
			return path + ": nil and set interfaces"
		}
		if a.IsNil() {
			return ""
		}
		return exact(a.Elem(), b.Elem(), path)
	case reflect.Slice:
		if a.IsNil() != b.IsNil() {
			return fmt.Sprintf("%s: nil %v, want nil %v", path, b.IsNil(), a.IsNil())
		}
		fallthrough
	case reflect.Array:
		if a.Len() != b.Len() {
			return fmt.Sprintf("%s: len %d, want %d", path, b.Len(), a.Len())
		}
		for i := range a.Len() {
			if d := exact(a.Index(i), b.Index(i), fmt.Sprintf("%s[%d]", path, i)); d != "" {
				return d
			}
		}
	case reflect.Map:
		if a.IsNil() != b.IsNil() {
			return fmt.Sprintf("%s: nil %v, want nil %v", path, b.IsNil(), a.IsNil())
		}
		if a.Len() != b.Len() {
			return fmt.Sprintf("%s: len %d, want %d", path, b.Len(), a.Len())
		}
		for _, k := range a.MapKeys() {
			bv := b.MapIndex(k)
			if !bv.IsValid() {
				return fmt.Sprintf("%s: no key %v", path, k)
			}
			if d := exact(a.MapIndex(k), bv, fmt.Sprintf("%s[%v]", path, k)); d != "" {
				return d
			}
		}
	case reflect.Struct:
		for i := range a.NumField() {
			if d := exact(a.Field(i), b.Field(i), path+"."+a.Type().Field(i).Name); d != "" {
				return d
			}
		}
	default:
		return fmt.Sprintf("%s: kind %s not compared", path, a.Kind())
	}
	return ""
}

func exactly(a, b any) string { return exact(reflect.ValueOf(a), reflect.ValueOf(b), "") }

// mutable collects the addresses of the maps and the backing arrays of
// the non-empty slices v reaches: two values that share one share memory
// an edit of one reaches the other by.
func mutable(v reflect.Value, into map[uintptr]string, path string) {
	switch v.Kind() {
	case reflect.Pointer:
		if !v.IsNil() {
			into[v.Pointer()] = path
			mutable(v.Elem(), into, path)
		}
	case reflect.Interface:
		if !v.IsNil() {
			mutable(v.Elem(), into, path)
		}
	case reflect.Slice:
		if v.Cap() > 0 {
			into[v.Pointer()] = path
		}
		for i := range v.Len() {
			mutable(v.Index(i), into, fmt.Sprintf("%s[%d]", path, i))
		}
	case reflect.Map:
		if !v.IsNil() {
			into[v.Pointer()] = path
		}
		for _, k := range v.MapKeys() {
			mutable(v.MapIndex(k), into, fmt.Sprintf("%s[%v]", path, k))
		}
	case reflect.Struct:
		if v.Type() == reflect.TypeFor[time.Time]() {
			return // immutable; its location is shared by design
		}
		for i := range v.NumField() {
			mutable(v.Field(i), into, path+"."+v.Type().Field(i).Name)
		}
	}
}

// shared names memory a and b share, "" when none.
func shared(a, b any) string {
	ma, mb := map[uintptr]string{}, map[uintptr]string{}
	mutable(reflect.ValueOf(a), ma, "")
	mutable(reflect.ValueOf(b), mb, "")
	for p, at := range ma {
		if bt, ok := mb[p]; ok {
			return fmt.Sprintf("%s and %s", at, bt)
		}
	}
	return ""
}

// hard floats: the ones a decimal round trip or == loses.
var hardFloats = []float64{
	0, math.Copysign(0, -1), 1, -1, 0.1, 1e300, -1e-300, math.SmallestNonzeroFloat64, -math.SmallestNonzeroFloat64,
	math.MaxFloat64, -math.MaxFloat64, 1 << 53, 1<<53 + 1, math.Inf(1), math.Inf(-1), math.NaN(),
	math.Float64frombits(0x7ff8_0000_dead_beef), math.Float64frombits(0xfff0_0000_0000_0001), 2.2250738585072011e-308,
}

var hardStrings = []string{
	"", "a", "\x00", "a\x00b", "\xff\xfe", "\xed\xa0\x80", "é", "\U0010ffff", "\ufffd", "\u2028", `"\`,
	string(make([]byte, 127)), string(make([]byte, 128)), string(make([]byte, 16384)), "sha256:" + string(rune(0xd800)),
}

// genJSON returns a random JSON-shaped value.
func genJSON(r *rand.Rand, depth int) any {
	n := 7
	if depth > 4 {
		n = 5
	}
	switch r.IntN(n) {
	case 0:
		return nil
	case 1:
		return r.IntN(2) == 0
	case 2:
		return hardStrings[r.IntN(len(hardStrings))]
	case 3:
		if r.IntN(2) == 0 {
			return hardFloats[r.IntN(len(hardFloats))]
		}
		return math.Float64frombits(r.Uint64())
	case 4:
		return fmt.Sprintf("s%d", r.IntN(1000))
	case 5:
		return genObject(r, depth+1)
	default:
		if r.IntN(5) == 0 {
			return []any(nil)
		}
		l := make([]any, r.IntN(4))
		for i := range l {
			l[i] = genJSON(r, depth+1)
		}
		return l
	}
}

func genObject(r *rand.Rand, depth int) map[string]any {
	switch r.IntN(6) {
	case 0:
		return nil
	case 1:
		return map[string]any{}
	}
	m := map[string]any{}
	for range r.IntN(5) + 1 {
		m[hardStrings[r.IntN(len(hardStrings))]+fmt.Sprint(r.IntN(9))] = genJSON(r, depth)
	}
	return m
}

// genOdd returns a value that is not JSON-shaped.
func genOdd(r *rand.Rand) any {
	loc := time.FixedZone("X", 3600)
	// Only values Clone copies deep or that hold nothing mutable: Clone
	// (jsonv.Clone) shares a []map[string]any, a map[string]string or a
	// []byte, as it did before the stores encoded (see the report).
	vals := []any{
		3, int64(-1), json.Number("1.0"), []string{"a"}, []string(nil),
		time.Now(), time.Date(2020, 1, 2, 3, 4, 5, 6, loc), (*int)(nil), map[string]int(nil), struct{ N int }{4},
		float32(1.5), json.RawMessage(`{"a":1}`),
	}
	return vals[r.IntN(len(vals))]
}

func genStrs(r *rand.Rand) []string {
	switch r.IntN(4) {
	case 0:
		return nil
	case 1:
		return []string{}
	}
	l := make([]string, r.IntN(3)+1)
	for i := range l {
		l[i] = hardStrings[r.IntN(len(hardStrings))]
	}
	return l
}

func genOptStr(r *rand.Rand) *string {
	if r.IntN(2) == 0 {
		return nil
	}
	s := hardStrings[r.IntN(len(hardStrings))]
	return &s
}

// genEntry returns a random entry of run at seq; odd ones hold a value
// the encoding cannot give back exactly.
func genEntry(r *rand.Rand, run string, seq int, odd bool) TranscriptEntry {
	e := TranscriptEntry{RunID: run, Seq: seq, EntryHash: fmt.Sprintf("h%d", seq), PrevHash: "p", ChainHash: fmt.Sprintf("c%d", seq)}
	if r.IntN(4) == 0 {
		e.ChainHash = ""
	}
	if r.IntN(2) == 0 {
		e.Kind = "call"
		c := &ToolCallEnvelope{EnvelopeVersion: "v1", ToolCallID: fmt.Sprintf("tc%d", seq), RunID: run, CapabilityID: hardStrings[r.IntN(len(hardStrings))],
			Args: genObject(r, 0), Metadata: genObject(r, 0), EvidenceRefs: genStrs(r), PolicyDecisionID: genOptStr(r),
			IdempotencyKey: genOptStr(r), AuthRef: genOptStr(r), ApprovalModeEffective: runcontext.ApprovalMode("x\x00")}
		if r.IntN(3) > 0 {
			c.PrincipalChain = make([]runcontext.Principal, r.IntN(3))
			for i := range c.PrincipalChain {
				c.PrincipalChain[i] = runcontext.Principal{Kind: "user", ID: hardStrings[r.IntN(len(hardStrings))]}
			}
		}
		if odd {
			if c.Args == nil {
				c.Args = map[string]any{}
			}
			c.Args["odd"] = genOdd(r)
		}
		e.Call = c
		return e
	}
	e.Kind = "result"
	res := &ToolResultEnvelope{EnvelopeVersion: "v1", ToolCallID: fmt.Sprintf("tc%d", seq), RunID: run, Status: StatusOK,
		Output: genObject(r, 0), Artifacts: genStrs(r), Mutations: genStrs(r), RiskTags: genStrs(r), PolicyDecisionID: genOptStr(r),
		LatencyMS: r.Int64() - r.Int64()}
	if r.IntN(2) == 0 {
		res.Error = &ToolError{Code: "c", Retryable: true, Details: genObject(r, 0)}
	}
	if r.IntN(3) > 0 {
		res.Citations = make([]Citation, r.IntN(3))
	}
	res.Metadata.CostCents = hardFloats[r.IntN(len(hardFloats))]
	res.Metadata.Signals, res.Metadata.EvidenceHashes = genStrs(r), genStrs(r)
	res.Metadata.Retries, res.Metadata.Tokens = -r.IntN(1<<30), math.MinInt64
	if r.IntN(2) == 0 {
		b := r.IntN(2) == 0
		res.Metadata.Retryable = &b
	}
	if odd {
		if r.IntN(3) == 0 {
			res.Approval = &ApprovalRequest{GateID: "g", RequestedAt: time.Now().In(time.FixedZone("Y", -7200))}
		} else {
			res.Output = map[string]any{"odd": []any{genOdd(r)}}
		}
	}
	e.Result = res
	return e
}

// deepCopy is the reference copy: through JSON would lose the very
// things under test, so a reflect walk that copies every map and slice.
func deepCopy(v reflect.Value) reflect.Value {
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			return v
		}
		n := reflect.New(v.Type().Elem())
		n.Elem().Set(deepCopy(v.Elem()))
		return n
	case reflect.Interface:
		if v.IsNil() {
			return v
		}
		n := reflect.New(v.Type()).Elem()
		n.Set(deepCopy(v.Elem()))
		return n
	case reflect.Slice:
		if v.IsNil() {
			return v
		}
		n := reflect.MakeSlice(v.Type(), v.Len(), v.Len())
		for i := range v.Len() {
			n.Index(i).Set(deepCopy(v.Index(i)))
		}
		return n
	case reflect.Map:
		if v.IsNil() {
			return v
		}
		n := reflect.MakeMapWithSize(v.Type(), v.Len())
		for _, k := range v.MapKeys() {
			n.SetMapIndex(k, deepCopy(v.MapIndex(k)))
		}
		return n
	case reflect.Struct:
		if v.Type() == reflect.TypeFor[time.Time]() || !allExported(v.Type()) {
			return v
		}
		n := reflect.New(v.Type()).Elem()
		for i := range v.NumField() {
			n.Field(i).Set(deepCopy(v.Field(i)))
		}
		return n
	}
	return v
}

func allExported(t reflect.Type) bool {
	for i := range t.NumField() {
		if !t.Field(i).IsExported() {
			return false
		}
	}
	return true
}

func refCopy[T any](v T) T { return deepCopy(reflect.ValueOf(&v).Elem()).Interface().(T) }

// The in-memory transcript gives back, for random runs of random entries
// (JSON-shaped values at their hardest, odd ones among them, interleaved,
// some runs dropped by the run limit), exactly what was appended, in
// order, as fresh copies each read.
func TestMemoryTranscriptAdversarialRoundTrip(t *testing.T) {
	ctx := context.Background()
	for seed := range uint64(40) {
		r := rand.New(rand.NewPCG(seed, seed*7+1))
		limit := r.IntN(4) // 0: no limit
		m := NewMemoryTranscriptLimit(limit)
		want := map[string][]TranscriptEntry{}
		var order []string
		for i := range 60 {
			run := fmt.Sprintf("run_%d", r.IntN(6))
			if r.IntN(10) == 0 {
				run = "run_\x00\xff"
			}
			if _, ok := want[run]; !ok {
				order = append(order, run)
				if limit > 0 && len(order) > limit {
					delete(want, order[0])
					order = order[1:]
				}
				want[run] = []TranscriptEntry{}
			}
			e := genEntry(r, run, len(want[run])+i*100, r.IntN(5) == 0)
			ref := refCopy(e)
			if err := m.Append(ctx, e); err != nil {
				t.Fatal(err)
			}
			want[run] = append(want[run], ref)
		}
		for _, run := range order {
			got := m.Entries(run)
			if d := exactly(want[run], got); d != "" {
				t.Fatalf("seed %d run %q: read back differs: %s", seed, run, d)
			}
			again := m.Entries(run)
			if s := shared(got, again); s != "" {
				t.Fatalf("seed %d run %q: two reads share %s", seed, run, s)
			}
		}
		all := m.Entries("")
		var wantAll []TranscriptEntry
		for _, run := range order {
			wantAll = append(wantAll, want[run]...)
		}
		if d := exactly(wantAll, all); d != "" {
			t.Fatalf("seed %d: every run read back differs: %s", seed, d)
		}
	}
}

// What was appended, edited afterwards by its appender, changes nothing
// an encoded entry's store keeps; what was read, edited, changes nothing
// for the next read.
func TestMemoryTranscriptEditsReachNothing(t *testing.T) {
	ctx := context.Background()
	r := rand.New(rand.NewPCG(9, 9))
	m := NewMemoryTranscript()
	var want []TranscriptEntry
	for i := range 30 {
		e := genEntry(r, "run_1", i, false)
		want = append(want, refCopy(e))
		if err := m.Append(ctx, e); err != nil {
			t.Fatal(err)
		}
		scribble(reflect.ValueOf(&e).Elem())
	}
	got := m.Entries("run_1")
	for i := range got {
		scribble(reflect.ValueOf(&got[i]).Elem())
	}
	if d := exactly(want, m.Entries("run_1")); d != "" {
		t.Fatalf("an edit reached the store: %s", d)
	}
}

// scribble edits every map, slice element and pointee v reaches.
func scribble(v reflect.Value) {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			if v.Kind() == reflect.Interface && v.Elem().Kind() != reflect.Map && v.Elem().Kind() != reflect.Slice && v.Elem().Kind() != reflect.Pointer {
				return
			}
			scribble(v.Elem())
		}
	case reflect.Slice:
		for i := range v.Len() {
			scribble(v.Index(i))
		}
	case reflect.Map:
		if v.Type() == reflect.TypeFor[map[string]any]() && !v.IsNil() {
			for _, k := range v.MapKeys() {
				scribble(v.MapIndex(k))
			}
			v.SetMapIndex(reflect.ValueOf("scribbled"), reflect.ValueOf(any(1.0)))
		}
	case reflect.String:
		if v.CanSet() {
			v.SetString("scribbled")
		}
	case reflect.Bool:
		if v.CanSet() {
			v.SetBool(!v.Bool())
		}
	case reflect.Float64:
		if v.CanSet() {
			v.SetFloat(42)
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				scribble(v.Field(i))
			}
		}
	}
}

// An entry whose hashes were computed before it was stored verifies
// after it is read back: its envelope's digest is the same, bytes and
// all, for the hardest values.
func TestMemoryTranscriptChainVerifiesAfterReadBack(t *testing.T) {
	ctx := context.Background()
	for seed := range uint64(20) {
		r := rand.New(rand.NewPCG(seed, 3))
		m := NewMemoryTranscript()
		prev := GenesisHash
		var appended []TranscriptEntry
		for i := range 20 {
			e := genEntry(r, "run_v", i, false)
			if e.Call != nil {
				e.Call.Args = finiteJSON(e.Call.Args)
				e.Call.Metadata = finiteJSON(e.Call.Metadata)
				e.Call.ApprovalModeEffective = runcontext.ReadOnly
			} else {
				e.Result.Output = finiteJSON(e.Result.Output)
				if e.Result.Error != nil {
					e.Result.Error.Details = finiteJSON(e.Result.Error.Details)
				}
				e.Result.Metadata.CostCents = 1.25
				e.Result.LatencyMS, e.Result.Metadata.Tokens, e.Result.Metadata.Retries = 0, 7, -3
			}
			h, err := entryDigest(e)
			if err != nil {
				t.Fatalf("seed %d entry %d: %v", seed, i, err)
			}
			e.EntryHash, e.PrevHash, e.ChainHash = h, prev, chain(prev, h)
			prev = e.ChainHash
			appended = append(appended, e)
			if err := m.Append(ctx, e); err != nil {
				t.Fatal(err)
			}
		}
		got := m.Entries("run_v")
		head, err := VerifyTranscript(got)
		if err != nil || head != prev {
			t.Fatalf("seed %d: read back verifies %q, %v; want %q", seed, head, err, prev)
		}
		for i := range got {
			a, errA := envOf(appended[i]).AppendCanonical(nil)
			b, errB := envOf(got[i]).AppendCanonical(nil)
			if errA != nil || errB != nil || string(a) != string(b) {
				t.Fatalf("seed %d entry %d: canonical bytes differ", seed, i)
			}
		}
	}
}

func envOf(e TranscriptEntry) canon.Appender {
	if e.Call != nil {
		return callEncoding{e: e.Call}
	}
	return resultEncoding{r: e.Result}
}

// finiteJSON replaces the floats the canonical form has none for.
func finiteJSON(m map[string]any) map[string]any {
	var fix func(v any) any
	fix = func(v any) any {
		switch x := v.(type) {
		case float64:
			if _, err := canon.AppendFloat(nil, x); err != nil {
				return 0.5 // NaN, ±Inf, an integer beyond 2⁵³: no canonical form
			}
		case map[string]any:
			for k, e := range x {
				x[k] = fix(e)
			}
		case []any:
			for i, e := range x {
				x[i] = fix(e)
			}
		}
		return v
	}
	fix(m)
	return m
}

// Runs appended to from many goroutines, read while they are appended
// to, each keep their entries in order (run with -race).
func TestMemoryTranscriptConcurrentRuns(t *testing.T) {
	ctx := context.Background()
	m := NewMemoryTranscriptLimit(64)
	var wg sync.WaitGroup
	want := make([][]TranscriptEntry, 8)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(g), 1))
			run := fmt.Sprintf("run_%d", g)
			for i := range 40 {
				e := genEntry(r, run, i, i%7 == 3)
				want[g] = append(want[g], refCopy(e))
				if err := m.Append(ctx, e); err != nil {
					t.Error(err)
					return
				}
				if i%5 == 0 {
					got := m.Entries(run)
					scribble(reflect.ValueOf(got))
					_ = m.Entries("")
				}
			}
		}()
	}
	wg.Wait()
	for g := range 8 {
		if d := exactly(want[g], m.Entries(fmt.Sprintf("run_%d", g))); d != "" {
			t.Errorf("run %d: %s", g, d)
		}
	}
}

// A run's index (the fork refusal) holds for entries at positions an
// int32 does not hold, and an entry appended again after a refusal.
func TestMemoryTranscriptForkRefusalAtEveryPosition(t *testing.T) {
	ctx := context.Background()
	m := NewMemoryTranscript()
	seqs := []int{0, 1, -1, math.MaxInt32, math.MaxInt32 + 1, 1 << 40, math.MinInt32 - 1, 5}
	for _, s := range seqs {
		if err := m.Append(ctx, TranscriptEntry{RunID: "r", Seq: s, Kind: "call", ChainHash: fmt.Sprint("c", s)}); err != nil {
			t.Fatalf("seq %d: %v", s, err)
		}
	}
	for _, s := range seqs {
		if s > 5 {
			continue // at or above the run's highest position: not looked for
		}
		if err := m.Append(ctx, TranscriptEntry{RunID: "r", Seq: s, Kind: "call", ChainHash: "other"}); err == nil {
			t.Errorf("seq %d: a fork was kept", s)
		}
	}
	// An int32 truncation of a high position must not be read as a low one.
	m2 := NewMemoryTranscript()
	_ = m2.Append(ctx, TranscriptEntry{RunID: "r", Seq: 1<<32 + 3, Kind: "call", ChainHash: "hi"})
	if err := m2.Append(ctx, TranscriptEntry{RunID: "r", Seq: 3, Kind: "call", ChainHash: "lo"}); err != nil {
		t.Errorf("position 3 refused for an entry at 2³²+3: %v", err)
	}
	if got := m2.Entries("r"); len(got) != 2 || got[0].Seq != 1<<32+3 || got[1].Seq != 3 {
		t.Errorf("read back %+v", got)
	}
}

// The idempotency store's completed result comes back exactly, as a
// fresh copy, to claimers that waited for it and to those after.
func TestMemoryIdempotencyAdversarial(t *testing.T) {
	ctx := context.Background()
	for seed := range uint64(30) {
		r := rand.New(rand.NewPCG(seed, 5))
		e := genEntry(r, "run", 0, seed%3 == 0)
		for e.Result == nil {
			e = genEntry(r, "run", 0, seed%3 == 0)
		}
		res := e.Result
		want := refCopy(res)
		m := NewMemoryIdempotency()
		if _, claimed, _ := m.Claim(ctx, "k"); !claimed {
			t.Fatal("first claim not claimed")
		}
		var wg sync.WaitGroup
		got := make([]*ToolResultEnvelope, 6)
		for i := range got {
			wg.Add(1)
			go func() {
				defer wg.Done()
				g, claimed, err := m.Claim(ctx, "k")
				if claimed || err != nil {
					t.Errorf("waiting claim %d: claimed %v, %v", i, claimed, err)
				}
				got[i] = g
			}()
		}
		time.Sleep(time.Millisecond)
		if err := m.Complete(ctx, "k", res); err != nil {
			t.Fatal(err)
		}
		if res.Approval == nil {
			scribble(reflect.ValueOf(res))
		}
		_ = m.Release(ctx, "k") // a completed key is kept
		wg.Wait()
		after, _, _ := m.Claim(ctx, "k")
		got = append(got, after)
		for i, g := range got {
			if d := exactly(want, g); d != "" {
				t.Fatalf("seed %d claim %d: %s", seed, i, d)
			}
			for j := range i {
				if s := shared(got[j], g); s != "" {
					t.Fatalf("seed %d: claims %d and %d share %s", seed, j, i, s)
				}
			}
		}
	}
}

// FuzzMemoryTranscriptExact appends the entries a fuzzed seed generates
// (and a fuzzed JSON document as args, output and details) and holds the
// read-back to the appended values exactly: reflect.DeepEqual, which
// FuzzEntryCodec uses, takes -0 for 0.
func FuzzMemoryTranscriptExact(f *testing.F) {
	f.Add(uint64(1), []byte(`{"a":-0,"b":[-0.0,1e-320,{"c":null}],"d":"\ud800"}`))
	f.Add(uint64(2), []byte(`{}`))
	f.Fuzz(func(t *testing.T, seed uint64, doc []byte) {
		r := rand.New(rand.NewPCG(seed, seed>>7))
		var v map[string]any
		if json.Unmarshal(doc, &v) != nil {
			v = nil
		}
		m := NewMemoryTranscriptLimit(2)
		var want []TranscriptEntry
		for i := range 6 {
			e := genEntry(r, "run", i, r.IntN(4) == 0)
			if v != nil {
				if e.Call != nil {
					e.Call.Metadata = v
				} else if e.Result.Approval == nil {
					e.Result.Output = v
				}
			}
			want = append(want, refCopy(e))
			if err := m.Append(context.Background(), e); err != nil {
				t.Fatal(err)
			}
		}
		if d := exactly(want, m.Entries("run")); d != "" {
			t.Fatalf("read back differs: %s", d)
		}
	})
}
