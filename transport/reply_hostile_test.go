package transport

import (
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/contextos/contextos/internal/wire"
)

// oldDecodeWire is decodeWire as it was before the one-pass reader:
// wire.Strict (its error as is), then encoding/json, then the result's
// decoding; with foldedTwice, which came after, where wire.Strict was.
func oldDecodeWire(data []byte) (*Response, error) {
	if err := wire.Strict(data); err != nil {
		return nil, err
	}
	if err := foldedTwice(data); err != nil {
		return nil, err
	}
	var w wireResponse
	if err := json.Unmarshal(data, &w); err != nil {
		return nil, fmt.Errorf("%w: %s", ErrContract, jsonProblem(err))
	}
	r := &Response{ToolContractVersion: w.ToolContractVersion, RequestID: w.RequestID, Status: w.Status, Output: w.Output,
		Usage: w.Usage, Trace: w.Trace, Error: w.Error}
	if err := r.decodeResult(w.ResultEncoding); err != nil {
		return nil, err
	}
	return r, nil
}

// exactlyEqual is reflect.DeepEqual that also tells -0 from 0 (DeepEqual
// compares floats with ==).
func exactlyEqual(a, b any) bool {
	if !reflect.DeepEqual(a, b) {
		return false
	}
	return floatBits(reflect.ValueOf(a)) == floatBits(reflect.ValueOf(b))
}

// floatBits lists the bits of every float in v, in a deterministic walk.
func floatBits(v reflect.Value) string {
	var b strings.Builder
	var walk func(v reflect.Value)
	walk = func(v reflect.Value) {
		switch v.Kind() {
		case reflect.Float64, reflect.Float32:
			fmt.Fprintf(&b, "%x,", math.Float64bits(v.Float()))
		case reflect.Pointer, reflect.Interface:
			if !v.IsNil() {
				walk(v.Elem())
			}
		case reflect.Struct:
			for i := range v.NumField() {
				walk(v.Field(i))
			}
		case reflect.Slice, reflect.Array:
			for i := range v.Len() {
				walk(v.Index(i))
			}
		case reflect.Map:
			keys := v.MapKeys()
			names := make([]string, len(keys))
			for i, k := range keys {
				names[i] = k.String()
			}
			slices.Sort(names)
			for _, n := range names {
				b.WriteString(n + "=")
				walk(v.MapIndex(reflect.ValueOf(n)))
			}
		}
	}
	walk(v)
	return b.String()
}

// sameAsOldPath fails unless decodeWire (strict) answers data exactly as
// the strict path before the one-pass reader: the same refusal text, or
// the same response, -0 told from 0.
func sameAsOldPath(t *testing.T, data []byte) {
	t.Helper()
	got, gotErr := decodeWire(data, true)
	want, wantErr := oldDecodeWire(data)
	if (gotErr != nil) != (wantErr != nil) || gotErr != nil && gotErr.Error() != wantErr.Error() {
		t.Fatalf("%q: error %v; the old path's %v", data, gotErr, wantErr)
	}
	if gotErr == nil && !exactlyEqual(got, want) {
		t.Fatalf("%q: read as\n%#v\nthe old path reads\n%#v", data, got, want)
	}
	// The fast reader alone: what it takes, wire.Strict and encoding/json
	// take and read alike.
	var w, ref wireResponse
	if readReply(data, &w) {
		if err := wire.Strict(data); err != nil {
			t.Fatalf("%q: the one-pass reader takes what wire.Strict refuses: %v", data, err)
		}
		if err := json.Unmarshal(data, &ref); err != nil || !exactlyEqual(w, ref) {
			t.Fatalf("%q: the one-pass reader reads %#v; encoding/json %#v, %v", data, w, ref, err)
		}
	}
}

// hostileNames are the member names a hostile reply may spell.
var hostileNames = []string{"status", "Status", "STATUS", "\\u0073tatus", "stat\\u0075s", "ſtatus", "status ", "status\\u0000", "output", "Output", "result_encoding",
	"usage", "trace", "error", "tool_contract_version", "request_id", "extra", "", "\\ud800", "st\xffatus"}

