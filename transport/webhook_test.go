package transport_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/transport"
)

// scripted is an in-process webhook tool: submit answers every POST, and
// poll answers the n-th GET (a nil response with a nil error blocks until
// the poll's context ends). It counts both.
type scripted struct {
	mu           sync.Mutex
	posts, polls int
	submit       func(n int) (int, string)
	poll         func(n int) (int, string, error)
}

func (s *scripted) RoundTrip(r *http.Request) (*http.Response, error) {
	s.mu.Lock()
	var status int
	var body string
	var err error
	if r.Method == http.MethodPost {
		status, body = s.submit(s.posts)
		s.posts++
	} else {
		status, body, err = s.poll(s.polls)
		s.polls++
	}
	s.mu.Unlock()
	if err != nil {
		return nil, err
	}
	if status == 0 {
		<-r.Context().Done() // a poll that hangs
		return nil, r.Context().Err()
	}
	return &http.Response{StatusCode: status, Header: http.Header{"Content-Type": {"application/json"}}, Body: io.NopCloser(strings.NewReader(body)), Request: r}, nil
}

func (s *scripted) counts() (int, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.posts, s.polls
}

func webhookAdapter(t *testing.T, s *scripted) *transport.Adapter {
	return newAdapter(t, transport.Endpoint{Transport: "webhook-callback", URL: "https://tools.example.com/jobs", PollInterval: time.Second},
		&transport.Options{HTTPClient: &http.Client{Transport: s}})
}

const jobDone = `{"tool_contract_version":"v1","request_id":"tool_0123456789abcdef","status":"ok","output":{"done":true}}`

// A webhook job the tool accepted is submitted once: whatever its polls
// answer short of a terminal reply, the wait goes on, and a later attempt
// of the same call polls the job instead of submitting it again.
func TestWebhookNeverSubmitsTwice(t *testing.T) {
	t.Parallel()
	accepted := func(int) (int, string) { return 202, `` }
	for _, tc := range []struct {
		name   string
		submit func(n int) (int, string)
		polls  []func() (int, string, error)
	}{
		{"every kind of not-yet", accepted, []func() (int, string, error){
			func() (int, string, error) {
				return 200, `{"status":"pending","request_id":"tool_0123456789abcdef"}`, nil
			},
			func() (int, string, error) { return 202, ``, nil },
			func() (int, string, error) { return 204, ``, nil },
			func() (int, string, error) { return 200, `{"status":"running"}`, nil },
			func() (int, string, error) { return 200, ``, nil },
			func() (int, string, error) { return 200, `{"status":"queued","tool_contract_version":"v1"}`, nil },
		}},
		{"poll errors and a hung poll", accepted, []func() (int, string, error){
			func() (int, string, error) { return 500, `{"error":"busy"}`, nil },
			func() (int, string, error) { return 503, ``, nil },
			func() (int, string, error) { return 429, ``, nil },
			func() (int, string, error) { return 0, ``, errors.New("connection reset by peer") },
			func() (int, string, error) { return 0, ``, nil }, // hangs past its poll timeout
			func() (int, string, error) { return 202, ``, nil },
		}},
		{"a 200 submit whose body is pending", func(int) (int, string) { return 200, `{"status":"pending"}` }, []func() (int, string, error){
			func() (int, string, error) { return 202, ``, nil },
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				s := &scripted{submit: tc.submit, poll: func(n int) (int, string, error) {
					if n < len(tc.polls) {
						return tc.polls[n]()
					}
					return 200, jobDone, nil
				}}
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
				defer cancel()
				out, err := webhookAdapter(t, s).Call(ctx, call(1))
				if err != nil || out.Output["done"] != true {
					t.Fatalf("%v %v", out, err)
				}
				if posts, polls := s.counts(); posts != 1 || polls != len(tc.polls)+1 {
					t.Fatalf("%d POSTs and %d polls, want 1 and %d", posts, polls, len(tc.polls)+1)
				}
			})
		})
	}

	t.Run("a later attempt polls the accepted job", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			done := false
			s := &scripted{submit: accepted, poll: func(int) (int, string, error) {
				if done {
					return 200, jobDone, nil
				}
				return 202, ``, nil
			}}
			a := webhookAdapter(t, s)
			for attempt := 1; attempt <= 3; attempt++ {
				// The first attempts end with the attempt's deadline while
				// the job runs: a retryable timeout.
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				if attempt == 3 {
					s.mu.Lock()
					done = true
					s.mu.Unlock()
				}
				out, err := a.Call(ctx, call(attempt))
				cancel()
				switch {
				case attempt < 3:
					if te := toolErr(t, err); te.Code != gateway.CodeTimeout || !te.Retryable {
						t.Fatalf("attempt %d: %+v", attempt, te)
					}
				case err != nil || out.Output["done"] != true:
					t.Fatalf("attempt %d: %v %v", attempt, out, err)
				}
			}
			if posts, _ := s.counts(); posts != 1 {
				t.Fatalf("%d POSTs over three attempts, want 1", posts)
			}
			// The job is finished: a new call with the same id submits anew.
			s.mu.Lock()
			s.polls = 0
			s.mu.Unlock()
			if _, err := a.Call(context.Background(), call(1)); err != nil {
				t.Fatal(err)
			}
			if posts, _ := s.counts(); posts != 2 {
				t.Fatalf("%d POSTs, want 2 after the first job finished", posts)
			}
		})
	})

	t.Run("a final poll error ends the attempt", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			s := &scripted{submit: accepted, poll: func(n int) (int, string, error) { return 404, `{"error":"no such job"}`, nil }}
			a := webhookAdapter(t, s)
			_, err := a.Call(context.Background(), call(1))
			if te := toolErr(t, err); te.Code != gateway.CodeExecutionFailed || te.Retryable || te.Details["http_status"] != 404 {
				t.Fatalf("%+v", te)
			}
			if posts, polls := s.counts(); posts != 1 || polls != 1 {
				t.Fatalf("%d POSTs, %d polls", posts, polls)
			}
		})
	})
}

