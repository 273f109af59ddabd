package transport_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/contextos/contextos/transport"
)

const okReply = `{"tool_contract_version":"v1","request_id":"tool_0123456789abcdef","status":"ok","output":{"ok":true}}`

func benchAdapter(b *testing.B, tr string) {
	ts := newToolServer(b, func(int, *http.Request, []byte) (int, string) { return 200, okReply })
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
// POST of the same envelope to the same kind of server: the floor.
func BenchmarkPlainHTTP(b *testing.B) {
	ts := newToolServer(b, func(int, *http.Request, []byte) (int, string) { return 200, okReply })
	body, _ := json.Marshal(transport.RequestFor(call(1), "external", &transport.Endpoint{}))
	client := &http.Client{}
	b.ReportAllocs()
	for b.Loop() {
		res, err := client.Post(ts.URL, "application/json", bytes.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		var resp transport.Response
		raw, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if json.Unmarshal(raw, &resp) != nil || resp.Status != "ok" {
			b.Fatal(string(raw))
		}
	}
}

// BenchmarkExternalAdapterBearer: the external adapter with a bearer
// secret resolved on every call (the path that scrubs resolved secrets
// from the reply).
func BenchmarkExternalAdapterBearer(b *testing.B) {
	ts := newToolServer(b, func(int, *http.Request, []byte) (int, string) { return 200, okReply })
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
