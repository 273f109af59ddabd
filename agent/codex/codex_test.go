package codex

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"iter"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/contextos/contextos/agent"
	"github.com/contextos/contextos/agent/internal/facet"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/golden")

// waitLimit bounds how long a test waits for a run; reaching it fails the
// test (it is a hang guard, not a timing assertion).
const waitLimit = 2 * time.Minute

// fake is one fake CLI setup: the backend config and where its
// invocations are recorded.
type fake struct {
	cfg    Config
	record string
}

func newFake(t *testing.T, scenario string) *fake {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	td, err := filepath.Abs("testdata")
	if err != nil {
		t.Fatal(err)
	}
	rec := filepath.Join(t.TempDir(), "record.jsonl")
	return &fake{
		record: rec,
		cfg: Config{
			Binary:            exe,
			DefaultWorkingDir: t.TempDir(),
			Env: map[string]string{
				envScenario: scenario,
				envTestdata: td,
				envRecord:   rec,
			},
		},
	}
}

// records returns the fake's invocations, in order.
func (f *fake) records(t *testing.T) []record {
	t.Helper()
	b, err := os.ReadFile(f.record)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var out []record
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		var r record
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	return out
}

// outcome is everything a run produced.
type outcome struct {
	Events []agent.Event
	Comp   agent.Completion
	Err    error
}

// render is the outcome as JSON lines: the events, then the completion.
func (o outcome) render(t *testing.T) string {
	t.Helper()
	var buf bytes.Buffer
	for _, ev := range o.Events {
		b, err := json.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		buf.Write(b)
		buf.WriteByte('\n')
	}
	last := struct {
		Completion agent.Completion `json:"completion"`
		Error      string           `json:"error,omitempty"`
	}{Completion: o.Comp}
	if o.Err != nil {
		last.Error = o.Err.Error()
	}
	b, err := json.Marshal(last)
	if err != nil {
		t.Fatal(err)
	}
	buf.Write(b)
	buf.WriteByte('\n')
	return buf.String()
}

func runToEnd(t *testing.T, b agent.Backend, req agent.RunRequest) outcome {
	t.Helper()
	run, err := b.Run(context.Background(), req)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	var o outcome
	for ev := range run.Events() {
		o.Events = append(o.Events, ev)
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	o.Comp, o.Err = run.Wait(ctx)
	if errors.Is(o.Err, context.DeadlineExceeded) && ctx.Err() != nil {
		t.Fatal("run did not complete")
	}
	return o
}

// sentinels must never appear in anything a run produces.
var sentinels = []string{"SECRET", stdoutSentinel, stderrSentinel, "THIS IS NOT JSON", "AGENTTEST-SECRET"}

func assertNoLeak(t *testing.T, text string) {
	t.Helper()
	for _, s := range sentinels {
		if strings.Contains(text, s) {
			t.Errorf("output leaks %q:\n%s", s, text)
		}
	}
}

func checkGolden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", "golden", name+".jsonl")
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("golden file: %v (run with -update)", err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("events differ from %s (-want +got):\n%s", path, diff)
	}
}

func ext(kv ...string) map[string]json.RawMessage {
	m := map[string]json.RawMessage{}
	for i := 0; i < len(kv); i += 2 {
		m[kv[i]] = json.RawMessage(kv[i+1])
	}
	return m
}

// facetOf decodes an event's tools facet.
func facetOf(t *testing.T, ev agent.Event) facet.Tool {
	t.Helper()
	var d struct {
		Schema string     `json:"schema"`
		Tool   facet.Tool `json:"tool"`
	}
	if err := json.Unmarshal(ev.Data, &d); err != nil || d.Schema != agent.CapToolsStructured {
		t.Fatalf("no tools facet on %+v", ev)
	}
	return d.Tool
}

func sessionEvents(evs []agent.Event) []agent.Event {
	var out []agent.Event
	for _, ev := range evs {
		if bytes.Contains(ev.Data, []byte(agent.CapSessionHandle)) {
			out = append(out, ev)
		}
	}
	return out
}

func kinds(evs []agent.Event) []agent.EventKind {
	out := make([]agent.EventKind, len(evs))
	for i, ev := range evs {
		out[i] = ev.Kind
	}
	return out
}

