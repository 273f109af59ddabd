package engine

import (
	"bytes"
	"encoding"
	"encoding/json"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/internal/jsonv"
	"github.com/contextos/contextos/replay"
	"github.com/contextos/contextos/runcontext"
)

// The checkpoint members marshalCheckpoint writes without reflection
// (checkpointvalues.go) are held here to json.Marshal's bytes and errors
// for arbitrary values: random states with every exported member set or
// not, strings with every character encoding/json escapes (HTML, control,
// U+2028/2029, invalid UTF-8), floats at and around the exponent-form
// cutoffs and not finite, approval modes it refuses, and values of
// other types inside args and output maps (left to encoding/json).

// oddStrings are strings encoding/json writes with escapes, or not.
var oddStrings = []string{"", "plain", "a<b>&c", "\u2028\u2029", "q\"uo\\te", "\x00\x01\x1f\x7f", "\b\f\n\r\t",
	"bad\xff\xfe", "\xe2\x80", "é日本🙂", "\ufffd", "</script>", "x_ext", "zz", "AA", "a"}

// valueGen fills values of any type at random.
type valueGen struct {
	r     *rand.Rand
	extra string // a fuzzer's string, used among oddStrings
	depth int
}

func (g *valueGen) str() string {
	switch n := g.r.IntN(len(oddStrings) + 3); {
	case n < len(oddStrings):
		return oddStrings[n]
	case n == len(oddStrings):
		return g.extra
	default:
		var b strings.Builder
		for range g.r.IntN(6) {
			b.WriteString(oddStrings[g.r.IntN(len(oddStrings))])
		}
		return b.String()
	}
}

func (g *valueGen) float() float64 {
	switch g.r.IntN(14) {
	case 0:
		return 0
	case 1:
		return math.Copysign(0, -1)
	case 2:
		return 1e-6
	case 3:
		return math.Nextafter(1e-6, 0)
	case 4:
		return 1e21
	case 5:
		return math.Nextafter(1e21, 0)
	case 6:
		return -1e-7
	case 7:
		return 1.5e300
	case 8:
		return 5e-324
	case 9:
		if g.r.IntN(50) == 0 { // rarely: no JSON form
			return [...]float64{math.NaN(), math.Inf(1), math.Inf(-1)}[g.r.IntN(3)]
		}
		return 0.1
	case 10:
		return float64(g.r.Int64N(1<<53)) - 1<<52
	default:
		return g.r.NormFloat64() * math.Pow(10, float64(g.r.IntN(50)-25))
	}
}

// anyValue is a value of a JSON map or list: mostly JSON's own types,
// sometimes another Go type.
func (g *valueGen) anyValue() any {
	switch g.r.IntN(16) {
	case 0:
		return nil
	case 1, 2:
		return g.str()
	case 3:
		return g.r.IntN(2) == 0
	case 4, 5:
		return g.float()
	case 6:
		return g.r.IntN(1000) - 500
	case 7:
		return g.r.Int64()
	case 8, 9:
		if g.depth > 4 {
			return "deep"
		}
		g.depth++
		defer func() { g.depth-- }()
		m := map[string]any{}
		if g.r.IntN(6) == 0 {
			return map[string]any(nil)
		}
		for range g.r.IntN(4) {
			m[g.str()] = g.anyValue()
		}
		return m
	case 10, 11:
		if g.depth > 4 {
			return []any{}
		}
		g.depth++
		defer func() { g.depth-- }()
		if g.r.IntN(6) == 0 {
			return []any(nil)
		}
		l := []any{}
		for range g.r.IntN(4) {
			l = append(l, g.anyValue())
		}
		return l
	case 12:
		return json.Number([...]string{"12", "1.5e3", "-0", "0.5", "1", "2", "3", "x"}[g.r.IntN(8)]) // rarely not a number
	case 13:
		return []string{g.str(), g.str()}
	case 14:
		return int32(g.r.IntN(100))
	default:
		return struct {
			A string  `json:"a"`
			B float64 `json:"b,omitempty"`
		}{g.str(), g.float()}
	}
}

var (
	approvalModeType = reflect.TypeFor[runcontext.ApprovalMode]()
	timeType         = reflect.TypeFor[time.Time]()
	anyType          = reflect.TypeFor[any]()
)

