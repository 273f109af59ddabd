package transport

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/runcontext"
)

// echoedToken is the bearer secret the tool echoes back in every way.
const echoedToken = "sk_live_rev4_bearer_0123456789"

// TestSendIsClientDoUnderCancellationAndSecrets: straight to the
// transport or through http.Client.Do, an attempt ends the same way — the
// same outcome, error, span attributes, span status and log line — when
// its context is canceled or its deadline passes while the tool holds
// the reply, and when a tool with a bearer secret echoes the secret (in a
// 500 body, a 401 body, a redirect's Location, an ok output); the secret
// reaches neither the error, the span nor the log either way.
func TestSendIsClientDoUnderCancellationAndSecrets(t *testing.T) {
	hold := make(chan struct{})
	defer close(hold)
	replies := map[string]func(w http.ResponseWriter, r *http.Request){
		"held": func(w http.ResponseWriter, r *http.Request) {
			io.Copy(io.Discard, r.Body) // the server notices the client leave once the body is read
			select {
			case <-r.Context().Done():
			case <-hold:
			}
		},
		"500 echo": func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "bad token "+r.Header.Get("Authorization"), http.StatusInternalServerError)
		},
		"401 echo": func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, r.Header.Get("Authorization"), http.StatusUnauthorized)
		},
		"302 echo": func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Location", "http://u:"+echoedToken+"@elsewhere.example/%zz?t="+echoedToken)
			w.WriteHeader(http.StatusFound)
		},
		"302 bad echo": func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Location", "http://[::1/"+echoedToken)
			w.WriteHeader(http.StatusFound)
		},
		"ok echo": func(w http.ResponseWriter, r *http.Request) {
			w.Write([]byte(`{"status":"ok","output":{"result":"` + strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ") + `"}}`))
		},
	}
	contexts := map[string]func() (context.Context, context.CancelFunc){
		"live": func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), 10*time.Second)
		},
		"deadline": func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), 50*time.Millisecond)
		},
		"canceled": func() (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(50*time.Millisecond, cancel)
			return ctx, cancel
		},
	}
	for name, reply := range replies {
		ts := httptest.NewServer(http.HandlerFunc(reply))
		for cname, mk := range contexts {
			if (name == "held") == (cname == "live") {
				continue
			}
			t.Run(name+" "+cname, func(t *testing.T) {
				ep := Endpoint{Transport: TransportExternal, URL: ts.URL, AllowPrivate: true, Auth: &Auth{SecretRef: "tok"}}
				run := func(direct bool) (*gateway.Outcome, string, string, error) {
					rec := tracetest.NewSpanRecorder()
					var log bytes.Buffer
					opts := &Options{Secrets: MapSecrets{"tok": echoedToken}, TracerProvider: sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()), sdktrace.WithSpanProcessor(rec)),
						Logger: slog.New(slog.NewJSONHandler(&log, &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
							if a.Key == slog.TimeKey {
								return slog.Attr{} // wall clock
							}
							return a
						}})), Now: func() time.Time { return time.Unix(0, 0) }}
					a, err := NewAdapter(ep, opts)
					if err != nil {
						t.Fatal(err)
					}
					if a.direct == nil {
						t.Fatal("the adapter sends through the client")
					}
					if !direct {
						a.direct = nil
					}
					ctx, cancel := mk()
					defer cancel()
					c := &gateway.Call{Envelope: &gateway.ToolCallEnvelope{ToolCallID: "tool_1", RunID: "run_1", CapabilityID: "adp.cap", Args: map[string]any{"a": 1.0}},
						Capability: "cap", Attempt: 1, Trace: runcontext.Trace{TraceID: "4bf92f3577b34da6a3ce929d0e0e4736", SpanID: "00f067aa0ba902b7"}}
					out, err := a.Call(ctx, c)
					var spans strings.Builder
					for _, s := range rec.Ended() {
						spans.WriteString(s.Name() + " " + s.Status().Code.String() + " " + s.Status().Description)
						for _, kv := range s.Attributes() {
							spans.WriteString(" " + string(kv.Key) + "=" + kv.Value.String())
						}
					}
					return out, spans.String(), log.String(), err
				}
				got, gotSpans, gotLog, gotErr := run(true)
				want, wantSpans, wantLog, wantErr := run(false)
				if !reflect.DeepEqual(got, want) || !reflect.DeepEqual(gotErr, wantErr) {
					t.Fatalf("straight: %+v, %#v\nthrough the client: %+v, %#v", got, gotErr, want, wantErr)
				}
				if gotSpans == "" || gotLog == "" {
					t.Fatal("no span or no log line recorded")
				}
				if gotSpans != wantSpans || gotLog != wantLog {
					t.Fatalf("straight: span %s log %s\nthrough the client: span %s log %s", gotSpans, gotLog, wantSpans, wantLog)
				}
				for _, text := range []string{errText(gotErr), gotSpans, gotLog} {
					if strings.Contains(text, echoedToken) {
						t.Fatalf("the secret reached %q", text)
					}
				}
			})
		}
		ts.Close()
	}
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