func TestScenarios(t *testing.T) {
	t.Parallel()
	const threadT = "01a20acc-f75e-73e1-9d3c-b8497ce9c992"
	tests := []struct {
		name     string
		scenario string
		edit     func(*Config)
		req      agent.RunRequest
		check    func(t *testing.T, o outcome)
	}{{
		name: "tool_run", scenario: "tool_run",
		check: func(t *testing.T, o outcome) {
			if o.Err != nil || !o.Comp.Status.Success() || o.Comp.FinalText != "Hello from the mock model." {
				t.Fatalf("completion %+v, %v", o.Comp, o.Err)
			}
			ses := sessionEvents(o.Events)
			if len(ses) != 1 || ses[0].Kind != agent.EventStatus || !strings.Contains(string(ses[0].Data), threadT) {
				t.Errorf("session facet events: %+v", ses)
			}
			var call, result *agent.Event
			for i := range o.Events {
				switch o.Events[i].Kind {
				case agent.EventToolCall:
					call = &o.Events[i]
				case agent.EventToolResult:
					if call == nil {
						t.Fatal("tool result before its call")
					}
					result = &o.Events[i]
				}
			}
			if call == nil || result == nil {
				t.Fatal("missing tool call or result")
			}
			f := facetOf(t, *result)
			if f.ExitCode == nil || *f.ExitCode != 0 || f.Bytes.Stdout != 3 || f.Phase != "complete" || f.Status != "completed" {
				t.Errorf("result facet %+v", f)
			}
			if !strings.Contains(string(o.Comp.Data), `"usage":{"input_tokens":2400,"cached_input_tokens":2000,"cache_write_input_tokens":0,"output_tokens":84,"reasoning_output_tokens":14}`) {
				t.Errorf("completion data %s", o.Comp.Data)
			}
		},
	}, {
		name: "tool_run_failed_command", scenario: "tool_run_failed",
		check: func(t *testing.T, o outcome) {
			if o.Err != nil || !o.Comp.Status.Success() {
				t.Fatalf("completion %+v, %v", o.Comp, o.Err)
			}
			for _, ev := range o.Events {
				if ev.Kind == agent.EventToolResult {
					if f := facetOf(t, ev); f.ExitCode == nil || *f.ExitCode != 2 || f.Status != "completed" {
						t.Errorf("failed command facet %+v", f)
					}
					return
				}
			}
			t.Error("no tool result")
		},
	}, {
		name: "no_credentials", scenario: "no_credentials",
		check: func(t *testing.T, o outcome) {
			if o.Err != nil || o.Comp.Status.Code != 1 || o.Comp.FinalText != "" {
				t.Fatalf("completion %+v, %v", o.Comp, o.Err)
			}
			last := o.Events[len(o.Events)-1]
			if last.Kind != agent.EventError || last.Message != "codex exited non-zero: exit status 1 (stderr redacted)" {
				t.Errorf("last event %+v", last)
			}
		},
	}, {
		name: "parser_robustness", scenario: "parser_robustness",
		check: func(t *testing.T, o outcome) {
			if o.Err != nil || o.Comp.FinalText != "done" {
				t.Fatalf("completion %+v, %v", o.Comp, o.Err)
			}
			var parseErrs int
			for _, ev := range o.Events {
				if strings.HasPrefix(ev.Message, "codex stream parse error (redacted): ") {
					parseErrs++
				}
			}
			if parseErrs != 1 {
				t.Errorf("%d parse errors, want 1", parseErrs)
			}
		},
	}, {
		name: "nonzero_exit_stderr_noise", scenario: "nonzero_exit",
		check: func(t *testing.T, o outcome) {
			if o.Err != nil || o.Comp.Status.Code != 3 || o.Comp.FinalText != "" {
				t.Fatalf("completion %+v, %v", o.Comp, o.Err)
			}
		},
	}, {
		name: "legacy_flat_session_on_tool", scenario: "legacy_flat",
		check: func(t *testing.T, o outcome) {
			want := []agent.EventKind{agent.EventToolCall, agent.EventStatus, agent.EventToolCall, agent.EventToolResult, agent.EventToolResult}
			if diff := cmp.Diff(want, kinds(o.Events)); diff != "" {
				t.Fatalf("kinds (-want +got):\n%s", diff)
			}
			if f := facetOf(t, o.Events[2]); f.Bytes.Stdout != int64(len(stdoutSentinel)) || f.Bytes.Stderr != int64(len(stderrSentinel)) || f.Phase != "delta" {
				t.Errorf("delta facet %+v", f)
			}
			if f := facetOf(t, o.Events[4]); f.Phase != "fail" || f.Status != "failed" {
				t.Errorf("failed facet %+v", f)
			}
			if o.Comp.FinalText != "" || string(o.Comp.Data) != `{"schema":"agent_api.session.handle.v1","session":{"id":"thread-9"}}` {
				t.Errorf("completion %+v", o.Comp)
			}
		},
	}, {
		name: "huge_text", scenario: "huge_text",
		check: func(t *testing.T, o outcome) {
			var texts []int
			for _, ev := range o.Events {
				if ev.Kind == agent.EventTextOutput {
					texts = append(texts, len(ev.Text))
				}
			}
			if diff := cmp.Diff([]int{agent.MaxTextBytes, 100000 - agent.MaxTextBytes}, texts); diff != "" {
				t.Errorf("text chunks (-want +got):\n%s", diff)
			}
			ft := o.Comp.FinalText
			if len(ft) != agent.MaxFinalTextBytes || !strings.HasSuffix(ft, agent.TruncatedSuffix) {
				t.Errorf("final text of %d bytes", len(ft))
			}
		},
	}, {
		name: "resume_not_found_id", scenario: "resume_not_found",
		req: agent.RunRequest{Extensions: ext(agent.CapSessionResume, `{"selector":"id","id":"0199a213-81c0-7800-8aa1-bbab2a035a53"}`)},
		check: func(t *testing.T, o outcome) {
			wantPinned(t, o, "session not found")
		},
	}, {
		name: "resume_not_found_upstream_last", scenario: "resume_not_found_upstream",
		req: agent.RunRequest{Extensions: ext(agent.CapSessionResume, `{"selector":"last"}`)},
		check: func(t *testing.T, o outcome) {
			wantPinned(t, o, "no session found")
		},
	}, {
		name: "resume_not_found_error_event", scenario: "resume_error_event",
		req: agent.RunRequest{Extensions: ext(agent.CapSessionResume, `{"selector":"id","id":"sess-1"}`)},
		check: func(t *testing.T, o outcome) {
			wantPinned(t, o, "session not found")
		},
	}, {
		name: "resume_last_empty_state_new_thread", scenario: "resume_not_found",
		req: agent.RunRequest{Extensions: ext(agent.CapSessionResume, `{"selector":"last"}`)},
		check: func(t *testing.T, o outcome) {
			if o.Err != nil || !o.Comp.Status.Success() || o.Comp.FinalText != "Hello from the mock model." {
				t.Fatalf("completion %+v, %v", o.Comp, o.Err)
			}
		},
	}, {
		name: "resume_file_not_found_is_generic", scenario: "resume_file_not_found",
		req: agent.RunRequest{Extensions: ext(agent.CapSessionResume, `{"selector":"id","id":"sess-1"}`)},
		check: func(t *testing.T, o outcome) {
			if o.Err != nil || o.Comp.Status.Code != 1 {
				t.Fatalf("completion %+v, %v", o.Comp, o.Err)
			}
		},
	}, {
		name: "external_sandbox", scenario: "tool_run",
		edit: func(c *Config) { c.AllowExternalSandboxExec = true },
		req:  agent.RunRequest{Extensions: ext(agent.CapExternalSandbox, `true`)},
		check: func(t *testing.T, o outcome) {
			first := o.Events[0]
			if first.Kind != agent.EventStatus || first.Message != dangerousStatus || first.Data != nil {
				t.Errorf("first event %+v", first)
			}
			n := 0
			for _, ev := range o.Events {
				if ev.Message == dangerousStatus {
					n++
				}
			}
			if n != 1 {
				t.Errorf("%d DANGEROUS events", n)
			}
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFake(t, tt.scenario)
			if tt.edit != nil {
				tt.edit(&f.cfg)
			}
			req := tt.req
			req.Prompt = "say hello"
			o := runToEnd(t, New(f.cfg), req)
			got := o.render(t)
			assertNoLeak(t, got)
			checkGolden(t, tt.name, got)
			tt.check(t, o)
		})
	}
}

