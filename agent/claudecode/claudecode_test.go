package claudecode

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/contextos/contextos/agent"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/golden")

func TestMain(m *testing.M) {
	if name := os.Getenv(envScenario); name != "" {
		os.Exit(fakeMain(name))
	}
	goleak.VerifyTestMain(m)
}

// safetyNet bounds a Wait so a broken run fails the test instead of
// hanging it; no test asserts on time.
const safetyNet = 2 * time.Minute

func fakeExe(t testing.TB) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return exe
}

// newFake is a backend running the fake claude playing scenario.
func newFake(t testing.TB, scenario string, cfg Config) *Backend {
	t.Helper()
	env := map[string]string{envScenario: scenario}
	for k, v := range cfg.Env {
		env[k] = v
	}
	cfg.Env = env
	if cfg.Binary == "" {
		cfg.Binary = fakeExe(t)
	}
	return New(cfg)
}

type outcome struct {
	events []agent.Event
	comp   agent.Completion
	err    error
}

// drain reads every event, then waits for the completion.
func drain(t testing.TB, run *agent.Run) outcome {
	t.Helper()
	var o outcome
	for ev := range run.Events() {
		o.events = append(o.events, ev)
	}
	ctx, cancel := context.WithTimeout(context.Background(), safetyNet)
	defer cancel()
	o.comp, o.err = run.Wait(ctx)
	if errors.Is(o.err, context.DeadlineExceeded) && ctx.Err() != nil {
		t.Fatal("the run did not complete")
	}
	return o
}

func runFake(t testing.TB, scenario string, cfg Config, req agent.RunRequest) outcome {
	t.Helper()
	run, err := newFake(t, scenario, cfg).Run(context.Background(), req)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	return drain(t, run)
}

// golden renders an outcome: one event per line, then the completion and
// the error. Runs of 64 or more letters a are written "@@A<n>@@".
func golden(t testing.TB, o outcome) []byte {
	t.Helper()
	var buf bytes.Buffer
	for _, ev := range o.events {
		b, err := json.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		buf.Write(b)
		buf.WriteByte('\n')
	}
	end := struct {
		Completion *agent.Completion `json:"completion,omitempty"`
		Error      string            `json:"error,omitempty"`
	}{Completion: &o.comp}
	if o.err != nil {
		end.Completion, end.Error = nil, o.err.Error()
	}
	b, err := json.Marshal(end)
	if err != nil {
		t.Fatal(err)
	}
	buf.Write(b)
	buf.WriteByte('\n')
	return longA.ReplaceAllFunc(buf.Bytes(), func(m []byte) []byte {
		return []byte("@@A" + strconv.Itoa(len(m)) + "@@")
	})
}

var longA = regexp.MustCompile(`a{64,}`)

func checkGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", "golden", name+".jsonl")
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -run %s -update)", err, t.Name())
	}
	if !bytes.Equal(got, want) {
		t.Errorf("events differ from %s:\ngot:\n%s\nwant:\n%s", path, got, want)
	}
}

// assertNoLeak checks that no sentinel reaches an event, the completion or
// the error.
func assertNoLeak(t *testing.T, o outcome) {
	t.Helper()
	all := string(golden(t, o))
	for _, s := range []string{"SECRET", "sk-ant-", "No conversation found", "requires --verbose", "root/sudo"} {
		if strings.Contains(all, s) {
			t.Errorf("%q leaked:\n%s", s, all)
		}
	}
}

func ext(kv ...string) map[string]json.RawMessage {
	m := map[string]json.RawMessage{}
	for i := 0; i < len(kv); i += 2 {
		m[kv[i]] = json.RawMessage(kv[i+1])
	}
	return m
}