// fill sets v (settable) to a random value of its type.
func (g *valueGen) fill(v reflect.Value) {
	t := v.Type()
	switch {
	case t == approvalModeType:
		modes := []runcontext.ApprovalMode{"", runcontext.ReadOnly, runcontext.ReadOnly, "bogus"} // rarely one it refuses
		v.SetString(string(modes[g.r.IntN(len(modes))]))
		if g.r.IntN(8) > 0 && v.String() == "bogus" {
			v.SetString("")
		}
		return
	case t == timeType:
		at := time.Date(2026, 12, 6, 10, 0, 0, g.r.IntN(1e9), time.UTC)
		v.Set(reflect.ValueOf(at.In(time.FixedZone("z", 60*(g.r.IntN(120)-60)))))
		return
	case t == anyType:
		if x := g.anyValue(); x != nil {
			v.Set(reflect.ValueOf(x))
		}
		return
	}
	switch t.Kind() {
	case reflect.String:
		v.SetString(g.str())
	case reflect.Bool:
		v.SetBool(g.r.IntN(2) == 0)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		switch g.r.IntN(4) {
		case 0:
			v.SetInt(0)
		case 1:
			v.SetInt(-g.r.Int64N(100))
		default:
			v.SetInt(g.r.Int64N(1 << 20))
		}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(g.r.Uint64N(200))
	case reflect.Float32, reflect.Float64:
		v.SetFloat(g.float())
	case reflect.Pointer:
		if g.depth > 6 || g.r.IntN(4) == 0 {
			return
		}
		p := reflect.New(t.Elem())
		g.depth++
		g.fill(p.Elem())
		g.depth--
		v.Set(p)
	case reflect.Slice:
		switch n := g.r.IntN(5); {
		case n == 0 || g.depth > 6:
		case n == 1:
			v.Set(reflect.MakeSlice(t, 0, 0))
		default:
			s := reflect.MakeSlice(t, n-1, n-1)
			g.depth++
			for i := range n - 1 {
				g.fill(s.Index(i))
			}
			g.depth--
			v.Set(s)
		}
	case reflect.Map:
		switch n := g.r.IntN(5); {
		case n == 0 || g.depth > 6:
		default:
			m := reflect.MakeMapWithSize(t, n)
			g.depth++
			for range n - 1 {
				k := reflect.New(t.Key()).Elem()
				g.fill(k)
				e := reflect.New(t.Elem()).Elem()
				g.fill(e)
				m.SetMapIndex(k, e)
			}
			g.depth--
			v.Set(m)
		}
	case reflect.Struct:
		for i := range t.NumField() {
			if t.Field(i).IsExported() && g.r.IntN(5) > 0 {
				g.fill(v.Field(i))
			}
		}
	case reflect.Array:
		for i := range v.Len() {
			g.fill(v.Index(i))
		}
	}
}

// randomCheckpoint is a state with members set at random. The request and
// run contexts (written by their own MarshalJSON, as before) and an
// unconfirmed record (left to encoding/json) are mostly left nil, so
// their errors do not hide the members under test.
func randomCheckpoint(r *rand.Rand, extra string) *checkpointState {
	g := &valueGen{r: r, extra: extra}
	st := &checkpointState{}
	v := reflect.ValueOf(st).Elem()
	t := v.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() || r.IntN(6) == 0 {
			continue
		}
		switch f.Name {
		case "Request", "Run", "Origin", "Unconfirmed":
			continue
		}
		g.fill(v.Field(i))
	}
	// A plan with a replan reason carries no steps; the writer does not
	// care, and the state is not validated here.
	return st
}

// sameAsJSON fails t unless marshalCheckpoint writes json.Marshal's bytes
// of st, or fails as it does.
func sameAsJSON(t *testing.T, st *checkpointState) {
	t.Helper()
	got, err := marshalCheckpoint(st)
	want, werr := json.Marshal(st)
	if (err == nil) != (werr == nil) || err != nil && err.Error() != werr.Error() || !bytes.Equal(got, want) {
		t.Fatalf("marshalCheckpoint wrote\n%q (%v)\njson.Marshal writes\n%q (%v)", got, err, want, werr)
	}
}

// TestCheckpointValuesAreJSONMarshal is the differential test: random
// states, written by marshalCheckpoint and by json.Marshal.
func TestCheckpointValuesAreJSONMarshal(t *testing.T) {
	n := 3000
	if testing.Short() {
		n = 300
	}
	r := rand.New(rand.NewPCG(37, 1))
	failed := 0
	for i := range n {
		st := randomCheckpoint(r, oddStrings[i%len(oddStrings)])
		sameAsJSON(t, st)
		if _, err := json.Marshal(st); err != nil {
			failed++
		}
	}
	// Most states encode: the comparison is of bytes, not only of errors.
	if failed > n/3 {
		t.Fatalf("%d of %d random states fail to encode", failed, n)
	}
}