// hostileValues are the values a hostile reply may put anywhere.
var hostileValues = []string{`"ok"`, `"OK"`, `"error"`, `" ok "`, `null`, `1`, `-0`, `-0.0`, `0e0`, `1e400`, `-1e400`, `1e-400`, `9223372036854775807`,
	`9223372036854775808`, `-9223372036854775808`, `-9223372036854775809`, `1.0`, `1E2`, `01`, `-`, `+1`, `.5`, `true`, `false`, `tru`, `nul`,
	`"\ud800"`, `"\udc00"`, `"\ud800\u0041"`, `"\ud83d\ude00"`, `"\uD83D\uDE00"`, `"\u0000"`, "\"\xff\"", "\"\xed\xa0\x80\"", "\"\xc0\xaf\"",
	"\"\xef\xbf\xbd\"", `"\ufffd"`, `"a\/b"`, `"\x"`, `"\u12"`, "\"a\tb\"", "\"\x7f\"", `{}`, `[]`, `{"a":1}`, `{"a":1,"a":2}`, `{"a":1,"\u0061":2}`,
	`{"a":1,"A":2}`, `{"result":"{\"x\":1}"}`, `{"result":"[1,2"}`, `{"duration_ms":3,"attempt":2}`, `{"attempt":1.5}`, `{"attempt":-0}`,
	`{"attempt":null,"duration_ms":null}`, `{"trace_id":"t","span_id":"s"}`, `{"code":"x","retryable":true,"details":{"k":1e400}}`,
	`{"retryable":"true"}`, `{"retryable":1}`, `{"Retryable":true}`, `{"details":[]}`, `{"details":null}`, `[1,]`, `{"a":[1,{"b":[]}]}`, `{"a" 1}`,
	`{"a":1,}`, `{,}`, `""`, `"json"`, `"JSON "`, `"xml"`, `{"n":-0,"m":[-0.0,0]}`}

// TestReplyReaderIsTheOldPathOnHostileReplies: every reply made of a
// hostile name and value, alone, twice, beside a well-formed status, with
// white space, trailing data, a BOM or deep nesting, is answered as the
// strict path answered it before the one-pass reader.
func TestReplyReaderIsTheOldPathOnHostileReplies(t *testing.T) {
	docs := []string{"\ufeff{\"status\":\"ok\"}", "{\"status\":\"ok\"}\x00", `{"status":"ok"}{}`, `{"status":"ok"} `, " \t\r\n{\"status\":\"ok\"}",
		"\v{\"status\":\"ok\"}", "{\"status\":\"ok\"}\u00a0", `{"status":"ok"`, `{"status":"ok"}}`, `null`, `[]`, `"x"`, `{}`, ``,
		`{"status":"ok","output":` + strings.Repeat(`[`, 63) + strings.Repeat(`]`, 63) + `}`,
		`{"status":"ok","output":{"a":` + strings.Repeat(`[`, 1000) + strings.Repeat(`]`, 1000) + `}}`,
		`{"status":"ok","output":{"a":` + strings.Repeat(`{"b":`, 62) + `1` + strings.Repeat(`}`, 62) + `}}`,
		`{"status":"ok","output":{"a":` + strings.Repeat(`{"b":`, 64) + `1` + strings.Repeat(`}`, 64) + `}}`,
	}
	for _, n := range hostileNames {
		for _, v := range hostileValues {
			docs = append(docs, `{"`+n+`":`+v+`}`, `{"status":"ok","`+n+`":`+v+`}`, `{"`+n+`":`+v+`,"status":"ok"}`, `{"`+n+`":`+v+`,"`+n+`":`+v+`}`,
				"{ \""+n+"\" :\n"+v+"\t}", `{"status":"ok","output":{"`+n+`":`+v+`}}`, `{"status":"error","error":{"`+n+`":`+v+`}}`,
				`{"status":"ok","usage":{"`+n+`":`+v+`}}`, `{"status":"ok","trace":{"`+n+`":`+v+`}}`)
		}
	}
	for _, m := range []string{"output", "usage", "trace", "error", "status", "result_encoding", "tool_contract_version", "request_id"} {
		for _, v := range hostileValues {
			docs = append(docs, `{"status":"ok","`+m+`":`+v+`}`, `{"status":"ok","output":{"result":"[1]"},"`+m+`":`+v+`}`)
		}
	}
	for _, d := range docs {
		sameAsOldPath(t, []byte(d))
	}
}

// FuzzReplyReaderIsTheOldPath: whatever the reply, decodeWire answers as
// the strict path did before the one-pass reader.
func FuzzReplyReaderIsTheOldPath(f *testing.F) {
	for _, s := range append(append([]string{}, replies...), refusedFast...) {
		f.Add([]byte(s))
	}
	for _, v := range hostileValues {
		f.Add([]byte(`{"status":"ok","output":{"a":` + v + `},"usage":{"attempt":1}}`))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		sameAsOldPath(t, data)
	})
}
