package transport

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/contextos/contextos/internal/wire"
)

// sameAsMarshal fails unless appendRequest writes json.Marshal's bytes
// for r, or fails where json.Marshal fails.
func sameAsMarshal(t *testing.T, r *Request) {
	t.Helper()
	want, wantErr := json.Marshal(r)
	got, gotErr := marshalRequest(r)
	if (wantErr != nil) != (gotErr != nil) {
		t.Fatalf("error %v, json.Marshal's %v", gotErr, wantErr)
	}
	if wantErr == nil && !bytes.Equal(got, want) {
		t.Fatalf("envelope\n%s\njson.Marshal\n%s", got, want)
	}
}

// awkward are strings encoding/json escapes in every way it has.
var awkward = []string{"", "plain", `quote " and \ backslash`, "tab\tnew\nline\rcr\bbs\fff", "\x00\x01\x1f\x7f", "<script>&amp;</script>",
	"\u2028 and \u2029", "é ü 日本 🎉", "bad \xff utf-8 \xc3", "\xed\xa0\x80 surrogate", "ok\u00a0nbsp", strings.Repeat("long ", 40)}

func TestEnvelopeEncodingIsEncodingJSON(t *testing.T) {
	type named string
	type amount float64
	cyclic := map[string]any{}
	cyclic["self"] = cyclic
	full := &Request{ToolContractVersion: "v1", RequestID: "tool_0123456789abcdef", TaskID: "run_1", Namespace: "ns", Agent: "agent",
		Tool:  Tool{Name: "adp.cap", Operation: "invoke", Capabilities: []string{"data.read", "network.write"}, RiskLevel: "high"},
		Input: map[string]any{"order_id": "ord_881", "amount_inr": 1200.0}, InputRaw: `{"a":1}`,
		Runtime: &RuntimeInfo{Mode: "external", TimeoutMS: 15000, MaxAttempts: 3, Backoff: "exponential", MaxBackoffMS: 8000, Jitter: true},
		Auth:    &AuthInfo{Profile: "bearer", SecretRef: "tok", Scopes: []string{"a", "b"}}, Trace: &Trace{TraceID: "t", SpanID: "s"},
		Attempt: 2, IdempotencyKey: "ik"}
	cases := []*Request{
		{},
		full,
		{Tool: Tool{Capabilities: []string{}}, Input: map[string]any{}, Runtime: &RuntimeInfo{}, Auth: &AuthInfo{Scopes: []string{}}, Trace: &Trace{}},
		{Attempt: -3, Runtime: &RuntimeInfo{TimeoutMS: math.MinInt64, MaxBackoffMS: math.MaxInt64, MaxAttempts: -1}},
		{Input: map[string]any{
			"floats": []any{0.0, math.Copysign(0, -1), 1.0, -1.5, 1e20, 1e21, 123456789e15, 1e-6, 9.99e-7, 1e-7, 5e-324, math.MaxFloat64, -math.SmallestNonzeroFloat64, 0.1, 1.0 / 3},
			"ints":   []any{0, -1, math.MaxInt64, int64(math.MinInt64), int32(7), uint8(8), uint64(math.MaxUint64)},
			"number": json.Number("12.50"), "bad number": nil, "named": named("x<y"), "amount": amount(2.5),
			"nested": map[string]any{"z": map[string]any{}, "a": []any{}, "nil map": map[string]any(nil), "nil slice": []any(nil), "m": []any{map[string]any{"k": true}}},
			"typed":  []string{"a", "<b>"}, "bytes": []byte("raw"), "time": time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC), "struct": struct{ A int }{1},
			"raw": json.RawMessage(`{ "spaced" : [1, 2] }`), "ptr": &full.Tool, "bools": []any{true, false, nil},
		}},
		{Input: map[string]any{"nan": math.NaN()}},
		{Input: map[string]any{"inf": math.Inf(-1)}},
		{Input: map[string]any{"chan": make(chan int)}},
		{Input: map[string]any{"cycle": cyclic}},
		{Input: map[string]any{"bad number": json.Number("1x")}},
		{Input: map[string]any{"deep": deep(200)}},
	}
	for _, s := range awkward {
		cases = append(cases, &Request{RequestID: s, Tool: Tool{Name: s, Capabilities: []string{s}}, Input: map[string]any{s: s, "k": []any{s}},
			Auth: &AuthInfo{SecretRef: s, Scopes: []string{s, s}}, Trace: &Trace{TraceID: s}, IdempotencyKey: s})
	}
	for _, r := range cases {
		sameAsMarshal(t, r)
	}
}

