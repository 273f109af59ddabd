package runcontext

import (
	"errors"
	"testing"

	"github.com/contextos/contextos/internal/fixture"
)

// FuzzDecodeInvokeRequest: decoding and validating any input never panics;
// it either succeeds with a request that validates again, or fails with a
// *ValidationError.
func FuzzDecodeInvokeRequest(f *testing.F) {
	f.Add(fixture.Invoke())
	f.Add(fixture.RunContext())
	f.Add([]byte(`{"Tenant_ID":1,"trace":{"trace_id":"00"},"mode":"x","user":{"tier":[]}}`))
	f.Add([]byte(`{"context_pack_refs":["a@1.0.0","a@01.0.0"],"attachments":[{"uri":"::"}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := DecodeInvokeRequest(data)
		if err != nil {
			var ve *ValidationError
			if !errors.As(err, &ve) || len(ve.Problems) == 0 {
				t.Fatalf("error is not a non-empty *ValidationError: %v", err)
			}
			return
		}
		if err := r.Validate(); err != nil {
			t.Fatalf("decoded request fails validation: %v", err)
		}
		if _, err := Materialize(r, nil, nil); err != nil && !errors.Is(err, ErrInvalid) {
			t.Fatalf("Materialize: %v", err)
		}
	})
}

// FuzzParseTraceparent: never panics; accepted headers round-trip.
func FuzzParseTraceparent(f *testing.F) {
	f.Add("00-4bf92f3577b34da6a3ce929d0e0e4736-b9c7c989f97918e1-01")
	f.Add("00-4bf92f3577b34da6a3ce929d0e0e4736-b9c7c989f97918e1-01-extra")
	f.Add("01-4bf92f3577b34da6a3ce929d0e0e4736-b9c7c989f97918e1-00-future")
	f.Add("")
	f.Fuzz(func(t *testing.T, s string) {
		tr, err := ParseTraceparent(s)
		if err != nil {
			if !errors.Is(err, ErrTraceContext) {
				t.Fatalf("error does not match ErrTraceContext: %v", err)
			}
			return
		}
		again, err := ParseTraceparent(tr.Traceparent())
		if err != nil || again.TraceID != tr.TraceID || again.SpanID != tr.SpanID || again.TraceFlags != tr.TraceFlags {
			t.Fatalf("round trip of %q: %+v, %v", s, again, err)
		}
		var ps problems
		checkTrace(&ps, "trace", tr)
		if len(ps.list) > 0 {
			t.Fatalf("parsed trace fails validation: %v", ps.list)
		}
	})
}
