package claudecode

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/contextos/contextos/agent"
)

func TestKindAndCapabilities(t *testing.T) {
	t.Parallel()
	base := []string{
		"agent_api.artifacts.final_text.v1", "agent_api.config.model.v1", "agent_api.control.cancel.v1",
		"agent_api.events", "agent_api.events.live", "agent_api.exec.add_dirs.v1", "agent_api.exec.non_interactive",
		"agent_api.run", "agent_api.session.fork.v1", "agent_api.session.handle.v1", "agent_api.session.resume.v1",
		"agent_api.tools.results.v1", "agent_api.tools.structured.v1", "backend.claude_code.print_stream_json",
	}
	withSandbox := append(slices.Clone(base), "agent_api.exec.external_sandbox.v1")
	slices.Sort(withSandbox)
	for _, tt := range []struct {
		name string
		cfg  Config
		want []string
	}{
		{"default", Config{}, base},
		{"external sandbox opt-in", Config{AllowExternalSandboxExec: true}, withSandbox},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := New(tt.cfg)
			if b.Kind() != agent.KindClaudeCode {
				t.Errorf("kind %q", b.Kind())
			}
			if got := b.Capabilities().IDs(); !slices.Equal(got, tt.want) {
				t.Errorf("capabilities\n got %q\nwant %q", got, tt.want)
			}
			var _ agent.Backend = b
		})
	}
}

// argvOf runs the argv scenario and returns the argv the fake saw.
func argvOf(t *testing.T, cfg Config, req agent.RunRequest) ([]string, outcome) {
	t.Helper()
	o := runFake(t, "argv", cfg, req)
	if o.err != nil || !o.comp.Status.Success() {
		t.Fatalf("run: %v %v %q", o.err, o.comp.Status, o.comp.FinalText)
	}
	var args []string
	if err := json.Unmarshal([]byte(o.comp.FinalText), &args); err != nil {
		t.Fatalf("argv report %q: %v", o.comp.FinalText, err)
	}
	return args, o
}