// deep is a value nested n maps deep.
func deep(n int) any {
	var v any = "bottom"
	for range n {
		v = map[string]any{"d": v}
	}
	return v
}

// TestEnvelopeEncoderKnowsEveryField fills every member of a request
// (and of the types it holds) by reflection: a member added to Request,
// Tool, RuntimeInfo, AuthInfo or Trace that appendRequest does not write
// fails here.
func TestEnvelopeEncoderKnowsEveryField(t *testing.T) {
	var r Request
	fill(reflect.ValueOf(&r).Elem(), 1)
	if r.Runtime == nil || r.Auth == nil || r.Trace == nil || len(r.Input) == 0 || r.Tool.RiskLevel == "" {
		t.Fatalf("fill left members empty: %+v", r)
	}
	sameAsMarshal(t, &r)
}

// fill sets every exported field of v to a value that is not empty.
func fill(v reflect.Value, n int) {
	switch v.Kind() {
	case reflect.String:
		v.SetString("s" + strings.Repeat("x", n))
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int64, reflect.Int32:
		v.SetInt(int64(n))
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(v.Elem(), n+1)
	case reflect.Slice:
		s := reflect.MakeSlice(v.Type(), 2, 2)
		fill(s.Index(0), n+1)
		fill(s.Index(1), n+2)
		v.Set(s)
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		m.SetMapIndex(reflect.ValueOf("k"), reflect.ValueOf(any("v")))
		v.Set(m)
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fill(v.Field(i), n+i)
			}
		}
	}
}

// TestEnvelopeEncodingOfGeneratedRequests: requests made of random
// values of every shape the input can hold.
func TestEnvelopeEncodingOfGeneratedRequests(t *testing.T) {
	rng := rand.New(rand.NewPCG(37, 1))
	for range 3000 {
		sameAsMarshal(t, genRequest(rng))
	}
}

func genRequest(rng *rand.Rand) *Request {
	str := func() string { return genString(rng) }
	maybe := func() bool { return rng.IntN(3) > 0 }
	r := &Request{Tool: Tool{Name: str()}}
	if maybe() {
		r.ToolContractVersion, r.RequestID, r.TaskID = str(), str(), str()
	}
	if maybe() {
		r.Namespace, r.Agent, r.Tool.Operation, r.Tool.RiskLevel = str(), str(), str(), str()
	}
	if maybe() {
		r.Tool.Capabilities = []string{str(), str()}[:rng.IntN(3)]
	}
	if maybe() {
		r.Input, _ = genValue(rng, 0, true).(map[string]any)
	}
	if rng.IntN(4) == 0 {
		r.InputRaw = str()
	}
	if maybe() {
		r.Runtime = &RuntimeInfo{Mode: str(), TimeoutMS: rng.Int64N(3) * rng.Int64(), MaxAttempts: rng.IntN(4), Backoff: str(), MaxBackoffMS: rng.Int64N(2) * 1000, Jitter: WireJitter(rng.IntN(2) == 0)}
	}
	if maybe() {
		r.Auth = &AuthInfo{Profile: str(), SecretRef: str(), Scopes: []string{str()}[:rng.IntN(2)]}
	}
	if maybe() {
		r.Trace = &Trace{TraceID: str(), SpanID: str()}
	}
	r.Attempt = rng.IntN(5) - 1
	if maybe() {
		r.IdempotencyKey = str()
	}
	return r
}

func genString(rng *rand.Rand) string {
	if rng.IntN(3) == 0 {
		return awkward[rng.IntN(len(awkward))]
	}
	const alphabet = "aZ09 _-.\"\\/<>&\n\t\x00\x1f\x7fé日🎉\u2028\xff"
	runes := []rune(alphabet)
	var b strings.Builder
	for range rng.IntN(12) {
		if rng.IntN(10) == 0 {
			b.WriteByte(byte(rng.IntN(256))) // any byte, valid UTF-8 or not
			continue
		}
		b.WriteRune(runes[rng.IntN(len(runes))])
	}
	return b.String()
}