// wantPinned asserts a pinned resume failure: the completion error and
// exactly one terminal error event with the same message.
func wantPinned(t *testing.T, o outcome, msg string) {
	t.Helper()
	var ae *agent.Error
	if !errors.As(o.Err, &ae) || !errors.Is(o.Err, agent.ErrBackend) || ae.Message != msg {
		t.Fatalf("error %v, want backend error %q", o.Err, msg)
	}
	var errs []agent.Event
	for _, ev := range o.Events {
		if ev.Kind == agent.EventError {
			errs = append(errs, ev)
		}
	}
	if len(errs) != 1 || errs[0].Message != msg || o.Events[len(o.Events)-1].Message != msg {
		t.Errorf("error events %+v", errs)
	}
}

func TestArgvMapping(t *testing.T) {
	t.Parallel()
	dirA, dirB := t.TempDir(), t.TempDir()
	const last = "<LAST>"
	tests := []struct {
		name  string
		edit  func(*Config)
		ext   map[string]json.RawMessage
		probe bool
		want  []string
	}{{
		name: "default",
		want: []string{"--ask-for-approval", "never", "--sandbox", "workspace-write", "exec", "--color", "never", "--skip-git-repo-check", "--json", "--output-last-message", last},
	}, {
		name: "config model",
		edit: func(c *Config) { c.Model = " o3 " },
		want: []string{"--ask-for-approval", "never", "--sandbox", "workspace-write", "exec", "--color", "never", "--skip-git-repo-check", "--json", "--model", "o3", "--output-last-message", last},
	}, {
		name: "request model overrides config, gpt-5 overrides",
		edit: func(c *Config) { c.Model = "o3" },
		ext:  ext(agent.CapModel, `" gpt-5-codex "`),
		want: []string{"--config", "model_reasoning_effort=medium", "--config", "model_reasoning_summary=auto", "--config", "model_verbosity=low", "--ask-for-approval", "never", "--sandbox", "workspace-write", "exec", "--color", "never", "--skip-git-repo-check", "--json", "--model", "gpt-5-codex", "--output-last-message", last},
	}, {
		name: "sandbox mode and explicit never",
		ext:  ext(keySandboxMode, `"read-only"`, keyApprovalPolicy, `"never"`),
		want: []string{"--ask-for-approval", "never", "--sandbox", "read-only", "exec", "--color", "never", "--skip-git-repo-check", "--json", "--output-last-message", last},
	}, {
		name: "interactive with policy",
		ext:  ext(agent.CapNonInteractive, `false`, keyApprovalPolicy, `"on-request"`, keySandboxMode, `"danger-full-access"`),
		want: []string{"--ask-for-approval", "on-request", "--sandbox", "danger-full-access", "exec", "--color", "never", "--skip-git-repo-check", "--json", "--output-last-message", last},
	}, {
		name: "interactive without policy",
		ext:  ext(agent.CapNonInteractive, `false`),
		want: []string{"--sandbox", "workspace-write", "exec", "--color", "never", "--skip-git-repo-check", "--json", "--output-last-message", last},
	}, {
		name:  "add dirs after model, in order, first occurrences",
		ext:   ext(agent.CapModel, `"o4-mini"`, agent.CapAddDirs, `{"dirs":["`+dirB+`","`+dirA+`","`+dirB+`/."]}`),
		probe: true,
		want:  []string{"--ask-for-approval", "never", "--sandbox", "workspace-write", "exec", "--color", "never", "--skip-git-repo-check", "--json", "--model", "o4-mini", "--add-dir", dirB, "--add-dir", dirA, "--output-last-message", last},
	}, {
		name: "resume by id",
		ext:  ext(agent.CapSessionResume, `{"selector":"id","id":"01a20acc-f75e-73e1-9d3c-b8497ce9c992"}`),
		want: []string{"--ask-for-approval", "never", "--sandbox", "workspace-write", "exec", "--color", "never", "--skip-git-repo-check", "--json", "--output-last-message", last, "resume", "01a20acc-f75e-73e1-9d3c-b8497ce9c992", "-"},
	}, {
		name: "resume last",
		ext:  ext(agent.CapSessionResume, `{"selector":"last"}`),
		want: []string{"--ask-for-approval", "never", "--sandbox", "workspace-write", "exec", "--color", "never", "--skip-git-repo-check", "--json", "--output-last-message", last, "resume", "--last", "-"},
	}, {
		name: "external sandbox",
		edit: func(c *Config) { c.AllowExternalSandboxExec = true },
		ext:  ext(agent.CapExternalSandbox, `true`, agent.CapNonInteractive, `true`),
		want: []string{"--dangerously-bypass-approvals-and-sandbox", "exec", "--color", "never", "--skip-git-repo-check", "--json", "--output-last-message", last},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFake(t, "tool_run")
			if tt.edit != nil {
				tt.edit(&f.cfg)
			}
			o := runToEnd(t, New(f.cfg), agent.RunRequest{Prompt: "line one\nline two", Extensions: tt.ext})
			if o.Err != nil || !o.Comp.Status.Success() {
				t.Fatalf("run: %+v %v\n%s", o.Comp, o.Err, o.render(t))
			}
			recs := f.records(t)
			if tt.probe {
				if len(recs) != 2 || !cmp.Equal(recs[0].Args, []string{"--help"}) {
					t.Fatalf("probe records %+v", recs)
				}
				recs = recs[1:]
			}
			if len(recs) != 1 {
				t.Fatalf("%d invocations", len(recs))
			}
			r := recs[0]
			got := append([]string(nil), r.Args...)
			for i := range got {
				if i > 0 && got[i-1] == "--output-last-message" {
					if filepath.Base(got[i]) != "last_message.txt" {
						t.Errorf("last message file %q", got[i])
					}
					if _, err := os.Stat(filepath.Dir(got[i])); !errors.Is(err, os.ErrNotExist) {
						t.Errorf("temp dir %q not removed", filepath.Dir(got[i]))
					}
					got[i] = last
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("argv (-want +got):\n%s", diff)
			}
			if r.Stdin != "line one\nline two\n" {
				t.Errorf("stdin %q", r.Stdin)
			}
			if r.Cwd != f.cfg.DefaultWorkingDir {
				t.Errorf("cwd %q, want %q", r.Cwd, f.cfg.DefaultWorkingDir)
			}
		})
	}
}

