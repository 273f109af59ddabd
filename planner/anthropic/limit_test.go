package anthropic_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/contextos/contextos/planner"
	"github.com/contextos/contextos/planner/anthropic"
)

// A response body past MaxResponseBytes is refused with
// planner.ErrResponseTooLarge: a huge message, a huge error reply, and a
// stream that never ends (at the default bound), whose server handler
// then returns (TestMain checks that no goroutine leaks).
func TestResponseTooLarge(t *testing.T) {
	t.Parallel()
	delta := `event: content_block_delta` + "\n" + `data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"` + strings.Repeat("x", 512) + `"}}` + "\n\n"
	for _, tc := range []struct {
		name   string
		stream bool
		max    int64
		serve  func(w http.ResponseWriter, r *http.Request)
	}{
		{"huge message", false, 64 << 10, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[{"type":"text","text":"%s"}],"stop_reason":"end_turn","usage":{"input_tokens":1,"output_tokens":1}}`, strings.Repeat("x", 1<<20))
		}},
		{"huge error reply", false, 64 << 10, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("x-should-retry", "false")
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprintf(w, `{"type":"error","error":{"type":"invalid_request_error","message":"%s"}}`, strings.Repeat("x", 1<<20))
		}},
		{"endless stream", true, 0, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, "event: message_start\n"+`data: {"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[],"stop_reason":null,"usage":{"input_tokens":10,"output_tokens":1}}}`+"\n\n")
			io.WriteString(w, "event: content_block_start\n"+`data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`+"\n\n")
			for {
				if _, err := io.WriteString(w, delta); err != nil {
					return // the client went away
				}
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			done := make(chan struct{}, 4)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				defer func() { done <- struct{}{} }()
				_, _ = io.Copy(io.Discard, r.Body)
				tc.serve(w, r)
			}))
			defer srv.Close()
			p, err := anthropic.New(anthropic.Options{Model: testModel, APIKey: testKey, BaseURL: srv.URL, HTTPClient: srv.Client(),
				Stream: tc.stream, MaxRetries: -1, MaxResponseBytes: tc.max, Getenv: func(string) string { return "" }})
			if err != nil {
				t.Fatal(err)
			}
			plan, err := p.Plan(context.Background(), capturedRequest(t))
			if !errors.Is(err, planner.ErrResponseTooLarge) {
				t.Fatalf("Plan = %+v, %v; want ErrResponseTooLarge", plan, err)
			}
			if !strings.HasPrefix(err.Error(), "anthropic: messages: ") || strings.Count(err.Error(), "x") > 40 {
				t.Errorf("error %.200q", err)
			}
			<-done // the handler returns: the connection was closed
		})
	}
	if _, err := anthropic.New(anthropic.Options{Model: testModel, APIKey: testKey, MaxResponseBytes: -1, Getenv: func(string) string { return "" }}); !errors.Is(err, anthropic.ErrConfig) || !strings.Contains(err.Error(), "MaxResponseBytes") {
		t.Errorf("a negative MaxResponseBytes: %v", err)
	}
}