// TestCheckpointValueEdges holds the writers to json.Marshal on the values
// the random states may miss: each odd string and float alone in every
// place, nil against empty containers, a map holding itself (a cycle
// encoding/json reports) and maps nested past maxValueDepth.
func TestCheckpointValueEdges(t *testing.T) {
	for _, s := range append(oddStrings, strings.Repeat("<é\u2028\xff", 50)) {
		if got, want := jsonv.AppendString(nil, s), mustJSON(t, s); !bytes.Equal(got, want) {
			t.Fatalf("string %q: wrote %s, json.Marshal %s", s, got, want)
		}
	}
	g := &valueGen{r: rand.New(rand.NewPCG(1, 2))}
	for range 2000 {
		if f := g.float(); !math.IsNaN(f) && !math.IsInf(f, 0) {
			if got, want := appendJSONFloat(nil, f), mustJSON(t, f); !bytes.Equal(got, want) {
				t.Fatalf("float %v: wrote %s, json.Marshal %s", f, got, want)
			}
		}
	}
	nested := map[string]any{}
	deep := nested
	for range 3 * maxValueDepth {
		next := map[string]any{"l": []any{1.5, "<"}}
		deep["n"] = next
		deep = next
	}
	cycle := map[string]any{"a": 1.0}
	cycle["self"] = cycle
	nan := map[string]any{"n": math.NaN()}
	for _, out := range []map[string]any{nil, {}, nested, cycle, nan, {"t": time.Unix(0, 0).UTC(), "r": json.RawMessage(` {"b" : 1} `)}} {
		res := &gateway.ToolResultEnvelope{Output: out}
		for _, st := range []*checkpointState{
			{Results: []StepResult{{Step: Step{Args: out}, Result: res}}},
			{Results: []StepResult{}, Plan: &Plan{Decision: &DecisionProposal{Outputs: out}}},
			{Outcomes: []replay.AdapterOutcome{{Outcome: &gateway.Outcome{Output: out}, Error: &gateway.ToolError{Details: out}}}},
		} {
			sameAsJSON(t, st)
		}
	}
	for _, m := range []runcontext.ApprovalMode{"", runcontext.ReadOnly, "bogus"} {
		sameAsJSON(t, &checkpointState{Plan: &Plan{Steps: []Step{{ApprovalMode: m}}}})
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestCheckpointValueTypes fails when a type the checkpoint writer writes
// member by member gains a JSON or text method, which encoding/json would
// call and the writer does not. (A new member is caught by the random
// states above: the writer would leave it out.)
func TestCheckpointValueTypes(t *testing.T) {
	marshaler := reflect.TypeFor[json.Marshaler]()
	texter := reflect.TypeFor[encoding.TextMarshaler]()
	for _, typ := range []reflect.Type{
		reflect.TypeFor[Plan](), reflect.TypeFor[Step](), reflect.TypeFor[DecisionProposal](), reflect.TypeFor[PlanUsage](),
		reflect.TypeFor[StepResult](), reflect.TypeFor[gateway.ToolResultEnvelope](), reflect.TypeFor[gateway.ResultMetadata](),
		reflect.TypeFor[gateway.ToolError](), reflect.TypeFor[gateway.Citation](), reflect.TypeFor[gateway.ChainState](),
		reflect.TypeFor[gateway.Status](), reflect.TypeFor[runcontext.Usage](), reflect.TypeFor[replay.AdapterOutcome](),
		reflect.TypeFor[gateway.Outcome](), reflect.TypeFor[runcontext.AgentIdentity](), reflect.TypeFor[runcontext.Principal](),
		reflect.TypeFor[runcontext.PrincipalKind](), reflect.TypeFor[runcontext.Lifecycle](), reflect.TypeFor[runcontext.IdentityClaim](),
		reflect.TypeFor[runcontext.Delegation](), reflect.TypeFor[runcontext.AuthType](), reflect.TypeFor[runcontext.RunBudget](),
		reflect.TypeFor[runcontext.TraceContext](), reflect.TypeFor[runcontext.Input](), reflect.TypeFor[runcontext.Mode](),
		reflect.TypeFor[runcontext.RuntimeHints](), reflect.TypeFor[runcontext.Attachment](), reflect.TypeFor[runcontext.Trace](),
	} {
		for _, tt := range []reflect.Type{typ, reflect.PointerTo(typ)} {
			if tt.Implements(marshaler) || tt.Implements(texter) {
				t.Errorf("%v has a JSON or text method: the checkpoint writer (checkpointvalues.go) must call it", tt)
			}
		}
	}
}

// FuzzCheckpointValues holds the hand-written writers to json.Marshal: the
// string and float writers for the fuzzer's string and float, and the
// whole checkpoint for a random state (from seed) holding the string.
func FuzzCheckpointValues(f *testing.F) {
	for i, s := range oddStrings {
		f.Add(s, []float64{0, 1e-7, 1e21, 0.1, -2.5e-300, 123456789}[i%6], uint64(i))
	}
	f.Add("\xed\xa0\x80 surrogate", math.MaxFloat64, uint64(99))
	f.Fuzz(func(t *testing.T, s string, x float64, seed uint64) {
		if got, want := jsonv.AppendString(nil, s), mustJSON(t, s); !bytes.Equal(got, want) {
			t.Fatalf("string %q: wrote %s, json.Marshal %s", s, got, want)
		}
		if !math.IsNaN(x) && !math.IsInf(x, 0) {
			if got, want := appendJSONFloat(nil, x), mustJSON(t, x); !bytes.Equal(got, want) {
				t.Fatalf("float %v: wrote %s, json.Marshal %s", x, got, want)
			}
		}
		st := randomCheckpoint(rand.New(rand.NewPCG(seed, seed>>7)), s)
		if st.Usage.CostCents = x; seed%2 == 0 {
			st.MeterUsage.CostCents = x
		}
		sameAsJSON(t, st)
	})
}

// randomRun fills a run context and a request at random; their extension
// members and the user's unknown claims are mostly left out (with them,
// MarshalJSON writes them itself).
func randomRun(r *rand.Rand, extra string) (*runcontext.RunContext, *runcontext.InvokeRequest) {
	g := &valueGen{r: r, extra: extra}
	rc, req := &runcontext.RunContext{}, &runcontext.InvokeRequest{}
	g.fill(reflect.ValueOf(rc).Elem())
	g.fill(reflect.ValueOf(req).Elem())
	ext := func() map[string]json.RawMessage {
		if r.IntN(8) > 0 {
			return nil
		}
		return map[string]json.RawMessage{"x_" + g.str(): json.RawMessage(`{"b": 1, "a": "<"}`), "run_id": json.RawMessage(`1`)}
	}
	rc.Extensions, rc.User.Claims, req.Extensions, req.User.Claims = ext(), ext(), ext(), ext()
	return rc, req
}

// TestCheckpointRunValues holds the run context's and the request's
// writers to their MarshalJSON (bytes and errors), and the checkpoint
// that holds them to json.Marshal's.
func TestCheckpointRunValues(t *testing.T) {
	n := 3000
	if testing.Short() {
		n = 300
	}
	r := rand.New(rand.NewPCG(37, 3))
	plain := 0
	for i := range n {
		rc, req := randomRun(r, oddStrings[i%len(oddStrings)])
		sameRun(t, rc, req)
		if _, err := rc.MarshalJSON(); err == nil && len(rc.Extensions) == 0 && len(rc.User.Claims) == 0 {
			plain++
		}
		st := randomCheckpoint(r, "")
		st.Run, st.Request = rc, req
		if i%3 == 0 {
			st.Origin = rc
		}
		sameAsJSON(t, st)
	}
	if plain < n/3 {
		t.Fatalf("only %d of %d run contexts are written by the writer: the test does not reach it", plain, n)
	}
}

func sameRun(t *testing.T, rc *runcontext.RunContext, req *runcontext.InvokeRequest) {
	t.Helper()
	got, err := encodeRunContext(rc)
	want, werr := rc.MarshalJSON()
	if (err == nil) != (werr == nil) || err != nil && err.Error() != werr.Error() || !bytes.Equal(got, want) {
		t.Fatalf("run context written as\n%s (%v)\nMarshalJSON writes\n%s (%v)", got, err, want, werr)
	}
	got, err = encodeRequest(req)
	want, werr = req.MarshalJSON()
	if (err == nil) != (werr == nil) || err != nil && err.Error() != werr.Error() || !bytes.Equal(got, want) {
		t.Fatalf("request written as\n%s (%v)\nMarshalJSON writes\n%s (%v)", got, err, want, werr)
	}
}

// FuzzCheckpointRunValues is TestCheckpointRunValues for the fuzzer's
// seed and string.
func FuzzCheckpointRunValues(f *testing.F) {
	for i, s := range oddStrings {
		f.Add(s, uint64(i))
	}
	f.Fuzz(func(t *testing.T, s string, seed uint64) {
		rc, req := randomRun(rand.New(rand.NewPCG(seed, seed>>9)), s)
		sameRun(t, rc, req)
	})
}

// TestCheckpointCacheOwnsItsBytes holds the request and run context JSON a
// state keeps between saves to its own copy: they are written into the
// pooled buffer of the save that encodes them, which later saves of other
// runs write over.
func TestCheckpointCacheOwnsItsBytes(t *testing.T) {
	a, b := fullCheckpoint(), fullCheckpoint()
	b.Request = &runcontext.InvokeRequest{RequestID: strings.Repeat("req_b", 40), TenantID: "t_b"}
	b.Run = &runcontext.RunContext{RunID: strings.Repeat("run_b", 40), SafetyMode: runcontext.ReadOnly}
	b.Origin = b.Run
	for range 3 {
		sameAsJSON(t, a)
		sameAsJSON(t, b)
	}
}