func TestEnv(t *testing.T) {
	// Not parallel: it changes this process's RUST_LOG.
	for _, parentRustLog := range []string{"", "debug"} {
		t.Run("RUST_LOG="+parentRustLog, func(t *testing.T) {
			t.Setenv("RUST_LOG", "placeholder")
			if parentRustLog == "" {
				os.Unsetenv("RUST_LOG")
			} else {
				os.Setenv("RUST_LOG", parentRustLog)
			}
			f := newFake(t, "env")
			f.cfg.Home = "/srv/codex-home"
			f.cfg.Env["FAKE_ENV_A"] = "config-a"
			f.cfg.Env["FAKE_ENV_B"] = "config-b"
			req := agent.RunRequest{Prompt: "hi", Env: map[string]string{"FAKE_ENV_B": "request-b", "FAKE_ENV_C": "request-c"}}
			o := runToEnd(t, New(f.cfg), req)
			if o.Err != nil || !o.Comp.Status.Success() {
				t.Fatalf("run: %+v %v", o.Comp, o.Err)
			}
			recs := f.records(t)
			if len(recs) != 1 {
				t.Fatalf("%d invocations", len(recs))
			}
			wantRust := "error"
			if parentRustLog != "" {
				wantRust = parentRustLog
			}
			want := map[string]string{
				"CODEX_BINARY": f.cfg.Binary,
				"CODEX_HOME":   "/srv/codex-home",
				"RUST_LOG":     wantRust,
				"FAKE_ENV_A":   "config-a",
				"FAKE_ENV_B":   "request-b",
				"FAKE_ENV_C":   "request-c",
			}
			if diff := cmp.Diff(want, recs[0].Env); diff != "" {
				t.Errorf("env (-want +got):\n%s", diff)
			}
			for _, k := range []string{"FAKE_ENV_A", "FAKE_ENV_B", "FAKE_ENV_C", "CODEX_HOME", envScenario} {
				if _, ok := os.LookupEnv(k); ok {
					t.Errorf("parent env gained %s", k)
				}
			}
			if got, _ := os.LookupEnv("RUST_LOG"); got != parentRustLog {
				t.Errorf("parent RUST_LOG changed to %q", got)
			}
		})
	}
}

