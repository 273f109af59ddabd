package grpctransport_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/transport"
	"github.com/contextos/contextos/transport/grpctransport"
	"github.com/contextos/contextos/transport/internal/orlojpeer"
)

// peerCall is Orloj's gRPC client: one unary call decoded with its types.
// A reply it cannot decode is an error, as is a gRPC status.
func peerCall(ctx context.Context, url string, req orlojpeer.Request) (orlojpeer.Response, error) {
	conn, err := grpc.NewClient(strings.TrimPrefix(url, "grpc://"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return orlojpeer.Response{}, err
	}
	defer conn.Close()
	var resp orlojpeer.Response
	err = conn.Invoke(ctx, grpctransport.FullMethod, &req, &resp, grpc.CallContentSubtype(grpctransport.CodecName))
	return resp, err
}

// Every reply Register writes decodes for a caller typed as Orloj's,
// whatever the executor's output holds: a result that is not a string
// travels as its JSON text, and our adapter reads the value back; a caller
// that retries what it cannot read runs the tool once.
func TestRegisterRepliesDecodeForAnUpstreamCaller(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name   string
		result any
		text   string // output.result as an upstream caller reads it
		back   any    // as our adapter reads it
	}{
		{"string", "refund issued", "refund issued", "refund issued"},
		{"string holding a number", "42", "42", "42"},
		{"number", 4200, "4200", 4200.0},
		{"object", map[string]any{"amount_inr": 4200.0, "refund": "issued"}, `{"amount_inr":4200,"refund":"issued"}`, map[string]any{"amount_inr": 4200.0, "refund": "issued"}},
		{"array", []any{1.0, "a"}, `[1,"a"]`, []any{1.0, "a"}},
		{"bool", true, "true", true},
		{"null", nil, "null", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			var runs atomic.Int32
			url := serveTools(t, transport.ExecutorFunc(func(context.Context, *transport.Request) *transport.Response {
				runs.Add(1)
				return &transport.Response{Status: "ok", Output: map[string]any{"result": c.result, "transaction_id": "txn_1"}}
			}))
			resp, attempts, err := orlojpeer.Governed(bg, 3, func(ctx context.Context, attempt int) (orlojpeer.Response, error) {
				req := orlojpeer.BaseRequest("adp_payments.issue_refund", "req-123")
				req.Attempt = attempt
				return peerCall(ctx, url, req)
			})
			if err != nil || attempts != 1 || runs.Load() != 1 {
				t.Fatalf("%d attempts (%v): the tool ran %d times, want once", attempts, err, runs.Load())
			}
			if ps := orlojpeer.Validate(orlojpeer.BaseRequest("adp_payments.issue_refund", "req-123"), resp, &orlojpeer.Expect{Status: "ok"}); len(ps) > 0 {
				t.Errorf("conformance: %s", strings.Join(ps, "\n"))
			}
			if resp.Output.Result != c.text {
				t.Errorf("output.result %q, want %q", resp.Output.Result, c.text)
			}
			out, err := newAdapter(t, url, nil, nil).Call(bg, call(1, nil))
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(map[string]any{"result": c.back, "transaction_id": "txn_1"}, out.Output); d != "" {
				t.Errorf("our adapter read (-want +got):\n%s", d)
			}
		})
	}

	// An output with no JSON form is a non-retryable failure response, not
	// a gRPC status (which a caller retries).
	url := serveTools(t, transport.ExecutorFunc(func(context.Context, *transport.Request) *transport.Response {
		return &transport.Response{Status: "ok", Output: map[string]any{"result": math.Inf(-1)}}
	}))
	resp, err := peerCall(bg, url, orlojpeer.BaseRequest("t", "req-1"))
	if err != nil || resp.Status != "error" || resp.Error.Code != "execution_failed" || resp.Error.Retryable || resp.RequestID != "req-1" {
		t.Fatalf("%+v %v", resp, err)
	}
	_, err = newAdapter(t, url, nil, nil).Call(bg, call(1, nil))
	if te := toolErr(t, err); te.Code != gateway.CodeExecutionFailed || te.Retryable {
		t.Errorf("our adapter: %+v", te)
	}
}

// panicSecret is what the panicking tool of the child process holds.
const panicSecret = "sk-live-grpc-panic-0a1b2c3d4e5f"

// TestPanickingToolServer is the child process of
// TestRegisterSurvivesAPanickingExecutor (it runs only there): a gRPC tool
// server whose executor panics with a secret when asked, printing its
// address and serving until killed.
func TestPanickingToolServer(t *testing.T) {
	if os.Getenv("GRPCTRANSPORT_PANIC_CHILD") != "1" {
		t.Skip("the child process of TestRegisterSurvivesAPanickingExecutor")
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	grpctransport.Register(s, transport.ExecutorFunc(func(_ context.Context, req *transport.Request) *transport.Response {
		if req.Input["panic"] == "yes" {
			panic(fmt.Errorf("payments backend refused token %s", panicSecret))
		}
		return &transport.Response{Status: "ok", Output: map[string]any{"result": "alive"}}
	}))
	fmt.Println("grpc://" + lis.Addr().String())
	s.Serve(lis)
}

// A gRPC tool server whose executor panics answers a Tool Contract error
// (non-retryable, nothing of the panic's value) and keeps serving: the
// server runs in its own process, so a panic that escaped would kill it.
func TestRegisterSurvivesAPanickingExecutor(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^TestPanickingToolServer$", "-test.v=false")
	cmd.Env = append(os.Environ(), "GRPCTRANSPORT_PANIC_CHILD=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	stop := func() { once.Do(func() { cmd.Process.Kill(); cmd.Wait() }) }
	defer stop()
	url, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("the child printed no address: %v", err)
	}
	url = strings.TrimSpace(url)
	ctx, cancel := context.WithTimeout(bg, 30*time.Second)
	defer cancel()

	req := orlojpeer.BaseRequest("adp_payments.issue_refund", "req-123")
	req.InputRaw = `{"panic":"yes"}`
	resp, err := peerCall(ctx, url, req)
	if err != nil {
		t.Fatalf("the upstream caller got no Tool Contract reply: %v", err)
	}
	no := false
	if ps := orlojpeer.Validate(req, resp, &orlojpeer.Expect{Status: "error", Code: "execution_failed", Reason: "tool_backend_failure", Retryable: &no}); len(ps) > 0 {
		t.Errorf("conformance: %s", strings.Join(ps, "\n"))
	}
	b, _ := json.Marshal(resp)
	if bytes.Contains(b, []byte(panicSecret)) {
		t.Errorf("the reply carries the panic's secret: %s", b)
	}
	a, err := grpctransport.New(transport.Endpoint{Transport: "grpc", URL: url, AllowPrivate: true}, &grpctransport.Options{Plaintext: true})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	_, err = a.Call(ctx, call(1, map[string]any{"panic": "yes"}))
	if te := toolErr(t, err); te.Code != gateway.CodeExecutionFailed || te.Retryable || strings.Contains(err.Error(), panicSecret) {
		t.Errorf("our adapter: %+v", te)
	}
	req.InputRaw = `{"panic":"no"}`
	if resp, err := peerCall(ctx, url, req); err != nil || resp.Output.Result != "alive" {
		t.Errorf("the server stopped serving after a panic: %+v %v", resp, err)
	}
	stop()
	if strings.Contains(stderr.String(), panicSecret) {
		t.Errorf("the server process wrote the panic's secret: %s", stderr.String())
	}
}
