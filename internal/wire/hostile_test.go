package wire_test

import (
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/internal/fixture"
	"github.com/contextos/contextos/internal/wire"
	"github.com/contextos/contextos/pack"
	"github.com/contextos/contextos/runcontext"
)

// secret is planted in hostile values: no error may echo it.
const secret = "sk_live_hostile_4242"

func readFile(t *testing.T, name string) string {
	t.Helper()
	return string(fixture.Read(t, name))
}

// inject replaces the first occurrence of old in doc.
func inject(t *testing.T, doc, old, new string) []byte {
	t.Helper()
	if !strings.Contains(doc, old) {
		t.Fatalf("fixture lacks %q", old)
	}
	return []byte(strings.Replace(doc, old, new, 1))
}

const callEnvelope = `{"envelope_version":"contextos.tool_call.v1","tool_call_id":"tool_1","run_id":"run_1","trace_id":"t","capability_id":"adp_payments.issue_refund","args":{"amount_inr":4200},"principal_chain":[],"approval_mode_requested":"destructive","approval_mode_effective":"destructive","approval_mode_highest":"destructive","policy_decision_id":null,"evidence_refs":[],"idempotency_key":"ik_1","auth_ref":null}`

// TestHostileDocuments: every document below fails closed, with a problem
// at the expected JSON path, and no problem text carries the planted
// secret.
func TestHostileDocuments(t *testing.T) {
	t.Parallel()
	invoke := readFile(t, "invoke.support-refund.json")
	pk := readFile(t, "ctxpack.support-1.0.0.json")
	deep := func(open, close string, n int) []byte {
		return []byte(strings.Repeat(open, n) + strings.Repeat(close, n))
	}
	wide := func() []byte {
		var b strings.Builder
		b.WriteString("{")
		for i := 0; i < 40; i++ {
			b.WriteString(`"k` + strconv.Itoa(i) + `":1,`)
		}
		b.WriteString(`"k20":2}`)
		return []byte(b.String())
	}
	many := func() []byte {
		var b strings.Builder
		b.WriteString("[")
		for i := 0; i < 500; i++ {
			if i > 0 {
				b.WriteString(",")
			}
			b.WriteString(`{"a":1,"a":2}`)
		}
		b.WriteString("]")
		return []byte(b.String())
	}

	// decode is the decoder under attack; nil means wire.Strict.
	type decoder func([]byte) error
	decodeInvoke := func(b []byte) error { _, err := runcontext.DecodeInvokeRequest(b); return err }
	decodeRunContext := func(b []byte) error { _, err := runcontext.DecodeRunContext(b); return err }
	decodePack := func(b []byte) error { _, err := pack.Decode(b); return err }
	decodeCall := func(b []byte) error { _, err := gateway.DecodeCallEnvelope(b); return err }
	decodeResult := func(b []byte) error { _, err := gateway.DecodeResultEnvelope(b); return err }
	decodeOverlay := func(b []byte) error { _, err := pack.DecodeOverlay(b); return err }
	decodeUser := func(b []byte) error { var u runcontext.UserClaims; return json.Unmarshal(b, &u) }
	decodeMap := func(b []byte) error {
		var m map[string]any
		if probs, _ := wire.Decode(b, &m); len(probs) > 0 {
			return &wire.StrictError{Problems: probs}
		}
		return nil
	}

	cases := []struct {
		name   string
		doc    []byte
		decode decoder
		path   string // where the problem is reported
		msg    string // part of its message
	}{
		{"duplicate member at the top level", []byte(`{"a":1,"b":2,"a":3}`), nil, "a", "more than once"},
		{"duplicate member nested", []byte(`{"x":{"y":{"z":1,"z":1}}}`), nil, "x.y.z", "more than once"},
		{"duplicate member in an array of objects", []byte(`{"items":[{"sku":"a"},{"sku":"b","qty":1,"sku":"c"}]}`), nil, "items[1].sku", "more than once"},
		{"duplicate member spelled with an escape", []byte(`{"a":1,"\u0061":2}`), nil, "a", "more than once"},
		{"duplicate member spelled with escapes both times", []byte(`{"\u0072efund":1,"r\u0065fund":2}`), nil, "refund", "more than once"},
		{"duplicate member spelled with a surrogate pair", []byte(`{"😀":1,"\ud83d\ude00":2}`), nil, "😀", "more than once"},
		{"duplicate empty member name", []byte(`{"":1,"":2}`), nil, "", "more than once"},
		{"duplicate member in a wide object", wide(), nil, "k20", "more than once"},
		{"duplicate members everywhere stay bounded", many(), nil, "[0].a", "more than once"},
		{"duplicate member after a case-folded one", []byte(`{"Tenant_ID":"a","tenant_id":"b","tenant_id":"c"}`), decodeMap, "tenant_id", "more than once"},
		{"duplicated refund_amount in an invoke envelope", inject(t, invoke, `"refund_amount": 4200,`, `"refund_amount": 100, "refund_amount": 4200,`), decodeInvoke, "input.context.refund_amount", "more than once"},
		{"duplicated tenant in an invoke envelope", inject(t, invoke, `"tenant_id": "tenant_acme_prod",`, `"tenant_id": "tenant_acme_prod", "tenant_id": "tenant_other",`), decodeInvoke, "tenant_id", "more than once"},
		{"duplicated role in a run context user", []byte(`{"run_id":"run_1","user":{"user_id":"u","role":"viewer","role":"admin"}}`), decodeRunContext, "user.role", "more than once"},
		{"duplicated claim through an open type", []byte(`{"user_id":"u","tier":"basic","tier":"gold"}`), decodeUser, "tier", "more than once"},
		{"duplicated allow in a pack permission", inject(t, pk, `"pack_id"`, `"pack_id": "x", "pack_id"`), decodePack, "pack_meta.pack_id", "more than once"},
		{"duplicated amount in a tool call envelope", inject(t, callEnvelope, `"amount_inr":4200`, `"amount_inr":1,"amount_inr":4200`), decodeCall, "args.amount_inr", "more than once"},
		{"duplicated status in a tool result envelope", []byte(`{"envelope_version":"contextos.tool_result.v1","status":"error","status":"ok"}`), decodeResult, "status", "more than once"},
		{"duplicated approval mode in an overlay", []byte(`{"overlay_id":"ov","base":"ctxpack.support@1.0.0","environment":"prod","adapter_approval_modes":{"adp_payments":"destructive","adp_payments":"read_only"}}`), decodeOverlay, "adapter_approval_modes.adp_payments", "more than once"},
		{"invalid UTF-8 in a value", []byte(`{"note":"` + secret + "\xff" + `"}`), nil, "note", "not valid UTF-8"},
		{"invalid UTF-8 in a member name", []byte(`{"ok":{"k` + "\xfe" + `":1}}`), nil, "ok", "member name is not valid UTF-8"},
		{"lone continuation byte", []byte("[\"a\x80b\"]"), nil, "[0]", "not valid UTF-8"},
		{"overlong two-byte slash", []byte("{\"p\":\"..\xc0\xaf..\"}"), nil, "p", "not valid UTF-8"},
		{"overlong three-byte encoding", []byte("{\"p\":\"\xe0\x80\xaf\"}"), nil, "p", "not valid UTF-8"},
		{"UTF-8-encoded surrogate", []byte("{\"p\":\"\xed\xa0\x80\"}"), nil, "p", "not valid UTF-8"},
		{"code point above U+10FFFF", []byte("{\"p\":\"\xf4\x90\x80\x80\"}"), nil, "p", "not valid UTF-8"},
		{"five-byte sequence", []byte("{\"p\":\"\xf8\x88\x80\x80\x80\"}"), nil, "p", "not valid UTF-8"},
		{"truncated multi-byte sequence", []byte("{\"p\":\"\xe2\x82\"}"), nil, "p", "not valid UTF-8"},
		{"lone high surrogate escape", []byte(`{"p":"` + secret + `\ud800"}`), nil, "p", `lone UTF-16 surrogate \ud800`},
		{"lone low surrogate escape", []byte(`{"p":"\udc00"}`), nil, "p", `lone UTF-16 surrogate \udc00`},
		{"high surrogate before a plain escape", []byte(`{"p":"\ud800\u0041"}`), nil, "p", "lone UTF-16 surrogate"},
		{"surrogates in the wrong order", []byte(`{"p":"\udc00\ud800"}`), nil, "p", "lone UTF-16 surrogate"},
		{"lone surrogate in a member name", []byte(`{"q":{"\ud800":1}}`), nil, "q", "member name holds a lone UTF-16 surrogate"},
		{"invalid UTF-8 in an invoke message", inject(t, invoke, `"Refund order ord_881`, "\"Refund \xc0\xaforder ord_881"), decodeInvoke, "input.message", "not valid UTF-8"},
		{"invalid UTF-8 in a raw member of a pack", inject(t, pk, `"pack_id": "`, "\"pack_id\": \"\xff"), decodePack, "pack_meta.pack_id", "not valid UTF-8"},
		{"byte order mark", append([]byte("\xef\xbb\xbf"), `{"a":1}`...), nil, "", "byte order mark"},
		{"100k-deep arrays", deep("[", "]", 100_000), nil, "", "deeper than 1000"},
		{"100k-deep objects", deep(`{"a":`, "}", 100_000), nil, "a.a.a", "deeper than 1000"},
		{"100k-deep invoke context", inject(t, invoke, `"order_id": "ord_881"`, `"order_id": `+string(deep(`{"x":`, "}", 100_000))), decodeInvoke, "input.context.order_id.x", "deeper than 1000"},
		{"raw control character", []byte("{\"p\":\"a\x01b\"}"), nil, "p", "control character"},
		{"second document after the first", []byte(`{"a":1}{"a":2}`), nil, "", "data after the document"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dec := tc.decode
			if dec == nil {
				dec = wire.Strict
			}
			err := dec(tc.doc)
			if err == nil {
				t.Fatal("accepted")
			}
			if strings.Contains(err.Error(), secret) {
				t.Fatalf("error echoes the document's value: %v", err)
			}
			if len(err.Error()) > 8<<10 {
				t.Fatalf("error text is %d bytes", len(err.Error()))
			}
			var se *wire.StrictError
			if errors.As(err, &se) {
				if !errors.Is(err, wire.ErrStrict) {
					t.Error("a *StrictError does not match ErrStrict")
				}
				for _, p := range se.Problems {
					if strings.HasPrefix(p.Path, tc.path) && strings.Contains(p.Message, tc.msg) {
						return
					}
				}
				t.Fatalf("no problem at %q containing %q: %v", tc.path, tc.msg, se.Problems)
			}
			if !strings.Contains(err.Error(), tc.path) || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("error %q does not name %q with %q", err, tc.path, tc.msg)
			}
		})
	}
}