func TestArgv(t *testing.T) {
	d1, d2 := t.TempDir(), t.TempDir()
	pre := []string{"--print", "--output-format", "stream-json"}
	bypass := []string{"--permission-mode", "bypassPermissions"}
	cat := func(parts ...[]string) []string { return slices.Concat(parts...) }
	s := func(a ...string) []string { return a }
	tests := []struct {
		name   string
		cfg    Config
		prompt string
		ext    map[string]json.RawMessage
		want   []string
	}{
		{name: "plain", want: cat(pre, bypass, s("--include-partial-messages", "--verbose", "hi"))},
		{name: "config model", cfg: Config{Model: " sonnet "}, want: cat(pre, s("--model", "sonnet"), bypass, s("--include-partial-messages", "--verbose", "hi"))},
		{name: "request model beats config", cfg: Config{Model: "sonnet"}, ext: ext(agent.CapModel, `"  claude-opus-4-8 "`),
			want: cat(pre, s("--model", "claude-opus-4-8"), bypass, s("--include-partial-messages", "--verbose", "hi"))},
		{name: "add dirs after one flag, first occurrence kept", ext: ext(agent.CapAddDirs, `{"dirs":["`+d1+`","`+d2+`","`+d1+`/."]}`),
			want: cat(pre, bypass, s("--add-dir", d1, d2, "--include-partial-messages", "--verbose", "hi"))},
		{name: "resume last", ext: ext(agent.CapSessionResume, `{"selector":"last"}`),
			want: cat(pre, bypass, s("--continue", "--include-partial-messages", "--verbose", "hi"))},
		{name: "resume id", ext: ext(agent.CapSessionResume, `{"selector":"id","id":"abc-123"}`),
			want: cat(pre, bypass, s("--include-partial-messages", "--resume", "abc-123", "--verbose", "hi"))},
		{name: "fork last", ext: ext(agent.CapSessionFork, `{"selector":"last"}`),
			want: cat(pre, bypass, s("--continue", "--fork-session", "--include-partial-messages", "--verbose", "hi"))},
		{name: "fork id", ext: ext(agent.CapSessionFork, `{"selector":"id","id":"abc-123"}`),
			want: cat(pre, bypass, s("--fork-session", "--include-partial-messages", "--resume", "abc-123", "--verbose", "hi"))},
		{name: "everything", ext: ext(agent.CapModel, `"opus"`, agent.CapAddDirs, `{"dirs":["`+d1+`"]}`, agent.CapSessionFork, `{"selector":"id","id":"x"}`),
			want: cat(pre, s("--model", "opus"), bypass, s("--add-dir", d1, "--fork-session", "--include-partial-messages", "--resume", "x", "--verbose", "hi"))},
		{name: "prompt starting with a dash", prompt: "--help me", want: cat(pre, bypass, s("--include-partial-messages", "--verbose", "--", "--help me"))},
		{name: "prompt that is a dash", prompt: "-", want: cat(pre, bypass, s("--include-partial-messages", "--verbose", "--", "-"))},
		{name: "prompt with a dash inside", prompt: "a -b", want: cat(pre, bypass, s("--include-partial-messages", "--verbose", "a -b"))},
		{name: "non_interactive true explicit", ext: ext(agent.CapNonInteractive, `true`), want: cat(pre, bypass, s("--include-partial-messages", "--verbose", "hi"))},
		{name: "non_interactive false", cfg: Config{Env: map[string]string{envInteractive: "1"}}, ext: ext(agent.CapNonInteractive, `false`),
			want: cat(pre, s("--include-partial-messages", "--verbose", "hi"))},
		{name: "external sandbox", cfg: Config{AllowExternalSandboxExec: true}, ext: ext(agent.CapExternalSandbox, `true`),
			want: cat(pre, bypass, s("--dangerously-skip-permissions", "--include-partial-messages", "--verbose", "hi"))},
		{name: "external sandbox false", cfg: Config{AllowExternalSandboxExec: true}, ext: ext(agent.CapExternalSandbox, `false`),
			want: cat(pre, bypass, s("--include-partial-messages", "--verbose", "hi"))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			prompt := tt.prompt
			if prompt == "" {
				prompt = "hi"
			}
			cfg := tt.cfg
			cfg.Env = map[string]string{envPrompt: prompt}
			for k, v := range tt.cfg.Env {
				cfg.Env[k] = v
			}
			got, o := argvOf(t, cfg, agent.RunRequest{Prompt: prompt, Extensions: tt.ext})
			if !slices.Equal(got, tt.want) {
				t.Errorf("argv\n got %q\nwant %q", got, tt.want)
			}
			// The external sandbox Status comes first, exactly once, only
			// when the key is true.
			n := 0
			for _, ev := range o.events {
				if ev.Message == msgExternalSandbox {
					n++
				}
			}
			wantN := 0
			if string(tt.ext[agent.CapExternalSandbox]) == "true" {
				wantN = 1
				if o.events[0].Kind != agent.EventStatus || o.events[0].Message != msgExternalSandbox || o.events[0].Data != nil {
					t.Errorf("first event %+v", o.events[0])
				}
			}
			if n != wantN {
				t.Errorf("%d external sandbox events, want %d", n, wantN)
			}
		})
	}
}

// TestFakeAssertsArgv shows the fake's argv assertions can fail: a run
// whose prompt is not the one the fake expects ends with exit 2.
func TestFakeAssertsArgv(t *testing.T) {
	for _, tt := range []struct {
		name string
		env  map[string]string
		ext  map[string]json.RawMessage
	}{
		{"prompt", map[string]string{envPrompt: "another prompt"}, nil},
		{"bypass expected", nil, ext(agent.CapNonInteractive, `false`)},
		{"no bypass expected", map[string]string{envInteractive: "1"}, nil},
		{"resume id", nil, ext(agent.CapSessionResume, `{"selector":"id","id":"other-id"}`)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			scenario := "argv"
			if tt.ext[agent.CapSessionResume] != nil {
				scenario = "resume_not_found"
			}
			o := runFake(t, scenario, Config{Env: tt.env}, agent.RunRequest{Prompt: "hi", Extensions: tt.ext})
			if o.err != nil || o.comp.Status.Code != 2 || !strings.HasPrefix(o.comp.FinalText, "fake claude: argv assertion failed: ") {
				t.Fatalf("got %v %v %q, want the fake's assertion failure", o.err, o.comp.Status, o.comp.FinalText)
			}
		})
	}
}