// genValue is a random value of a type an input or output holds.
func genValue(rng *rand.Rand, depth int, object bool) any {
	k := rng.IntN(9)
	if object || (depth < 4 && k == 0) {
		m := map[string]any{}
		for range rng.IntN(6) {
			m[genString(rng)] = genValue(rng, depth+1, false)
		}
		return m
	}
	switch k {
	case 1:
		if depth >= 4 {
			return nil
		}
		a := []any{}
		for range rng.IntN(4) {
			a = append(a, genValue(rng, depth+1, false))
		}
		return a
	case 2:
		return genString(rng)
	case 3:
		return rng.IntN(2) == 0
	case 4:
		return nil
	case 5:
		return math.Float64frombits(rng.Uint64()) // any float: NaN and Inf included
	case 6:
		return float64(rng.IntN(2000)-1000) / []float64{1, 10, 1e7, 1e-22}[rng.IntN(4)]
	case 7:
		return rng.Int64() >> rng.IntN(64)
	}
	return []string{genString(rng)}
}

// FuzzEnvelopeEncodingIsEncodingJSON: whatever the request's strings and
// input hold, appendRequest writes json.Marshal's bytes.
func FuzzEnvelopeEncodingIsEncodingJSON(f *testing.F) {
	f.Add("tool_0123456789abcdef", "adp.cap", `{"order_id":"ord_881","amount_inr":1200}`, int64(1), 3)
	f.Add("<&>\u2028", "\xff", `{"a":[1e21,1e-7,-0,{"b":null}],"":"\u0000"}`, int64(-1), 0)
	f.Add("", "", `{}`, int64(0), 1)
	f.Fuzz(func(t *testing.T, id, name, input string, n int64, attempt int) {
		var in map[string]any
		_ = json.Unmarshal([]byte(input), &in)
		var num map[string]any
		dec := json.NewDecoder(strings.NewReader(input))
		dec.UseNumber()
		_ = dec.Decode(&num)
		for _, in := range []map[string]any{in, num} {
			sameAsMarshal(t, &Request{RequestID: id, Tool: Tool{Name: name, Capabilities: []string{name, id}}, Input: in, InputRaw: input,
				Runtime: &RuntimeInfo{TimeoutMS: n, MaxAttempts: attempt}, Trace: &Trace{TraceID: id}, Attempt: attempt, IdempotencyKey: name})
		}
	})
}

