package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/contextos/contextos/decision"
	"github.com/contextos/contextos/internal/pgtest"
	"github.com/contextos/contextos/internal/refundmodel"
)

var update = flag.Bool("update", false, "rewrite testdata/output.golden")

// childArgsEnv, when set, makes the test binary run the command once with
// these arguments (a JSON list) and exit with its code: the tests start
// separate invocations of the example this way.
const childArgsEnv = "REFUND_EXAMPLE_ARGS"

func TestMain(m *testing.M) {
	if raw, ok := os.LookupEnv(childArgsEnv); ok {
		var args []string
		if err := json.Unmarshal([]byte(raw), &args); err != nil {
			os.Stderr.WriteString("refund test child: " + err.Error() + "\n")
			os.Exit(3)
		}
		os.Exit(cli(context.Background(), args, os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// invocation is one run of the example in a process of its own.
type invocation struct {
	code           int
	stdout, stderr string
}

// invoke runs the example with args in a new process (the test binary
// re-executed) and returns its exit code and output.
func invoke(t *testing.T, args ...string) invocation {
	t.Helper()
	raw, err := json.Marshal(args)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childArgsEnv+"="+string(raw))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("start %v: %v", args, err)
	}
	return invocation{code: cmd.ProcessState.ExitCode(), stdout: stdout.String(), stderr: stderr.String()}
}

// stores are the durable stores the tests run the example on: a fresh
// SQLite file, and a fresh PostgreSQL schema (skipped without
// CONTEXTOS_POSTGRES_URL).
var stores = []struct {
	name string
	spec func(t *testing.T) string
}{
	{"sqlite", func(t *testing.T) string { return "sqlite:" + filepath.Join(t.TempDir(), "refund.db") }},
	{"postgres", func(t *testing.T) string { return pgtest.URL(t) }},
}

// TestOutput checks the example's whole output: the four flows, the
// record and the replay verdict. Run with -update after an intended change.
func TestOutput(t *testing.T) {
	var buf bytes.Buffer
	if err := run(context.Background(), &buf, config{}); err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "output.golden")
	if *update {
		if err := os.WriteFile(golden, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(want), buf.String()); diff != "" {
		t.Errorf("output differs from %s (-want +got):\n%s", golden, diff)
	}
	for _, must := range []string{
		"paused   awaiting GATE_FINANCE_APPROVAL by a finance_lead",
		"decision DECIDED approved (payments called 1 time)",
		"decision DECIDED denied",
		"result   replay_equal, 0 differences; live payments calls during replay: 0",
	} {
		if !bytes.Contains(buf.Bytes(), []byte(must)) {
			t.Errorf("output lacks %q", must)
		}
	}
}

// TestPaymentsOverExternalTransport runs the four flows with the payments
// tool behind the external transport on a loopback Tool Contract v1
// server: the same pause, approval, decision and offline replay, and the
// tool executes the refund exactly once.
func TestPaymentsOverExternalTransport(t *testing.T) {
	tool := &paymentsAdapter{}
	var mu sync.Mutex
	var seen []*http.Request
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Clone(r.Context()))
		mu.Unlock()
		paymentsHandler(tool).ServeHTTP(w, r)
	}))
	defer srv.Close()
	var buf bytes.Buffer
	if err := run(context.Background(), &buf, config{paymentsURL: srv.URL}); err != nil {
		t.Fatal(err)
	}
	for _, must := range []string{
		"paused   awaiting GATE_FINANCE_APPROVAL by a finance_lead",
		"adp_payments.issue_refund  completed",
		"decision DECIDED approved (payments called 1 time)",
		"decision DECIDED denied",
		"result   replay_equal, 0 differences; live payments calls during replay: 0",
	} {
		if !strings.Contains(buf.String(), must) {
			t.Errorf("output lacks %q:\n%s", must, buf.String())
		}
	}
	// Flow 1 (after approval) and flow 3 refund: two executions, one each.
	if n := tool.calls.Load(); n != 2 {
		t.Fatalf("the payments tool executed %d refunds, want 2", n)
	}
	for _, r := range seen {
		if r.Header.Get("X-Tool-Contract-Version") != "v1" || r.Header.Get("Idempotency-Key") == "" || !strings.HasPrefix(r.Header.Get("X-Request-Id"), "tool_") {
			t.Errorf("request headers %v", r.Header)
		}
	}
}

// TestDurableStoresRunTheSameFlows runs the four flows with every store in
// a database: the output is the in-memory run's, byte for byte (the same
// pause, approval, record, hashes and offline replay).
func TestDurableStoresRunTheSameFlows(t *testing.T) {
	want, err := os.ReadFile(filepath.Join("testdata", "output.golden"))
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range stores {
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			var buf bytes.Buffer
			if err := run(context.Background(), &buf, config{store: st.spec(t)}); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(string(want), buf.String()); diff != "" {
				t.Errorf("output on %s differs from the in-memory run (-memory +%s):\n%s", st.name, st.name, diff)
			}
		})
	}
}