func TestRequestEnvCanOverrideBackendVariables(t *testing.T) {
	t.Parallel()
	f := newFake(t, "env")
	f.cfg.Home = "/srv/config-home"
	o := runToEnd(t, New(f.cfg), agent.RunRequest{Prompt: "hi", Env: map[string]string{"CODEX_HOME": "/srv/request-home", "RUST_LOG": "warn"}})
	if o.Err != nil {
		t.Fatal(o.Err)
	}
	env := f.records(t)[0].Env
	if env["CODEX_HOME"] != "/srv/request-home" || env["RUST_LOG"] != "warn" {
		t.Errorf("env %v", env)
	}
}

func TestBinaryFromEnvironment(t *testing.T) {
	f := newFake(t, "tool_run")
	t.Setenv("CODEX_BINARY", f.cfg.Binary)
	f.cfg.Binary = ""
	o := runToEnd(t, New(f.cfg), agent.RunRequest{Prompt: "hi"})
	if o.Err != nil || o.Comp.FinalText != "Hello from the mock model." {
		t.Fatalf("run: %+v %v", o.Comp, o.Err)
	}
}

func iterPull(run *agent.Run) (func() (agent.Event, bool), func()) {
	return iter.Pull(run.Events())
}

// startedSlow starts the slow scenario and waits until its first line
// was mapped (the session status) and the fake recorded its pids.
func startedSlow(t *testing.T, f *fake, req agent.RunRequest) (*agent.Run, func() (agent.Event, bool), func()) {
	t.Helper()
	run, err := New(f.cfg).Run(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	next, stop := iterPull(run)
	for {
		ev, ok := next()
		if !ok {
			t.Fatal("stream ended before the session status")
		}
		if ev.Kind == agent.EventStatus && ev.Data != nil {
			break
		}
	}
	return run, next, stop
}

func TestExplicitCancel(t *testing.T) {
	t.Parallel()
	f := newFake(t, "slow")
	run, next, stop := startedSlow(t, f, agent.RunRequest{Prompt: "hi"})
	defer stop()
	if err := run.Cancel(); err != nil {
		t.Fatal(err)
	}
	if err := run.Cancel(); err != nil {
		t.Fatal(err)
	}
	var rest []agent.Event
	for {
		ev, ok := next()
		if !ok {
			break
		}
		rest = append(rest, ev)
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	comp, err := run.Wait(ctx)
	var ae *agent.Error
	if !errors.Is(err, agent.ErrCancelled) || !errors.As(err, &ae) || ae.Message != "cancelled" {
		t.Fatalf("Wait: %+v %v", comp, err)
	}
	assertNoLeak(t, outcome{Events: rest, Err: err}.render(t))
	recs := f.records(t)
	if len(recs) != 1 || recs[0].Child == 0 {
		t.Fatalf("records %+v", recs)
	}
	groupGone(t, recs[0].Pid, recs[0].Child)
}

func TestCallerContextCancels(t *testing.T) {
	t.Parallel()
	f := newFake(t, "slow")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	run, err := New(f.cfg).Run(ctx, agent.RunRequest{Prompt: "hi"})
	if err != nil {
		t.Fatal(err)
	}
	for ev := range run.Events() {
		if ev.Kind == agent.EventStatus && ev.Data != nil {
			cancel()
		}
	}
	wctx, wcancel := context.WithTimeout(context.Background(), waitLimit)
	defer wcancel()
	if _, err := run.Wait(wctx); !errors.Is(err, agent.ErrCancelled) || !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait: %v", err)
	}
	recs := f.records(t)
	groupGone(t, recs[0].Pid, recs[0].Child)
}

func TestTimeout(t *testing.T) {
	t.Parallel()
	f := newFake(t, "slow")
	o := runToEnd(t, New(f.cfg), agent.RunRequest{Prompt: "hi", Timeout: agent.Timeout(300 * time.Millisecond)})
	var ae *agent.Error
	if !errors.As(o.Err, &ae) || ae.Message != "timeout" || !errors.Is(o.Err, agent.ErrBackend) || !errors.Is(o.Err, context.DeadlineExceeded) {
		t.Fatalf("Wait: %v", o.Err)
	}
	last := o.Events[len(o.Events)-1]
	if last.Kind != agent.EventError || last.Message != "timeout" {
		t.Errorf("last event %+v", last)
	}
	assertNoLeak(t, o.render(t))
	if recs := f.records(t); len(recs) == 1 {
		groupGone(t, recs[0].Pid, recs[0].Child)
	}
}

func TestDefaultTimeout(t *testing.T) {
	t.Parallel()
	f := newFake(t, "slow")
	f.cfg.DefaultTimeout = 300 * time.Millisecond
	o := runToEnd(t, New(f.cfg), agent.RunRequest{Prompt: "hi"})
	var ae *agent.Error
	if !errors.As(o.Err, &ae) || ae.Message != "timeout" {
		t.Fatalf("Wait: %v", o.Err)
	}
}

func TestPreSpawnValidation(t *testing.T) {
	t.Parallel()
	missing := filepath.Join(t.TempDir(), "missing")
	tests := []struct {
		name     string
		external bool
		req      agent.RunRequest
		kind     error
		msg      string
	}{
		{"empty prompt", false, agent.RunRequest{Prompt: " \n"}, agent.ErrInvalidRequest, "invalid request: prompt must not be empty"},
		{"empty prompt beats unknown key", false, agent.RunRequest{Extensions: ext("backend.codex.nope", `1`)}, agent.ErrInvalidRequest, "invalid request: prompt must not be empty"},
		{"unknown backend key", false, agent.RunRequest{Prompt: "hi", Extensions: ext("backend.codex.nope", `1`)}, agent.ErrUnsupportedCapability, "unsupported capability for codex: backend.codex.nope"},
		{"other backend's key", false, agent.RunRequest{Prompt: "hi", Extensions: ext("backend.claude_code.exec.x", `1`)}, agent.ErrUnsupportedCapability, "unsupported capability for codex: backend.claude_code.exec.x"},
		{"fork not advertised", false, agent.RunRequest{Prompt: "hi", Extensions: ext(agent.CapSessionFork, `{"selector":"last"}`)}, agent.ErrUnsupportedCapability, "unsupported capability for codex: agent_api.session.fork.v1"},
		{"mcp not advertised", false, agent.RunRequest{Prompt: "hi", Extensions: ext("agent_api.tools.mcp.add.v1", `{}`)}, agent.ErrUnsupportedCapability, "unsupported capability for codex: agent_api.tools.mcp.add.v1"},
		{"external sandbox without opt-in", false, agent.RunRequest{Prompt: "hi", Extensions: ext(agent.CapExternalSandbox, `true`)}, agent.ErrUnsupportedCapability, "unsupported capability for codex: agent_api.exec.external_sandbox.v1"},
		{"unsupported beats bad value", false, agent.RunRequest{Prompt: "hi", Extensions: ext(keyApprovalPolicy, `"always"`, "backend.codex.zzz", `1`)}, agent.ErrUnsupportedCapability, "unsupported capability for codex: backend.codex.zzz"},
		{"approval policy value", false, agent.RunRequest{Prompt: "hi", Extensions: ext(keyApprovalPolicy, `"always"`)}, agent.ErrInvalidRequest, "invalid request: invalid backend.codex.exec.approval_policy"},
		{"approval policy type", false, agent.RunRequest{Prompt: "hi", Extensions: ext(keyApprovalPolicy, `5`)}, agent.ErrInvalidRequest, "invalid request: invalid backend.codex.exec.approval_policy"},
		{"sandbox mode value", false, agent.RunRequest{Prompt: "hi", Extensions: ext(keySandboxMode, `"full"`)}, agent.ErrInvalidRequest, "invalid request: invalid backend.codex.exec.sandbox_mode"},
		{"sandbox mode type", false, agent.RunRequest{Prompt: "hi", Extensions: ext(keySandboxMode, `null`)}, agent.ErrInvalidRequest, "invalid request: invalid backend.codex.exec.sandbox_mode"},
		{"exec_stream is no extension", false, agent.RunRequest{Prompt: "hi", Extensions: ext(capExecStream, `true`)}, agent.ErrUnsupportedCapability, "unsupported capability for codex: backend.codex.exec_stream"},
		{"capability id is no extension", false, agent.RunRequest{Prompt: "hi", Extensions: ext(agent.CapRun, `true`)}, agent.ErrUnsupportedCapability, "unsupported capability for codex: agent_api.run"},
		{"non_interactive type", false, agent.RunRequest{Prompt: "hi", Extensions: ext(agent.CapNonInteractive, `"yes"`)}, agent.ErrInvalidRequest, "invalid request: invalid agent_api.exec.non_interactive"},
		{"policy contradicts non_interactive default", false, agent.RunRequest{Prompt: "hi", Extensions: ext(keyApprovalPolicy, `"on-request"`)}, agent.ErrInvalidRequest, "invalid request: backend.codex.exec.approval_policy must be never when agent_api.exec.non_interactive is true"},
		{"policy contradicts non_interactive true", false, agent.RunRequest{Prompt: "hi", Extensions: ext(keyApprovalPolicy, `"untrusted"`, agent.CapNonInteractive, `true`)}, agent.ErrInvalidRequest, "invalid request: backend.codex.exec.approval_policy must be never when agent_api.exec.non_interactive is true"},
		{"model empty", false, agent.RunRequest{Prompt: "hi", Extensions: ext(agent.CapModel, `"  "`)}, agent.ErrInvalidRequest, "invalid request: invalid agent_api.config.model.v1"},
		{"add dir missing", false, agent.RunRequest{Prompt: "hi", Extensions: ext(agent.CapAddDirs, `{"dirs":["`+missing+`"]}`)}, agent.ErrInvalidRequest, "invalid request: invalid agent_api.exec.add_dirs.v1.dirs[0]"},
		{"resume schema", false, agent.RunRequest{Prompt: "hi", Extensions: ext(agent.CapSessionResume, `{"selector":"last","id":"x"}`)}, agent.ErrInvalidRequest, "invalid request: invalid agent_api.session.resume.v1"},
		{"external sandbox with non_interactive false", true, agent.RunRequest{Prompt: "hi", Extensions: ext(agent.CapExternalSandbox, `true`, agent.CapNonInteractive, `false`)}, agent.ErrInvalidRequest, "invalid request: agent_api.exec.external_sandbox.v1 requires agent_api.exec.non_interactive"},
		{"external sandbox with exec keys", true, agent.RunRequest{Prompt: "hi", Extensions: ext(agent.CapExternalSandbox, `true`, keySandboxMode, `"read-only"`)}, agent.ErrInvalidRequest, "invalid request: agent_api.exec.external_sandbox.v1 cannot be combined with backend.codex.exec.* keys"},
		{"external sandbox type", true, agent.RunRequest{Prompt: "hi", Extensions: ext(agent.CapExternalSandbox, `1`)}, agent.ErrInvalidRequest, "invalid request: invalid agent_api.exec.external_sandbox.v1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFake(t, "must_not_spawn")
			f.cfg.AllowExternalSandboxExec = tt.external
			run, err := New(f.cfg).Run(context.Background(), tt.req)
			if run != nil || err == nil {
				t.Fatalf("Run accepted the request")
			}
			if !errors.Is(err, tt.kind) || err.Error() != tt.msg {
				t.Errorf("error %q, want %q (%v)", err, tt.msg, tt.kind)
			}
			if recs := f.records(t); len(recs) != 0 {
				t.Errorf("spawned: %+v", recs)
			}
		})
	}
}

