package openai_test

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
	"github.com/contextos/contextos/planner/openai"
)

// A response body past MaxResponseBytes is refused with
// planner.ErrResponseTooLarge: a huge answer, a huge error reply, and a
// stream that never ends (at the default bound), whose server handler
// then returns (TestMain checks that no goroutine leaks).
func TestResponseTooLarge(t *testing.T) {
	t.Parallel()
	chunk := `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"` + strings.Repeat("x", 512) + `"},"finish_reason":null}]}` + "\n\n"
	for _, tc := range []struct {
		name   string
		stream bool
		max    int64
		serve  func(w http.ResponseWriter, r *http.Request)
	}{
		{"huge answer", false, 64 << 10, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"%s"},"finish_reason":"stop"}]}`, strings.Repeat("x", 1<<20))
		}},
		{"huge error reply", false, 64 << 10, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprintf(w, `{"error":{"message":"%s","type":"invalid_request_error"}}`, strings.Repeat("x", 1<<20))
		}},
		{"endless stream", true, 0, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			for {
				if _, err := io.WriteString(w, chunk); err != nil {
					return // the client went away
				}
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			done := make(chan struct{})
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				defer func() { done <- struct{}{} }()
				_, _ = io.Copy(io.Discard, r.Body)
				tc.serve(w, r)
			}))
			defer srv.Close()
			p, err := openai.New(openai.Options{Model: testModel, APIKey: testKey, BaseURL: srv.URL + "/v1/", HTTPClient: srv.Client(),
				Stream: tc.stream, MaxRetries: -1, MaxResponseBytes: tc.max, Getenv: noEnv})
			if err != nil {
				t.Fatal(err)
			}
			plan, err := p.Plan(context.Background(), planRequest(t))
			if !errors.Is(err, planner.ErrResponseTooLarge) {
				t.Fatalf("Plan = %+v, %v; want ErrResponseTooLarge", plan, err)
			}
			if !strings.HasPrefix(err.Error(), "openai: chat completion: ") || strings.Count(err.Error(), "x") > 40 {
				t.Errorf("error %.200q", err)
			}
			<-done // the handler returns: the connection was closed
		})
	}
	if _, err := openai.New(openai.Options{Model: testModel, APIKey: testKey, MaxResponseBytes: -1, Getenv: noEnv}); !errors.Is(err, openai.ErrConfig) || !strings.Contains(err.Error(), "MaxResponseBytes") {
		t.Errorf("a negative MaxResponseBytes: %v", err)
	}
}
