package transport

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/contextos/contextos/internal/w3ctrace"
	"github.com/contextos/contextos/runcontext"
)

// TestPostHeadersAreHeaderSet: the headers setPostHeaders sets, each
// under its canonical name with its value in a shared slice, are the ones
// Header.Set of each gives, with and without an idempotency key, for the
// envelope and the plain POST, for trace contexts with and without
// tracestate and baggage and for none; and no value can be appended to
// over another's.
func TestPostHeadersAreHeaderSet(t *testing.T) {
	traces := []runcontext.Trace{
		{},
		{TraceID: "4bf92f3577b34da6a3ce929d0e0e4736", SpanID: "00f067aa0ba902b7", TraceFlags: "01"},
		{TraceID: "4bf92f3577b34da6a3ce929d0e0e4736", SpanID: "00f067aa0ba902b7", TraceState: "congo=t61rcWkgMzE"},
		{TraceID: "4bf92f3577b34da6a3ce929d0e0e4736", SpanID: "00f067aa0ba902b7", TraceFlags: "00", TraceState: "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7", Baggage: "userId=alice"},
		{TraceID: "4bf92f3577b34da6a3ce929d0e0e4736", SpanID: "00f067aa0ba902b7", Baggage: "userId=alice,serverNode=DF%2028"},
		{TraceID: "not-hex", SpanID: "00f067aa0ba902b7"},
	}
	ctx := context.Background()
	cases := 0
	for _, tr := range traces {
		for _, key := range []string{"", "ik_77aa"} {
			for _, envelope := range []bool{false, true} {
				for _, attempt := range []int{1, 12} {
					req := &Request{RequestID: "tool_0123456789abcdef", Tool: Tool{Name: "adp_payments.issue_refund"}, Attempt: attempt, IdempotencyKey: key, TraceContext: tr}
					want := http.Header{}
					want.Set("Content-Type", "application/json")
					want.Set("Accept", "application/json")
					want.Set("X-Request-Id", req.RequestID)
					want.Set("X-Tool-Name", req.Tool.Name)
					want.Set("X-Tool-Attempt", strconv.Itoa(req.Attempt))
					if key != "" {
						want.Set("Idempotency-Key", key)
					}
					// The trace headers as the functions that parse the
					// caller's text each time write them.
					w3ctrace.Inject(w3ctrace.Outbound(ctx, callerTrace(req)), want.Set)
					if envelope {
						want.Set("X-Tool-Contract-Version", ContractVersion)
					}
					got := http.Header{}
					caller := w3ctrace.Parse(callerTrace(req))
					setPostHeaders(ctx, got, req, &caller, envelope)
					if d := cmp.Diff(want, got); d != "" {
						t.Fatalf("trace %+v, key %q, envelope %v: headers (-Header.Set +setPostHeaders):\n%s", tr, key, envelope, d)
					}
					for k, v := range got {
						if len(v) != 1 || cap(v) != 1 {
							t.Fatalf("%s: value slice of length %d and capacity %d", k, len(v), cap(v))
						}
					}
					cases++
				}
			}
		}
	}
	if cases != len(traces)*8 {
		t.Fatalf("%d cases", cases)
	}
}

// BenchmarkPostHeaders: the headers of one external POST set
// (setPostHeaders) and written as net/http writes a request's (sorted by
// name, each value scrubbed of newlines): the part of a call's header
// cost on the client that the order they are set in moves.
func BenchmarkPostHeaders(b *testing.B) {
	req := &Request{RequestID: "tool_0123456789abcdef", Tool: Tool{Name: "adp_payments.issue_refund"}, Attempt: 1, IdempotencyKey: "ik_77aa",
		TraceContext: runcontext.Trace{TraceID: "4bf92f3577b34da6a3ce929d0e0e4736", SpanID: "00f067aa0ba902b7", TraceFlags: "01"}}
	caller := w3ctrace.Parse(callerTrace(req))
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		h := make(http.Header)
		setPostHeaders(ctx, h, req, &caller, true)
		if err := h.Write(io.Discard); err != nil {
			b.Fatal(err)
		}
	}
}