// envReport runs the env scenario and returns what the child saw.
func envReport(t *testing.T, cfg Config, req agent.RunRequest) map[string]string {
	t.Helper()
	req.Prompt = "env"
	o := runFake(t, "env", cfg, req)
	if o.err != nil || !o.comp.Status.Success() {
		t.Fatalf("run: %v %v %q", o.err, o.comp.Status, o.comp.FinalText)
	}
	var got map[string]string
	if err := json.Unmarshal([]byte(o.comp.FinalText), &got); err != nil {
		t.Fatalf("env report %q: %v", o.comp.FinalText, err)
	}
	return got
}

func TestEnvAndHome(t *testing.T) {
	home := t.TempDir()
	parentHome, hadHome := os.LookupEnv("HOME")
	parentEnv := os.Environ()

	cfg := Config{Home: home, Env: map[string]string{"CFG_ONLY": "cfg", "BOTH": "cfg"}}
	got := envReport(t, cfg, agent.RunRequest{Env: map[string]string{"REQ_ONLY": "req", "BOTH": "req"}})
	want := map[string]string{
		"CLAUDE_HOME": home, "HOME": home,
		"XDG_CONFIG_HOME":     filepath.Join(home, ".config"),
		"XDG_DATA_HOME":       filepath.Join(home, ".local", "share"),
		"XDG_CACHE_HOME":      filepath.Join(home, ".cache"),
		"DISABLE_AUTOUPDATER": "1",
		"CFG_ONLY":            "cfg", "REQ_ONLY": "req", "BOTH": "req",
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
	if h, ok := os.LookupEnv("HOME"); h != parentHome || ok != hadHome || !slices.Equal(os.Environ(), parentEnv) {
		t.Error("the parent environment changed")
	}

	// The request env wins over the home isolation and the default.
	got = envReport(t, cfg, agent.RunRequest{Env: map[string]string{"HOME": "/req/home", "DISABLE_AUTOUPDATER": "0"}})
	if got["HOME"] != "/req/home" || got["DISABLE_AUTOUPDATER"] != "0" || got["CLAUDE_HOME"] != home {
		t.Errorf("request env over home: %v", got)
	}

	// Without Home the child inherits this process's home.
	got = envReport(t, Config{}, agent.RunRequest{})
	if hadHome && got["HOME"] != parentHome || got["CLAUDE_HOME"] != envOr("CLAUDE_HOME", "<unset>") {
		t.Errorf("no home isolation: %v", got)
	}
}

func envOr(k, def string) string {
	if v, ok := os.LookupEnv(k); ok {
		return v
	}
	return def
}

// TestDisableAutoupdaterKeepsParentValue: DISABLE_AUTOUPDATER is set only
// when this process does not set it.
func TestDisableAutoupdaterKeepsParentValue(t *testing.T) {
	t.Setenv("DISABLE_AUTOUPDATER", "parent")
	if got := envReport(t, Config{}, agent.RunRequest{}); got["DISABLE_AUTOUPDATER"] != "parent" {
		t.Errorf("DISABLE_AUTOUPDATER = %q", got["DISABLE_AUTOUPDATER"])
	}
}

func TestRelativeHome(t *testing.T) {
	t.Chdir(t.TempDir())
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	want := filepath.Join(wd, "h")
	if got := envReport(t, Config{Home: "h"}, agent.RunRequest{}); got["HOME"] != want || got["CLAUDE_HOME"] != want {
		t.Errorf("relative home: %v, want %s", got, want)
	}
}

func TestWorkingDir(t *testing.T) {
	def, req := t.TempDir(), t.TempDir()
	cwd := func(p string) string {
		r, err := filepath.EvalSymlinks(p)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	if got := envReport(t, Config{DefaultWorkingDir: def}, agent.RunRequest{}); cwd(got["cwd"]) != cwd(def) {
		t.Errorf("default working dir: %s, want %s", got["cwd"], def)
	}
	if got := envReport(t, Config{DefaultWorkingDir: def}, agent.RunRequest{WorkingDir: req}); cwd(got["cwd"]) != cwd(req) {
		t.Errorf("request working dir: %s, want %s", got["cwd"], req)
	}
}

func TestBinaryFromEnv(t *testing.T) {
	t.Setenv("CLAUDE_BINARY", fakeExe(t))
	b := New(Config{Env: map[string]string{envScenario: "argv"}})
	run, err := b.Run(context.Background(), agent.RunRequest{Prompt: "hi"})
	if err != nil {
		t.Fatal(err)
	}
	if o := drain(t, run); o.err != nil || !o.comp.Status.Success() {
		t.Fatalf("run through CLAUDE_BINARY: %v %v", o.err, o.comp.Status)
	}
	// Config.Binary wins over CLAUDE_BINARY.
	t.Setenv("CLAUDE_BINARY", filepath.Join(t.TempDir(), "missing"))
	o := runFake(t, "argv", Config{}, agent.RunRequest{Prompt: "hi"})
	if o.err != nil {
		t.Fatalf("Config.Binary: %v", o.err)
	}
}

func TestSpawnFailure(t *testing.T) {
	b := New(Config{Binary: filepath.Join(t.TempDir(), "no-such-claude-"+stderrSecret)})
	run, err := b.Run(context.Background(), agent.RunRequest{Prompt: "hi"})
	if err != nil {
		t.Fatal(err)
	}
	o := drain(t, run)
	wantErr(t, o, "claude_code error: cannot start process")
	if len(o.events) != 1 || o.events[0].Kind != agent.EventError || o.events[0].Message != "claude_code error: cannot start process" {
		t.Errorf("events %+v", o.events)
	}
	assertNoLeak(t, o)
}

func TestTimeout(t *testing.T) {
	for _, tt := range []struct {
		name string
		cfg  Config
		req  agent.RunRequest
	}{
		{"request timeout", Config{}, agent.RunRequest{Timeout: agent.Timeout(100 * time.Millisecond)}},
		{"config default timeout", Config{DefaultTimeout: 100 * time.Millisecond}, agent.RunRequest{}},
		{"request beats config", Config{DefaultTimeout: time.Hour}, agent.RunRequest{Timeout: agent.Timeout(100 * time.Millisecond)}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.req.Prompt = "slow"
			o := runFake(t, "slow", tt.cfg, tt.req)
			wantErr(t, o, "timeout")
			if !errors.Is(o.err, context.DeadlineExceeded) {
				t.Errorf("timeout error does not wrap DeadlineExceeded: %v", o.err)
			}
			assertNoLeak(t, o)
		})
	}
}

func TestExplicitCancelTwice(t *testing.T) {
	run, err := newFake(t, "slow", Config{}).Run(context.Background(), agent.RunRequest{Prompt: "slow"})
	if err != nil {
		t.Fatal(err)
	}
	var o outcome
	for ev := range run.Events() {
		o.events = append(o.events, ev)
		if len(o.events) == 1 {
			// The fake has started and will never exit on its own.
			for range 2 {
				if err := run.Cancel(); err != nil {
					t.Fatalf("Cancel: %v", err)
				}
			}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), safetyNet)
	defer cancel()
	o.comp, o.err = run.Wait(ctx)
	wantErr(t, o, "cancelled")
	if !errors.Is(o.err, agent.ErrCancelled) {
		t.Errorf("%v is not ErrCancelled", o.err)
	}
	if o.events[0].Message != "system init" {
		t.Errorf("first event %+v", o.events[0])
	}
	assertNoLeak(t, o)
	if err := run.Cancel(); err != nil {
		t.Errorf("Cancel after completion: %v", err)
	}
}

func TestContextCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	run, err := newFake(t, "slow", Config{}).Run(ctx, agent.RunRequest{Prompt: "slow"})
	if err != nil {
		t.Fatal(err)
	}
	for range run.Events() {
		cancel()
	}
	o := drain(t, run)
	wantErr(t, o, "cancelled")
	if !errors.Is(o.err, context.Canceled) {
		t.Errorf("%v does not wrap context.Canceled", o.err)
	}
}