// sameAsEncodingJSON fails when readReply accepts data but wire.Strict
// refuses it, or encoding/json reads it otherwise.
func sameAsEncodingJSON(t *testing.T, data []byte) (accepted bool) {
	t.Helper()
	var got wireResponse
	if !readReply(data, &got) {
		return false
	}
	if err := wire.Strict(data); err != nil {
		t.Fatalf("readReply accepts %q, which wire.Strict refuses: %v", data, err)
	}
	var want wireResponse
	if err := json.Unmarshal(data, &want); err != nil {
		t.Fatalf("readReply accepts %q, which encoding/json refuses: %v", data, err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("readReply reads %q as\n%#v\nencoding/json as\n%#v", data, got, want)
	}
	return true
}

// replies are documents readReply must take the fast way (and read as
// encoding/json does).
var replies = []string{
	`{"tool_contract_version":"v1","request_id":"tool_0123456789abcdef","status":"ok","output":{"ok":true}}`,
	`{"tool_contract_version":"v1","request_id":"tool_0123456789abcdef","status":"ok","output":{"result":"refund issued","transaction_id":"txn_1"},"usage":{"duration_ms":3,"attempt":1},"trace":{"trace_id":"4bf92f3577b34da6a3ce929d0e0e4736","span_id":"00f067aa0ba902b7"}}`,
	`{"status":"error","error":{"code":"timeout","reason":"tool_execution_timeout","retryable":true,"message":"m","details":{"timeout_ms":15000}}}`,
	`{"status":"denied","error":{"code":"permission_denied","retryable":false,"details":{"tool":"x"}}}`,
	`{"status":"ok","output":{"result":"{\"a\":[1,null]}"},"result_encoding":"json"}`,
	` { "status" : "ok" , "output" : { "n" : [ -0 , 1.5e3 , -2E-2 , 0.25 ] , "s" : "\u00e9\ud83c\udf89\"\\\/\b\f\n\r\t" , "e" : { } , "a" : [ ] } } ` + "\n",
	`{"status":"ok","output":null,"usage":null,"trace":null,"error":null,"request_id":null,"result_encoding":null}`,
	`{"status":"ok","usage":{"duration_ms":-0,"attempt":9223372036854775807},"error":{"retryable":null,"details":null}}`,
	`{"status":"ok","output":{"日本":"語","k\u0041":"v","\u0000":1e308}}`,
	`{}`,
}

// refusedFast are documents readReply must leave to the slow way (every
// one is refused, or read differently, by wire.Strict or encoding/json
// rules it does not take on).
var refusedFast = []string{
	`{"status":"ok","status":"error"}`, `{"status":"ok","output":{"a":1,"a":2}}`, `{"status":"ok","output":{"a":1,"\u0061":2}}`,
	`{"Status":"ok"}`, `{"st\u0061tus":"ok"}`, `{"status":"ok","extra":1}`, `{"status":1}`, `{"status":"ok","output":[]}`,
	`{"status":"ok","usage":{"attempt":1.5}}`, `{"status":"ok","usage":{"attempt":1e2}}`, `{"status":"ok","usage":{"duration_ms":"3"}}`,
	`{"status":"ok","usage":{"attempt":99999999999999999999}}`, `{"status":"ok","output":{"n":1e400}}`, `{"status":"ok","error":{"retryable":"true"}}`,
	`{"status":"ok","output":{"s":"\ud800"}}`, `{"status":"ok","output":{"s":"\udc00\ud800"}}`, "{\"status\":\"ok\xff\"}", `{"status":"ok"} x`,
	`{"status":"ok",}`, `{"status":"ok","output":{"a":[1,]}}`, `{"status":"ok","output":{"a":01}}`, `{"status":"ok","output":{"a":.5}}`,
	`{"status":"ok","output":{"a":tru}}`, "{\"status\":\"a\tb\"}", `{"status":"ok"`, `["status"]`, "\ufeff{}", `{"status":"ok","output":` + strings.Repeat(`{"d":`, 70) + `1` + strings.Repeat(`}`, 71),
}

func TestReplyReaderIsEncodingJSON(t *testing.T) {
	for _, s := range replies {
		if !sameAsEncodingJSON(t, []byte(s)) {
			t.Errorf("readReply leaves %s to the slow way", s)
		}
	}
	for _, s := range refusedFast {
		if sameAsEncodingJSON(t, []byte(s)) {
			t.Errorf("readReply reads %q, which it must leave to the slow way", s)
		}
	}
}

// TestReplyReaderOnGeneratedReplies: responses of random values, written
// by json.Marshal (the wire form NewHandler writes) and by hand with
// white space, are read as encoding/json reads them, and the fast way
// takes the well-formed ones.
func TestReplyReaderOnGeneratedReplies(t *testing.T) {
	rng := rand.New(rand.NewPCG(37, 2))
	fast, total := 0, 0
	for range 3000 {
		w := wireResponse{ToolContractVersion: genString(rng), RequestID: genString(rng), Status: genString(rng), ResultEncoding: genString(rng)}
		if rng.IntN(2) == 0 {
			w.Output = genValue(rng, 0, true).(map[string]any)
		}
		if rng.IntN(2) == 0 {
			w.Usage = &AttemptUsage{DurationMS: rng.Int64(), Attempt: rng.IntN(5)}
		}
		if rng.IntN(2) == 0 {
			w.Trace = &Trace{TraceID: genString(rng), SpanID: genString(rng)}
		}
		if rng.IntN(2) == 0 {
			w.Error = &Failure{Code: genString(rng), Reason: genString(rng), Retryable: rng.IntN(2) == 0, Message: genString(rng)}
			w.Error.Details, _ = genValue(rng, 0, true).(map[string]any)
		}
		raw, err := json.Marshal(struct {
			ToolContractVersion string         `json:"tool_contract_version,omitempty"`
			RequestID           string         `json:"request_id,omitempty"`
			Status              string         `json:"status,omitempty"`
			Output              map[string]any `json:"output,omitempty"`
			ResultEncoding      string         `json:"result_encoding,omitempty"`
			Usage               *AttemptUsage  `json:"usage,omitempty"`
			Trace               *Trace         `json:"trace,omitempty"`
			Error               *plainFailure  `json:"error,omitempty"`
		}{w.ToolContractVersion, w.RequestID, w.Status, w.Output, w.ResultEncoding, w.Usage, w.Trace, (*plainFailure)(w.Error)})
		if err != nil {
			continue // a NaN: no document
		}
		if wire.Strict(raw) == nil { // two invalid keys both written as \ufffd are one name twice
			total++
			if sameAsEncodingJSON(t, raw) {
				fast++
			}
		}
		var spaced bytes.Buffer
		if err := json.Indent(&spaced, raw, " ", "\t"); err != nil {
			t.Fatal(err)
		}
		sameAsEncodingJSON(t, spaced.Bytes())
		// A byte changed anywhere: a refusal or another document, read
		// alike or left to the slow way.
		if len(raw) > 0 {
			const mutants = "{}[]\",:\\ 0-.eEtfnu\xff"
			raw[rng.IntN(len(raw))] = mutants[rng.IntN(len(mutants))]
			sameAsEncodingJSON(t, raw)
		}
	}
	// json.Marshal writes invalid UTF-8 as U+FFFD, no lone surrogate and
	// nothing nested this deep: the fast way takes every document it wrote
	// that is strict.
	if fast != total {
		t.Errorf("the fast way took %d of the %d strict replies json.Marshal wrote", fast, total)
	}
}

// plainFailure is a Failure without its MarshalJSON (details as any
// JSON, as seed 004 writes them).
type plainFailure Failure

// FuzzReplyReaderIsEncodingJSON: a document readReply takes is one
// wire.Strict accepts and encoding/json reads exactly as it does.
func FuzzReplyReaderIsEncodingJSON(f *testing.F) {
	for _, s := range append(append([]string{}, replies...), refusedFast...) {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		sameAsEncodingJSON(t, data)
	})
}