// TestPauseAndResumeInTwoProcesses pauses flow 1 in one process and
// resumes it in another: the second finds the awaited approval in the
// store, payments is called once (by the second process), the run's
// records are DEFERRED, DECIDED and CLOSED on an unbroken chain, a third
// invocation cannot resume the decided run again, and an unknown run is
// not found.
func TestPauseAndResumeInTwoProcesses(t *testing.T) {
	for _, st := range stores {
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			spec := st.spec(t)
			first := invoke(t, "-store", spec, "-pause")
			if first.code != 0 {
				t.Fatalf("-pause exited %d: %s", first.code, first.stderr)
			}
			for _, must := range []string{
				"paused   awaiting GATE_FINANCE_APPROVAL by a finance_lead",
				"decision DEFERRED: awaiting approval on GATE_FINANCE_APPROVAL",
				"stored   run run_flow1 awaits GATE_FINANCE_APPROVAL; continue it in another process with -resume run_flow1",
			} {
				if !strings.Contains(first.stdout, must) {
					t.Errorf("-pause output lacks %q:\n%s", must, first.stdout)
				}
			}
			if strings.Contains(first.stdout, "adp_payments.issue_refund  completed") {
				t.Errorf("-pause issued the refund:\n%s", first.stdout)
			}

			second := invoke(t, "-store", spec, "-resume", "run_flow1")
			if second.code != 0 {
				t.Fatalf("-resume exited %d: %s", second.code, second.stderr)
			}
			for _, must := range []string{
				"run run_flow1 awaits GATE_FINANCE_APPROVAL by a finance_lead",
				"approve  GATE_FINANCE_APPROVAL by user_finance_lead_77 (finance_lead)",
				`tool     adp_payments.issue_refund  completed {"status":"issued","transaction_id":"txn_ord_881_1"}`,
				"result   DECIDED approved (payments called 1 time in this process)",
			} {
				if !strings.Contains(second.stdout, must) {
					t.Errorf("-resume output lacks %q:\n%s", must, second.stdout)
				}
			}

			third := invoke(t, "-store", spec, "-resume", "run_flow1")
			if third.code != 1 || !strings.Contains(third.stderr, "run is not paused") || strings.Contains(third.stdout, "issue_refund") {
				t.Errorf("resuming the decided run again: exit %d, stdout %q, stderr %q; want exit 1, not paused, no refund", third.code, third.stdout, third.stderr)
			}

			unknown := invoke(t, "-store", spec, "-resume", "run_nope")
			if unknown.code != 1 || !strings.Contains(unknown.stderr, "run run_nope: contextos: not found in the store") {
				t.Errorf("resuming an unknown run: exit %d, stderr %q", unknown.code, unknown.stderr)
			}

			ctx := context.Background()
			db, err := openStore(ctx, spec)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			recs, err := db.Records().List(ctx, decision.Filter{RunID: "run_flow1"})
			if err != nil {
				t.Fatal(err)
			}
			var statuses []decision.Status
			for _, r := range recs {
				statuses = append(statuses, r.Status)
			}
			// The DECIDED record is followed by the CLOSED record that
			// closes the DEFERRED one.
			if want := []decision.Status{decision.Deferred, decision.Decided, decision.Closed}; !cmp.Equal(statuses, want) {
				t.Errorf("run_flow1 records %v, want %v", statuses, want)
			}
			if err := db.Records().Verify(ctx); err != nil {
				t.Errorf("record chain: %v", err)
			}
		})
	}
}