func TestSpawnFailure(t *testing.T) {
	t.Parallel()
	f := newFake(t, "tool_run")
	f.cfg.Binary = filepath.Join(t.TempDir(), "no-such-codex-RAW-SECRET-PATH")
	o := runToEnd(t, New(f.cfg), agent.RunRequest{Prompt: "hi"})
	var ae *agent.Error
	if !errors.As(o.Err, &ae) || !errors.Is(o.Err, agent.ErrBackend) || ae.Message != "codex could not be started" {
		t.Fatalf("Wait: %v", o.Err)
	}
	if len(o.Events) != 1 || o.Events[0].Kind != agent.EventError || o.Events[0].Message != ae.Message {
		t.Errorf("events %+v", o.Events)
	}
	assertNoLeak(t, o.render(t))
}

func TestAddDirsRejectedByRuntime(t *testing.T) {
	t.Parallel()
	f := newFake(t, "no_add_dir")
	o := runToEnd(t, New(f.cfg), agent.RunRequest{Prompt: "hi", Extensions: ext(agent.CapAddDirs, `{"dirs":["."]}`)})
	var ae *agent.Error
	if !errors.As(o.Err, &ae) || !errors.Is(o.Err, agent.ErrBackend) || ae.Message != "add_dirs rejected by runtime" {
		t.Fatalf("Wait: %v", o.Err)
	}
	if len(o.Events) != 1 || o.Events[0].Kind != agent.EventError || o.Events[0].Message != ae.Message {
		t.Errorf("events %+v", o.Events)
	}
	recs := f.records(t)
	if len(recs) != 1 || !cmp.Equal(recs[0].Args, []string{"--help"}) {
		t.Errorf("invocations %+v", recs)
	}
}

