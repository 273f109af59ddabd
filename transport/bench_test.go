package transport_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/contextos/contextos/transport"
)

const okReply = `{"tool_contract_version":"v1","request_id":"tool_0123456789abcdef","status":"ok","output":{"ok":true}}`

// newBenchServer is a loopback tool endpoint that reads each request's
// body and answers 200 with reply. Unlike newToolServer it keeps nothing
// of the requests, so the heap, and the garbage collector's work, does
// not grow with b.N. The adapters and the floor use the same one.
func newBenchServer(b *testing.B, reply string) *httptest.Server {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.Copy(io.Discard, r.Body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, reply)
	}))
	b.Cleanup(ts.Close)
	return ts
}

func benchAdapter(b *testing.B, tr string) {
	ts := newBenchServer(b, okReply)
	a := newAdapter(b, transport.Endpoint{Transport: tr, URL: ts.URL}, nil)
	c := call(1)
	// The gateway always calls with the attempt's deadline.
	ctx, cancel := context.WithTimeout(bg, time.Minute)
	defer cancel()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := a.Call(ctx, c); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkHTTPAdapter, BenchmarkExternalAdapter, BenchmarkWebhookAdapter:
// one gateway call through each adapter to a loopback server that answers
// at once (webhook: 200, the synchronous path).
func BenchmarkHTTPAdapter(b *testing.B)     { benchAdapter(b, "http") }
func BenchmarkExternalAdapter(b *testing.B) { benchAdapter(b, "external") }
func BenchmarkWebhookAdapter(b *testing.B)  { benchAdapter(b, "webhook") }

// BenchmarkPlainHTTP: the external adapter's request as a plain net/http
// POST of the same envelope to the same server, its reply decoded with
// encoding/json into a struct of the reply's members: the floor. The
// envelope is encoded once, outside the loop. The reply is decoded into a
// plain struct, not a transport.Response, whose decoding (UnmarshalJSON)
// is the package's own, the code measured against this floor.
func BenchmarkPlainHTTP(b *testing.B) {
	ts := newBenchServer(b, okReply)
	body, _ := json.Marshal(transport.RequestFor(call(1), "external", &transport.Endpoint{}))
	client := &http.Client{}
	// The same deadline as the adapter's calls.
	ctx, cancel := context.WithTimeout(bg, time.Minute)
	defer cancel()
	b.ReportAllocs()
	for b.Loop() {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, ts.URL, bytes.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		res, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		var resp plainReply
		raw, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if json.Unmarshal(raw, &resp) != nil || resp.Status != "ok" {
			b.Fatal(string(raw))
		}
	}
}

// BenchmarkPlainHTTPContractHeaders: BenchmarkPlainHTTP with the headers
// the external adapter sends besides Content-Type (Accept, X-Request-Id,
// X-Tool-Name, X-Tool-Attempt, Idempotency-Key, traceparent,
// X-Tool-Contract-Version), set per call as a plain client sets them:
// what the contract's headers cost a plain POST, client and server.
func BenchmarkPlainHTTPContractHeaders(b *testing.B) {
	ts := newBenchServer(b, okReply)
	c := call(1)
	body, _ := json.Marshal(transport.RequestFor(c, "external", &transport.Endpoint{}))
	client := &http.Client{}
	ctx, cancel := context.WithTimeout(bg, time.Minute)
	defer cancel()
	b.ReportAllocs()
	for b.Loop() {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, ts.URL, bytes.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json")
		req.Header.Set("X-Request-Id", c.Envelope.ToolCallID)
		req.Header.Set("X-Tool-Name", c.Envelope.CapabilityID)
		req.Header.Set("X-Tool-Attempt", "1")
		req.Header.Set("Idempotency-Key", c.IdempotencyKey)
		req.Header.Set("Traceparent", "00-"+c.Trace.TraceID+"-"+c.Trace.SpanID+"-"+c.Trace.TraceFlags)
		req.Header.Set("X-Tool-Contract-Version", "v1")
		res, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		var resp plainReply
		raw, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if json.Unmarshal(raw, &resp) != nil || resp.Status != "ok" {
			b.Fatal(string(raw))
		}
	}
}

// plainReply is a contract reply's members, as a plain client declares
// them.
type plainReply struct {
	ToolContractVersion string         `json:"tool_contract_version"`
	RequestID           string         `json:"request_id"`
	Status              string         `json:"status"`
	Output              map[string]any `json:"output"`
	ResultEncoding      string         `json:"result_encoding"`
	Usage               *struct {
		DurationMS int64 `json:"duration_ms"`
		Attempt    int   `json:"attempt"`
	} `json:"usage"`
	Trace *struct {
		TraceID string `json:"trace_id"`
		SpanID  string `json:"span_id"`
	} `json:"trace"`
	Error *struct {
		Code      string         `json:"code"`
		Reason    string         `json:"reason"`
		Retryable bool           `json:"retryable"`
		Message   string         `json:"message"`
		Details   map[string]any `json:"details"`
	} `json:"error"`
}

// BenchmarkExternalAdapterBearer: the external adapter with a bearer
// secret resolved on every call (the path that scrubs resolved secrets
// from the reply).
func BenchmarkExternalAdapterBearer(b *testing.B) {
	ts := newBenchServer(b, okReply)
	a := newAdapter(b, transport.Endpoint{Transport: "external", URL: ts.URL, Auth: &transport.Auth{SecretRef: "payments-token"}},
		&transport.Options{Secrets: transport.MapSecrets{"payments-token": "tok_live_51HbC9sQ2x"}})
	c := call(1)
	ctx, cancel := context.WithTimeout(bg, time.Minute)
	defer cancel()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := a.Call(ctx, c); err != nil {
			b.Fatal(err)
		}
	}
}

// benchHandler sends one request through NewHandler (decode, execute,
// encode) without a network; the executor answers output.
func benchHandler(b *testing.B, output map[string]any) {
	h := transport.NewHandler(transport.ExecutorFunc(func(context.Context, *transport.Request) *transport.Response {
		return &transport.Response{Status: transport.StatusOK, Output: output}
	}))
	body, _ := json.Marshal(transport.RequestFor(call(1), "external", &transport.Endpoint{}))
	b.ReportAllocs()
	for b.Loop() {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(body)))
		if rec.Code != http.StatusOK {
			b.Fatal(rec.Body.String())
		}
	}
}

// BenchmarkNewHandler: a reply whose result is a string (sent as is), and
// one whose result is a number (sent as its JSON text).
func BenchmarkNewHandler(b *testing.B) {
	b.Run("string result", func(b *testing.B) {
		benchHandler(b, map[string]any{"result": "refund issued", "transaction_id": "txn_1"})
	})
	b.Run("number result", func(b *testing.B) {
		benchHandler(b, map[string]any{"result": 4200.0, "transaction_id": "txn_1"})
	})
}

// BenchmarkDecodeResponse: a client reading a contract reply.
func BenchmarkDecodeResponse(b *testing.B) {
	reply := []byte(`{"tool_contract_version":"v1","request_id":"tool_0123456789abcdef","status":"ok","output":{"result":"refund issued","transaction_id":"txn_1"},"usage":{"duration_ms":3,"attempt":1},"trace":{"trace_id":"4bf92f3577b34da6a3ce929d0e0e4736","span_id":"00f067aa0ba902b7"}}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := transport.DecodeResponse(reply); err != nil {
			b.Fatal(err)
		}
	}
}