// TestFloatsAreEncodingJSON: appendFloat, which writes whole numbers
// below 2^53 as integers, writes json.Marshal's bytes for whole numbers on
// both sides of 2^53 and of every power of ten, zero and minus zero, and
// random float64 bit patterns and whole numbers of every size.
func TestFloatsAreEncodingJSON(t *testing.T) {
	check := func(f float64) {
		if math.IsInf(f, 0) || math.IsNaN(f) {
			return
		}
		want, _ := json.Marshal(f)
		if got := appendFloat(nil, f); !bytes.Equal(got, want) {
			t.Fatalf("appendFloat(%v) = %s, json.Marshal %s", f, got, want)
		}
	}
	fs := []float64{0, math.Copysign(0, -1), 1, -1, 0.5, 1e-7, 1e20, 1e21, 1e22, math.MaxFloat64, math.SmallestNonzeroFloat64}
	for _, edge := range []float64{1 << 53, 1 << 52, 1 << 63, 1 << 64} {
		for d := -4.0; d <= 4; d++ {
			fs = append(fs, edge+d, -(edge + d), math.Nextafter(edge, 0)+d, math.Nextafter(edge, math.Inf(1))+d)
		}
	}
	for p := 1.0; p < 1e23; p *= 10 {
		fs = append(fs, p, -p, p-1, p+1, math.Nextafter(p, 0), math.Nextafter(p, math.Inf(1)))
	}
	for _, f := range fs {
		check(f)
	}
	rng := rand.New(rand.NewPCG(37, 53))
	for range 200000 {
		check(math.Float64frombits(rng.Uint64()))
		check(float64(rng.Int64() >> rng.IntN(64)))
		check(math.Trunc(rng.Float64() * math.Pow(10, float64(rng.IntN(23)))))
	}
}