// TestCloseStillCompletes: a consumer that stops reading still gets the
// completion with its final text and data.
func TestCloseStillCompletes(t *testing.T) {
	run, err := newFake(t, "tool_roundtrip", Config{}).Run(context.Background(), agent.RunRequest{Prompt: "hi"})
	if err != nil {
		t.Fatal(err)
	}
	run.Close()
	ctx, cancel := context.WithTimeout(context.Background(), safetyNet)
	defer cancel()
	comp, err := run.Wait(ctx)
	if err != nil || comp.FinalText != "Hello from the mock model." || !strings.Contains(string(comp.Data), `"num_turns":2`) {
		t.Fatalf("completion %+v %v", comp, err)
	}
}

// TestPreSpawnValidation: every invalid request is refused by Run, with
// the contract's exact error, and nothing is spawned.
func TestPreSpawnValidation(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	unsupported := func(c string) string { return "unsupported capability for claude_code: " + c }
	tests := []struct {
		name string
		cfg  Config
		req  agent.RunRequest
		kind error
		want string
	}{
		{name: "empty prompt", req: agent.RunRequest{Prompt: " \t\n"}, kind: agent.ErrInvalidRequest, want: "invalid request: prompt must not be empty"},
		{name: "empty prompt beats unknown key", req: agent.RunRequest{Prompt: " ", Extensions: ext("agent_api.nope", `1`)}, kind: agent.ErrInvalidRequest, want: "invalid request: prompt must not be empty"},
		{name: "unknown key, smallest reported", req: agent.RunRequest{Extensions: ext("agent_api.zzz", `1`, "agent_api.aaa", `"`+stderrSecret+`"`)}, kind: agent.ErrUnsupportedCapability, want: unsupported("agent_api.aaa")},
		{name: "external sandbox without opt-in", req: agent.RunRequest{Extensions: ext(agent.CapExternalSandbox, `true`)}, kind: agent.ErrUnsupportedCapability, want: unsupported(agent.CapExternalSandbox)},
		{name: "external sandbox without opt-in beats a bad value", req: agent.RunRequest{Extensions: ext(agent.CapExternalSandbox, `true`, agent.CapModel, `7`)}, kind: agent.ErrUnsupportedCapability, want: unsupported(agent.CapExternalSandbox)},
		{name: "another backend's key", req: agent.RunRequest{Extensions: ext("backend.codex.exec.sandbox_mode", `"read-only"`)}, kind: agent.ErrUnsupportedCapability, want: unsupported("backend.codex.exec.sandbox_mode")},
		{name: "claude exec key not advertised", req: agent.RunRequest{Extensions: ext("backend.claude_code.exec.x", `1`)}, kind: agent.ErrUnsupportedCapability, want: unsupported("backend.claude_code.exec.x")},
		{name: "capability that is not an extension", req: agent.RunRequest{Extensions: ext(CapPrintStreamJSON, `true`)}, kind: agent.ErrUnsupportedCapability, want: "unsupported capability for claude_code: " + CapPrintStreamJSON},
		{name: "non_interactive not a bool", req: agent.RunRequest{Extensions: ext(agent.CapNonInteractive, `"yes"`)}, kind: agent.ErrInvalidRequest, want: "invalid request: invalid agent_api.exec.non_interactive"},
		{name: "model not a string", req: agent.RunRequest{Extensions: ext(agent.CapModel, `7`)}, kind: agent.ErrInvalidRequest, want: "invalid request: invalid agent_api.config.model.v1"},
		{name: "model blank", req: agent.RunRequest{Extensions: ext(agent.CapModel, `"  "`)}, kind: agent.ErrInvalidRequest, want: "invalid request: invalid agent_api.config.model.v1"},
		{name: "model too long", req: agent.RunRequest{Extensions: ext(agent.CapModel, `"`+strings.Repeat("m", 129)+`"`)}, kind: agent.ErrInvalidRequest, want: "invalid request: invalid agent_api.config.model.v1"},
		{name: "add_dirs not an object", req: agent.RunRequest{Extensions: ext(agent.CapAddDirs, `[]`)}, kind: agent.ErrInvalidRequest, want: "invalid request: invalid agent_api.exec.add_dirs.v1"},
		{name: "add_dirs empty", req: agent.RunRequest{Extensions: ext(agent.CapAddDirs, `{"dirs":[]}`)}, kind: agent.ErrInvalidRequest, want: "invalid request: invalid agent_api.exec.add_dirs.v1.dirs"},
		{name: "add_dirs missing dir", req: agent.RunRequest{Extensions: ext(agent.CapAddDirs, `{"dirs":["`+dir+`","`+filepath.Join(dir, "missing")+`"]}`)}, kind: agent.ErrInvalidRequest, want: "invalid request: invalid agent_api.exec.add_dirs.v1.dirs[1]"},
		{name: "add_dirs a file", req: agent.RunRequest{Extensions: ext(agent.CapAddDirs, `{"dirs":["`+file+`"]}`)}, kind: agent.ErrInvalidRequest, want: "invalid request: invalid agent_api.exec.add_dirs.v1.dirs[0]"},
		{name: "resume bad selector", req: agent.RunRequest{Extensions: ext(agent.CapSessionResume, `{"selector":"first"}`)}, kind: agent.ErrInvalidRequest, want: "invalid request: invalid agent_api.session.resume.v1"},
		{name: "resume id missing", req: agent.RunRequest{Extensions: ext(agent.CapSessionResume, `{"selector":"id"}`)}, kind: agent.ErrInvalidRequest, want: "invalid request: invalid agent_api.session.resume.v1"},
		{name: "resume last with id", req: agent.RunRequest{Extensions: ext(agent.CapSessionResume, `{"selector":"last","id":"x"}`)}, kind: agent.ErrInvalidRequest, want: "invalid request: invalid agent_api.session.resume.v1"},
		{name: "fork id like a flag", req: agent.RunRequest{Extensions: ext(agent.CapSessionFork, `{"selector":"id","id":"--dangerously-skip-permissions"}`)}, kind: agent.ErrInvalidRequest, want: "invalid request: invalid agent_api.session.fork.v1"},
		{name: "resume and fork", req: agent.RunRequest{Extensions: ext(agent.CapSessionResume, `{"selector":"last"}`, agent.CapSessionFork, `{"selector":"last"}`)}, kind: agent.ErrInvalidRequest, want: "invalid request: agent_api.session.resume.v1 and agent_api.session.fork.v1 are mutually exclusive"},
		{name: "external sandbox not a bool", cfg: Config{AllowExternalSandboxExec: true}, req: agent.RunRequest{Extensions: ext(agent.CapExternalSandbox, `"true"`)}, kind: agent.ErrInvalidRequest, want: "invalid request: invalid agent_api.exec.external_sandbox.v1"},
		{name: "external sandbox and interactive", cfg: Config{AllowExternalSandboxExec: true}, req: agent.RunRequest{Extensions: ext(agent.CapExternalSandbox, `true`, agent.CapNonInteractive, `false`)}, kind: agent.ErrInvalidRequest, want: "invalid request: agent_api.exec.external_sandbox.v1 requires agent_api.exec.non_interactive"},
		{name: "negative timeout", req: agent.RunRequest{Timeout: agent.Timeout(-time.Second)}, kind: agent.ErrInvalidRequest, want: "invalid request: timeout must not be negative"},
		{name: "bad env name", req: agent.RunRequest{Env: map[string]string{"A=B": "x"}}, kind: agent.ErrInvalidRequest, want: "invalid request: env names must be non-empty, without '=' or NUL bytes"},
		{name: "bad config env name", cfg: Config{Env: map[string]string{"": "x"}}, kind: agent.ErrInvalidRequest, want: "invalid request: env names must be non-empty, without '=' or NUL bytes"},
		{name: "NUL in prompt", req: agent.RunRequest{Prompt: "a\x00b"}, kind: agent.ErrInvalidRequest, want: "invalid request: prompt must be UTF-8 text without NUL bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			marker := filepath.Join(t.TempDir(), "spawned")
			cfg := tt.cfg
			cfg.Env = map[string]string{envMarker: marker}
			for k, v := range tt.cfg.Env {
				cfg.Env[k] = v
			}
			req := tt.req
			if req.Prompt == "" {
				req.Prompt = "hi"
			}
			run, err := newFake(t, "marker", cfg).Run(context.Background(), req)
			if run != nil {
				drain(t, run)
				t.Fatal("the request was accepted")
			}
			var ae *agent.Error
			if !errors.As(err, &ae) || !errors.Is(err, tt.kind) || err.Error() != tt.want {
				t.Errorf("error %v, want %q", err, tt.want)
			}
			if strings.Contains(err.Error(), stderrSecret) {
				t.Errorf("the error echoes a request value: %v", err)
			}
			if _, serr := os.Stat(marker); !errors.Is(serr, os.ErrNotExist) {
				t.Error("the fake was spawned")
			}
		})
	}

	// Control: an accepted request does spawn the fake, so the marker
	// would show a spawn.
	marker := filepath.Join(t.TempDir(), "spawned")
	o := runFake(t, "marker", Config{Env: map[string]string{envMarker: marker}}, agent.RunRequest{Prompt: "hi"})
	if o.err != nil {
		t.Fatal(o.err)
	}
	if _, err := os.Stat(marker); err != nil {
		t.Errorf("the accepted run left no marker: %v", err)
	}
}