// TestFlagErrors checks the flags that cannot run: each exits 2 with a
// message naming the problem, and a database URL's password is never
// repeated.
func TestFlagErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"pause without a store", []string{"-pause"}, 2, "-pause and -resume need -store"},
		{"resume without a store", []string{"-resume", "run_flow1"}, 2, "-pause and -resume need -store"},
		{"pause and resume", []string{"-store", "sqlite:x.db", "-pause", "-resume", "run_flow1"}, 2, "-pause and -resume are separate invocations"},
		{"unknown store", []string{"-store", "mysql://app:hunter2@db/prod"}, 2, "-store wants sqlite:FILE or a postgres:// URL"},
		{"unreachable postgres", []string{"-store", "postgres://app:hunter2@127.0.0.1:1/prod?connect_timeout=2"}, 1, "postgres"},
		{"stray argument", []string{"extra"}, 2, `unexpected argument "extra"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := cli(context.Background(), tc.args, &stdout, &stderr)
			if code != tc.code || !strings.Contains(stderr.String(), tc.want) {
				t.Errorf("exit %d, stderr %q; want exit %d and %q", code, stderr.String(), tc.code, tc.want)
			}
			if strings.Contains(stderr.String(), "hunter2") {
				t.Errorf("stderr repeats the password: %q", stderr.String())
			}
		})
	}
}

// TestModelPlanner runs the four flows with -planner openai:MODEL against a
// loopback OpenAI-compatible server: the model's plan pauses at the
// finance gate, is approved and decided; the unverified refund is denied;
// the replay of flow 1 asks the model nothing.
func TestModelPlanner(t *testing.T) {
	model := &refundmodel.OpenAI{APIKey: "sk-test"}
	srv := httptest.NewServer(model)
	defer srv.Close()
	t.Setenv("OPENAI_BASE_URL", srv.URL)
	t.Setenv("OPENAI_API_KEY", "sk-test")
	var buf bytes.Buffer
	if err := run(context.Background(), &buf, config{planner: "openai:gpt-test"}); err != nil {
		t.Fatalf("%v\n%s", err, buf.String())
	}
	out := buf.String()
	for _, must := range []string{
		"paused   awaiting GATE_FINANCE_APPROVAL by a finance_lead",
		"decision DECIDED approved (payments called 1 time)",
		"decision DECIDED denied",
		"result   replay_equal, 0 differences; live payments calls during replay: 0",
	} {
		if !strings.Contains(out, must) {
			t.Errorf("output lacks %q:\n%s", must, out)
		}
	}
	// Flow 1 asks three times (look up, refund, decide), flow 2 twice, flow
	// 3 three times; the replay none.
	if n := model.Requests(); n != 8 {
		t.Errorf("the model was asked %d times, want 8 (the replay must not ask it)", n)
	}
	if strings.Contains(out, "sk-test") {
		t.Error("the output shows the API key")
	}
}

// A -planner the example cannot build is a usage error naming the flag.
func TestModelPlannerFlagErrors(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "")
	t.Setenv("OPENAI_BASE_URL", "")
	for _, spec := range []string{"openai", "gemini:pro", "openai:gpt-test"} {
		var stderr bytes.Buffer
		if code := cli(context.Background(), []string{"-planner", spec}, io.Discard, &stderr); code != 2 || !strings.Contains(stderr.String(), "planner") {
			t.Errorf("-planner %s: exit %d, stderr %q", spec, code, stderr.String())
		}
	}
}

// -price prices the model's turns against the run's cost budget (25
// cents): at 2/8/0.5 USD per million tokens the flows run as without it;
// at 1000/1000 the first turn costs 126 cents and every flow stops
// budget_exceeded before a tool is called.
func TestModelPlannerPrice(t *testing.T) {
	for _, tc := range []struct {
		price string
		must  []string
		calls int
	}{
		{"gpt-test=2/8/0.5", []string{"decision DECIDED approved (payments called 1 time)", "decision DECIDED denied"}, 8},
		{"gpt-test=1000/1000", []string{"budget_exceeded"}, 3},
	} {
		t.Run(tc.price, func(t *testing.T) {
			model := &refundmodel.OpenAI{APIKey: "sk-test"}
			srv := httptest.NewServer(model)
			defer srv.Close()
			t.Setenv("OPENAI_BASE_URL", srv.URL)
			t.Setenv("OPENAI_API_KEY", "sk-test")
			var buf bytes.Buffer
			if err := run(context.Background(), &buf, config{planner: "openai:gpt-test", price: tc.price}); err != nil {
				t.Fatalf("%v\n%s", err, buf.String())
			}
			for _, must := range tc.must {
				if !strings.Contains(buf.String(), must) {
					t.Errorf("output lacks %q:\n%s", must, buf.String())
				}
			}
			if n := model.Requests(); n != tc.calls {
				t.Errorf("the model was asked %d times, want %d", n, tc.calls)
			}
		})
	}
}

// -price must price the -planner model, and needs -planner.
func TestModelPlannerPriceErrors(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "sk-test")
	for _, args := range [][]string{
		{"-price", "gpt-test=2/8"},
		{"-planner", "openai:gpt-test", "-price", "gpt-other=2/8"},
		{"-planner", "openai:gpt-test", "-price", "gpt-test=2"},
	} {
		var stderr bytes.Buffer
		if code := cli(context.Background(), args, io.Discard, &stderr); code != 2 || !strings.Contains(stderr.String(), "price") {
			t.Errorf("%v: exit %d, stderr %q", args, code, stderr.String())
		}
	}
}