// TestWebhookOutstandingJobsAreNeverForgotten: a tool that accepts jobs and
// never finishes them cannot push an accepted job out of the adapter's
// memory. With maxAccepted jobs outstanding, a new request is refused
// (retryable, nothing POSTed) rather than forgetting one, and a later
// attempt of the first job still polls it instead of submitting it again.
func TestWebhookOutstandingJobsAreNeverForgotten(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &scripted{submit: func(int) (int, string) { return 202, `` }, poll: func(int) (int, string, error) { return 202, ``, nil }}
		a := webhookAdapter(t, s)
		attempt := func(id string, n int) (*gateway.Outcome, error) {
			c := call(n)
			c.Envelope.ToolCallID = id
			ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
			defer cancel()
			return a.Call(ctx, c)
		}
		attempt("tool_first", 1)
		for i := 1; i < transport.MaxAcceptedWebhookJobs; i++ {
			attempt(fmt.Sprintf("tool_other_%d", i), 1)
		}
		posts, _ := s.counts()
		if posts != transport.MaxAcceptedWebhookJobs {
			t.Fatalf("%d POSTs for %d jobs", posts, transport.MaxAcceptedWebhookJobs)
		}
		out, err := attempt("tool_one_too_many", 1)
		if after, _ := s.counts(); after != posts {
			t.Fatalf("a job past the bound was submitted (%d POSTs -> %d)", posts, after)
		}
		var te *gateway.ToolError
		if out != nil || !errors.As(err, &te) || !te.Retryable || !strings.Contains(te.Message, "outstanding") {
			t.Fatalf("a job past the bound: %+v, %v", out, err)
		}
		attempt("tool_first", 2)
		if after, _ := s.counts(); after != posts {
			t.Fatalf("attempt 2 of the first accepted job POSTed it again (%d POSTs -> %d)", posts, after)
		}
	})
}