func TestAddDirsProbeIsCached(t *testing.T) {
	t.Parallel()
	f := newFake(t, "tool_run")
	b := New(f.cfg)
	for range 2 {
		o := runToEnd(t, b, agent.RunRequest{Prompt: "hi", Extensions: ext(agent.CapAddDirs, `{"dirs":["."]}`)})
		if o.Err != nil {
			t.Fatal(o.Err)
		}
	}
	var probes, execs int
	for _, r := range f.records(t) {
		if cmp.Equal(r.Args, []string{"--help"}) {
			probes++
		} else {
			execs++
		}
	}
	if probes != 1 || execs != 2 {
		t.Errorf("%d probes, %d execs", probes, execs)
	}
}

func TestCapabilities(t *testing.T) {
	t.Parallel()
	base := []string{
		"agent_api.artifacts.final_text.v1",
		"agent_api.config.model.v1",
		"agent_api.control.cancel.v1",
		"agent_api.events",
		"agent_api.events.live",
		"agent_api.exec.add_dirs.v1",
		"agent_api.exec.non_interactive",
		"agent_api.run",
		"agent_api.session.handle.v1",
		"agent_api.session.resume.v1",
		"agent_api.tools.results.v1",
		"agent_api.tools.structured.v1",
		"backend.codex.exec.approval_policy",
		"backend.codex.exec.sandbox_mode",
		"backend.codex.exec_stream",
	}
	b := New(Config{})
	if b.Kind() != agent.KindCodex {
		t.Errorf("kind %q", b.Kind())
	}
	if diff := cmp.Diff(base, b.Capabilities().IDs()); diff != "" {
		t.Errorf("capabilities (-want +got):\n%s", diff)
	}
	withExt := New(Config{AllowExternalSandboxExec: true}).Capabilities()
	if !withExt.Contains(agent.CapExternalSandbox) || withExt.Len() != len(base)+1 {
		t.Errorf("opted-in capabilities %v", withExt)
	}
}

