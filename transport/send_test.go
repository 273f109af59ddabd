package transport

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/runcontext"
)

// TestSendIsClientDo: an adapter that sends straight to its transport
// answers every reply — redirects with a good, a bad or no Location,
// errors, a dropped connection, a refused address — as one that sends
// through http.Client.Do.
func TestSendIsClientDo(t *testing.T) {
	const ok = `{"tool_contract_version":"v1","status":"ok","output":{"ok":true}}`
	replies := map[string]func(w http.ResponseWriter){
		"ok": func(w http.ResponseWriter) { w.Write([]byte(ok)) },
		"301": func(w http.ResponseWriter) {
			w.Header().Set("Location", "/elsewhere")
			w.WriteHeader(http.StatusMovedPermanently)
		},
		"302 bad location": func(w http.ResponseWriter) {
			w.Header().Set("Location", "/%zz")
			w.WriteHeader(http.StatusFound)
		},
		"303 bad location": func(w http.ResponseWriter) {
			w.Header().Set("Location", "http://[::1")
			w.WriteHeader(http.StatusSeeOther)
		},
		"307 no location": func(w http.ResponseWriter) { w.WriteHeader(http.StatusTemporaryRedirect) },
		"308": func(w http.ResponseWriter) {
			w.Header().Set("Location", "https://other.example/x")
			w.WriteHeader(http.StatusPermanentRedirect)
		},
		"300 bad location": func(w http.ResponseWriter) {
			w.Header().Set("Location", "/%zz")
			w.WriteHeader(http.StatusMultipleChoices)
		},
		"404": func(w http.ResponseWriter) { http.Error(w, "no such tool", http.StatusNotFound) },
		"503": func(w http.ResponseWriter) { http.Error(w, "busy", http.StatusServiceUnavailable) },
		"dropped": func(w http.ResponseWriter) {
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				conn.Close()
			}
		},
	}
	for name, reply := range replies {
		t.Run(name, func(t *testing.T) {
			ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { reply(w) }))
			defer ts.Close()
			sameOutcome(t, Endpoint{Transport: TransportExternal, URL: ts.URL, AllowPrivate: true})
		})
	}
	t.Run("refused address", func(t *testing.T) {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer lis.Close()
		defer SetLookup(func(context.Context, string) ([]netip.Addr, error) {
			return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
		})()
		sameOutcome(t, Endpoint{Transport: TransportExternal, URL: "http://tools.example.test:" + portOf(lis.Addr())})
	})
}

func portOf(a net.Addr) string {
	_, port, _ := net.SplitHostPort(a.String())
	return port
}

// sameOutcome calls ep once straight to the transport and once through
// http.Client.Do and compares the outcomes.
func sameOutcome(t *testing.T, ep Endpoint) {
	t.Helper()
	direct, err := NewAdapter(ep, nil)
	if err != nil {
		t.Fatal(err)
	}
	if direct.direct == nil {
		t.Fatal("the adapter sends through the client")
	}
	viaClient, _ := NewAdapter(ep, nil)
	viaClient.direct = nil
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c := &gateway.Call{Envelope: &gateway.ToolCallEnvelope{ToolCallID: "tool_1", RunID: "run_1", CapabilityID: "adp.cap", Args: map[string]any{"a": 1.0}},
		Capability: "cap", Attempt: 1, Trace: runcontext.Trace{TraceID: "4bf92f3577b34da6a3ce929d0e0e4736", SpanID: "00f067aa0ba902b7"}}
	got, gotErr := direct.Call(ctx, c)
	want, wantErr := viaClient.Call(ctx, c)
	if !reflect.DeepEqual(got, want) || !reflect.DeepEqual(gotErr, wantErr) {
		t.Fatalf("straight to the transport: %+v, %#v\nthrough the client: %+v, %#v", got, gotErr, want, wantErr)
	}
}

// TestReadBodyIsReadAll: readBody reads what io.ReadAll of the bounded
// body reads, whatever length the reply announced, and fails alike.
func TestReadBodyIsReadAll(t *testing.T) {
	for _, size := range []int{0, 1, 100, 511, 512, 513, 4000, maxBody, maxBody + 1, maxBody + 100} {
		data := bytes.Repeat([]byte("x"), size)
		for _, announced := range []int64{-1, 0, int64(size), int64(size) - 1, int64(size) + 7, maxBody, maxBody + 1} {
			got, gotErr := readBody(iotest.HalfReader(bytes.NewReader(data)), announced)
			want, wantErr := io.ReadAll(io.LimitReader(iotest.HalfReader(bytes.NewReader(data)), maxBody+1))
			if !bytes.Equal(got, want) || gotErr != wantErr {
				t.Fatalf("size %d, announced %d: %d bytes, %v; io.ReadAll %d bytes, %v", size, announced, len(got), gotErr, len(want), wantErr)
			}
		}
	}
	boom := errors.New("boom")
	got, err := readBody(io.MultiReader(strings.NewReader("abc"), iotest.ErrReader(boom)), 10)
	want, wantErr := io.ReadAll(io.LimitReader(io.MultiReader(strings.NewReader("abc"), iotest.ErrReader(boom)), maxBody+1))
	if !bytes.Equal(got, want) || err != wantErr {
		t.Fatalf("%q, %v; io.ReadAll %q, %v", got, err, want, wantErr)
	}
}