// TestScenarios plays the fake CLI scenarios of agent-cli-formats §3
// (8–15) and more, and compares every event, the completion and the error
// with testdata/golden.
func TestScenarios(t *testing.T) {
	resumeByID := ext(agent.CapSessionResume, `{"selector":"id","id":"`+resumeID+`"}`)
	tests := []struct {
		name     string
		scenario string
		req      agent.RunRequest
		check    func(t *testing.T, o outcome)
	}{
		{name: "partial_text", check: func(t *testing.T, o outcome) {
			wantOK(t, o, 0, "Hello world")
			if got := texts(o.events); got != "Hello world" {
				t.Errorf("text events join to %q, want the text once", got)
			}
		}},
		{name: "tool_roundtrip", check: func(t *testing.T, o outcome) {
			wantOK(t, o, 0, "Hello from the mock model.")
			call, res := toolFacets(t, o.events, agent.EventToolCall), toolFacets(t, o.events, agent.EventToolResult)
			if len(call) != 1 || len(res) != 1 {
				t.Fatalf("tool events: %d calls, %d results", len(call), len(res))
			}
			for _, f := range []map[string]any{call[0], res[0]} {
				if f["tool_name"] != "Bash" || f["tool_use_id"] != "toolu_mock01" {
					t.Errorf("facet %v", f)
				}
			}
		}},
		{name: "not_logged_in", check: func(t *testing.T, o outcome) {
			wantOK(t, o, 1, "Not logged in · Please run /login")
			wantErrorMessages(t, o.events, "result success is_error=true",
				"claude_code exited non-zero: code=1 (output redacted): claude is not logged in; give it ANTHROPIC_API_KEY in its environment (Config.Env), or log in (claude /login) as the user it runs as")
			wantCause(t, o.events, CauseNotLoggedIn)
		}},
		{name: "resume_not_found", req: agent.RunRequest{Extensions: resumeByID}, check: func(t *testing.T, o outcome) {
			wantErr(t, o, "session not found")
			wantErrorMessages(t, o.events, "session not found")
		}},
		{name: "resume_not_found_upstream", scenario: "resume_not_found_upstream", req: agent.RunRequest{Extensions: ext(agent.CapSessionResume, `{"selector":"id","id":"sess-1"}`)}, check: func(t *testing.T, o outcome) {
			wantErr(t, o, "session not found")
			wantErrorMessages(t, o.events, "session not found")
		}},
		{name: "fork_last_not_found", scenario: "resume_not_found_upstream", req: agent.RunRequest{Extensions: ext(agent.CapSessionFork, `{"selector":"last"}`)}, check: func(t *testing.T, o outcome) {
			wantErr(t, o, "no session found")
		}},
		{name: "resume_stderr_not_found", scenario: "stderr_not_found", req: agent.RunRequest{Extensions: ext(agent.CapSessionResume, `{"selector":"last"}`)}, check: func(t *testing.T, o outcome) {
			wantErr(t, o, "no session found")
		}},
		{name: "not_found_without_resume", scenario: "resume_not_found_upstream", check: func(t *testing.T, o outcome) {
			// Without a session selector the same output is a failed run.
			wantOK(t, o, 1, "")
			wantErrorMessages(t, o.events, "result error", "claude_code exited non-zero: code=1 (output redacted)")
		}},
		{name: "resume_max_turns_is_not_not_found", scenario: "max_turns", req: agent.RunRequest{Extensions: resumeByID}, check: func(t *testing.T, o outcome) {
			wantOK(t, o, 1, "")
		}},
		{name: "max_turns", check: func(t *testing.T, o outcome) {
			wantOK(t, o, 1, "")
			wantErrorMessages(t, o.events, "result error_max_turns", "claude_code exited non-zero: code=1 (output redacted)")
		}},
		{name: "max_budget", check: func(t *testing.T, o outcome) {
			wantOK(t, o, 1, "")
			wantErrorMessages(t, o.events, "result error_max_budget_usd", "claude_code exited non-zero: code=1 (output redacted)")
		}},
		{name: "huge_text", check: func(t *testing.T, o outcome) {
			wantOK(t, o, 0, strings.Repeat("a", agent.MaxFinalTextBytes-len(agent.TruncatedSuffix))+agent.TruncatedSuffix)
			var sizes []int
			for _, ev := range o.events {
				if ev.Kind == agent.EventTextOutput {
					sizes = append(sizes, len(ev.Text))
				}
			}
			if len(sizes) != 2 || sizes[0] != agent.MaxTextBytes || sizes[0]+sizes[1] != 100000 {
				t.Errorf("text chunks %v", sizes)
			}
		}},
		{name: "no_verbose", check: func(t *testing.T, o outcome) {
			wantOK(t, o, 1, "")
			wantErrorMessages(t, o.events, "claude_code exited non-zero: code=1 (output redacted)")
		}},
		{name: "root_bypass", check: func(t *testing.T, o outcome) {
			// The known cause is said, and claude's stderr is not quoted.
			wantOK(t, o, 1, "")
			wantErrorMessages(t, o.events, "claude_code exited non-zero: code=1 (output redacted): claude refuses to skip its permission prompts when run as root; run it as another user, or, when the host sandboxes it, set IS_SANDBOX=1 in its environment (Config.Env)")
			wantCause(t, o.events, CauseRootWithoutSandbox)
		}},
		{name: "exit3", check: func(t *testing.T, o outcome) {
			wantOK(t, o, 3, "")
			wantErrorMessages(t, o.events, "claude_code exited non-zero: code=3 (output redacted)")
		}},
		{name: "malformed", check: func(t *testing.T, o outcome) {
			wantOK(t, o, 0, "still going")
			n := 0
			for _, ev := range o.events {
				if ev.Kind == agent.EventError {
					n++
					if !parseErrorRE.MatchString(ev.Message) {
						t.Errorf("parse error message %q", ev.Message)
					}
				}
			}
			if n != 9 {
				t.Errorf("%d parse errors, want 9", n)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			scenario := tt.scenario
			if scenario == "" {
				scenario = tt.name
			}
			req := tt.req
			req.Prompt = "say hello"
			o := runFake(t, scenario, Config{}, req)
			checkGolden(t, tt.name, golden(t, o))
			assertNoLeak(t, o)
			tt.check(t, o)
		})
	}
}

var parseErrorRE = regexp.MustCompile(`^claude_code stream parse error \(redacted\): [a-zA-Z_ ()]+ \(line_bytes=\d+\)$`)

func wantOK(t *testing.T, o outcome, code int, finalText string) {
	t.Helper()
	if o.err != nil {
		t.Fatalf("completion error %v", o.err)
	}
	if o.comp.Status != (agent.ExitStatus{Code: code}) {
		t.Errorf("status %v, want exit status %d", o.comp.Status, code)
	}
	if o.comp.FinalText != finalText {
		t.Errorf("final text %q, want %q", abbreviate(o.comp.FinalText), abbreviate(finalText))
	}
}

func abbreviate(s string) string {
	if len(s) > 80 {
		return s[:40] + "…" + s[len(s)-40:]
	}
	return s
}

func wantErr(t *testing.T, o outcome, msg string) {
	t.Helper()
	var ae *agent.Error
	if !errors.As(o.err, &ae) || !errors.Is(o.err, agent.ErrBackend) || ae.Message != msg {
		t.Fatalf("completion error %v, want backend error %q", o.err, msg)
	}
}

func wantErrorMessages(t *testing.T, evs []agent.Event, want ...string) {
	t.Helper()
	var got []string
	for _, ev := range evs {
		if ev.Kind == agent.EventError {
			got = append(got, ev.Message)
		}
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("error events %q, want %q", got, want)
	}
}

// wantCause checks that the last error event names cause in its data.
func wantCause(t *testing.T, evs []agent.Event, cause string) {
	t.Helper()
	var data string
	for _, ev := range evs {
		if ev.Kind == agent.EventError {
			data = string(ev.Data)
		}
	}
	if want := `{"cause":"` + cause + `"}`; data != want {
		t.Errorf("the exit's error event data = %s, want %s", data, want)
	}
}

func texts(evs []agent.Event) string {
	var b strings.Builder
	for _, ev := range evs {
		if ev.Kind == agent.EventTextOutput {
			b.WriteString(ev.Text)
		}
	}
	return b.String()
}

// toolFacets returns the tool member of the facet of every event of kind.
func toolFacets(t *testing.T, evs []agent.Event, kind agent.EventKind) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, ev := range evs {
		if ev.Kind != kind {
			continue
		}
		var f struct {
			Schema string         `json:"schema"`
			Tool   map[string]any `json:"tool"`
		}
		if err := json.Unmarshal(ev.Data, &f); err != nil || f.Schema != agent.CapToolsStructured {
			t.Fatalf("tool event without the facet: %s", ev.Data)
		}
		out = append(out, f.Tool)
	}
	return out
}

// TestUsageReachesTheGovernedAdapter: the completion data carries usage
// and cost in the shape agent.UsageOf reads, so a governed call charges
// them to the run.
func TestUsageReachesTheGovernedAdapter(t *testing.T) {
	o := runFake(t, "partial_text", Config{}, agent.RunRequest{Prompt: "hi"})
	u, ok := agent.UsageOf(o.comp)
	if !ok || u.InputTokens != 120 || u.OutputTokens != 25 || u.CachedInputTokens != 0 || u.CostUSD == nil || *u.CostUSD != 0.001225 {
		t.Fatalf("UsageOf = %+v (cost %v), %v; data %s", u, u.CostUSD, ok, o.comp.Data)
	}
}