func TestConfigIsCopied(t *testing.T) {
	t.Parallel()
	f := newFake(t, "env")
	env := f.cfg.Env
	b := New(f.cfg)
	env["FAKE_ENV_A"] = "changed after New"
	if o := runToEnd(t, b, agent.RunRequest{Prompt: "hi"}); o.Err != nil {
		t.Fatal(o.Err)
	}
	if got, ok := f.records(t)[0].Env["FAKE_ENV_A"]; ok {
		t.Errorf("FAKE_ENV_A = %q reached the CLI", got)
	}
}

func TestDroppedEventsStillComplete(t *testing.T) {
	t.Parallel()
	f := newFake(t, "tool_run")
	run, err := New(f.cfg).Run(context.Background(), agent.RunRequest{Prompt: "hi"})
	if err != nil {
		t.Fatal(err)
	}
	run.Close()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	comp, err := run.Wait(ctx)
	if err != nil || comp.FinalText != "Hello from the mock model." || !bytes.Contains(comp.Data, []byte(`"usage"`)) {
		t.Fatalf("Wait: %+v %v", comp, err)
	}
}

func TestCancelAfterEventsDropped(t *testing.T) {
	t.Parallel()
	f := newFake(t, "slow")
	run, _, stop := startedSlow(t, f, agent.RunRequest{Prompt: "hi"})
	stop() // leaving the loop early is Close
	if err := run.Cancel(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if _, err := run.Wait(ctx); !errors.Is(err, agent.ErrCancelled) {
		t.Fatalf("Wait: %v", err)
	}
	recs := f.records(t)
	groupGone(t, recs[0].Pid, recs[0].Child)
}

// TestUsageReachesTheGovernedAdapter: the completion data carries the
// turn's usage in the shape agent.UsageOf reads (codex reports no cost).
func TestUsageReachesTheGovernedAdapter(t *testing.T) {
	f := newFake(t, "tool_run")
	o := runToEnd(t, New(f.cfg), agent.RunRequest{Prompt: "hi"})
	u, ok := agent.UsageOf(o.Comp)
	if !ok || u.InputTokens != 2400 || u.OutputTokens != 84 || u.CachedInputTokens != 2000 || u.CostUSD != nil {
		t.Fatalf("UsageOf = %+v, %v; data %s", u, ok, o.Comp.Data)
	}
}

// A CLI that leaves a FIFO where the last message belongs does not hang
// the run: only a regular file is read.
func TestLastMessageFIFODoesNotHang(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("shell script")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "codex")
	script := "#!/bin/sh\nout=\"\"; prev=\"\"\nfor a in \"$@\"; do [ \"$prev\" = \"--output-last-message\" ] && out=\"$a\"; prev=\"$a\"; done\n" +
		"cat >/dev/null\nrm -f \"$out\"; mkfifo \"$out\"\necho '{\"type\":\"thread.started\",\"thread_id\":\"t\"}'\nexit 0\n"
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	o := runToEnd(t, New(Config{Binary: bin, DefaultWorkingDir: t.TempDir()}), agent.RunRequest{Prompt: "hi"})
	if o.Err != nil || !o.Comp.Status.Success() || o.Comp.FinalText != "" {
		t.Fatalf("completion %+v, %v", o.Comp, o.Err)
	}
}
