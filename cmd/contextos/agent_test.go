package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// fakeCLI writes an executable shell script standing in for an agent CLI:
// it records its argv in argv.txt next to it, then runs body.
func fakeCLI(t *testing.T, body string) (bin, argvFile string) {
	t.Helper()
	if runtime.GOOS == "windows" {
		t.Skip("the fake CLIs are shell scripts")
	}
	dir := t.TempDir()
	bin = filepath.Join(dir, "fake")
	argvFile = filepath.Join(dir, "argv.txt")
	script := "#!/bin/sh\nfor a in \"$@\"; do printf '%s\\n' \"$a\"; done > '" + argvFile + "'\n" + body
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return bin, argvFile
}

// codexBody plays a short codex exec --json run that exits with $1.
const codexBody = `out=""; prev=""
for a in "$@"; do [ "$prev" = "--output-last-message" ] && out="$a"; prev="$a"; done
cat > /dev/null
echo 'RAW-STDERR-SECRET' >&2
echo '{"type":"thread.started","thread_id":"t-1"}'
echo '{"type":"turn.started"}'
echo 'NOT JSON RAW-LINE-SECRET'
echo '{"type":"item.completed","item":{"id":"item_0","type":"agent_message","text":"hello"}}'
echo '{"type":"turn.completed","usage":{"input_tokens":10,"cached_input_tokens":0,"output_tokens":2}}'
printf 'hello' > "$out"
exit %s
`

const claudeBody = `echo 'RAW-STDERR-SECRET' >&2
echo '{"type":"system","subtype":"init","session_id":"s-1","tools":[]}'
echo '{"type":"assistant","session_id":"s-1","message":{"content":[{"type":"text","text":"hi there"}]}}'
echo '{"type":"result","subtype":"success","is_error":false,"session_id":"s-1","result":"hi there","num_turns":1,"total_cost_usd":0.001}'
`

func TestAgentRun(t *testing.T) {
	for _, tc := range []struct {
		name      string
		kind      string
		body      string
		args      []string
		code      int
		final     string
		wantArgv  []string // in order, not necessarily adjacent
		wantError string   // on stderr
	}{
		{name: "codex_success", kind: "codex", body: strings.Replace(codexBody, "%s", "0", 1),
			args: []string{"--model", "gpt-test"}, code: exitOK, final: "hello",
			wantArgv: []string{"exec", "--json", "--model", "gpt-test"}},
		{name: "codex_nonzero", kind: "codex", body: strings.Replace(codexBody, "%s", "3", 1), code: exitInvalid},
		{name: "claude_success", kind: "claude_code", body: claudeBody, code: exitOK, final: "hi there",
			args:     []string{"--model", "sonnet"},
			wantArgv: []string{"--print", "--model", "sonnet", "--verbose", "fix the bug"}},
		{name: "unknown_extension", kind: "codex", body: "exit 0", args: []string{"--ext", "backend.claude_code.x=1"},
			code: exitUsage, wantError: "unsupported capability for codex: backend.claude_code.x"},
		{name: "bad_model", kind: "codex", body: "exit 0", args: []string{"--model", "   "},
			code: exitUsage, wantError: "invalid request: invalid agent_api.config.model.v1"},
		{name: "bad_kind", kind: "gemini", body: "exit 0", code: exitUsage, wantError: "--kind must be codex or claude_code"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bin, argvFile := fakeCLI(t, tc.body)
			var stdout, stderr bytes.Buffer
			args := append([]string{"agent", "run", "--kind", tc.kind, "--binary", bin, "--cd", t.TempDir()}, tc.args...)
			args = append(args, "fix the bug")
			code := run(args, strings.NewReader(""), &stdout, &stderr)
			if code != tc.code {
				t.Fatalf("exit %d, want %d; stderr %s", code, tc.code, stderr.String())
			}
			all := stdout.String() + stderr.String()
			if strings.Contains(all, "SECRET") {
				t.Fatalf("raw CLI output leaked:\n%s", all)
			}
			if tc.wantError != "" {
				if !strings.Contains(stderr.String(), tc.wantError) || stdout.Len() != 0 {
					t.Fatalf("stderr %q, stdout %q; want %q", stderr.String(), stdout.String(), tc.wantError)
				}
				return
			}
			var lines []map[string]json.RawMessage
			sc := bufio.NewScanner(&stdout)
			for sc.Scan() {
				var m map[string]json.RawMessage
				if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
					t.Fatalf("line %q is not a JSON object: %v", sc.Text(), err)
				}
				lines = append(lines, m)
			}
			if len(lines) < 2 {
				t.Fatalf("want events and a completion, got %d lines", len(lines))
			}
			for _, ev := range lines[:len(lines)-1] {
				if string(ev["agent_kind"]) != `"`+tc.kind+`"` || ev["kind"] == nil {
					t.Fatalf("event %v is not a universal event of %s", ev, tc.kind)
				}
			}
			var last struct {
				Completion struct {
					Status    struct{ Code int }
					FinalText string `json:"final_text"`
				}
			}
			raw, _ := json.Marshal(lines[len(lines)-1])
			if err := json.Unmarshal(raw, &last); err != nil || lines[len(lines)-1]["completion"] == nil {
				t.Fatalf("last line %s is not the completion", raw)
			}
			if last.Completion.FinalText != tc.final {
				t.Fatalf("final text %q, want %q", last.Completion.FinalText, tc.final)
			}
			if tc.wantArgv != nil {
				b, err := os.ReadFile(argvFile)
				if err != nil {
					t.Fatal(err)
				}
				argv := strings.Split(strings.TrimSpace(string(b)), "\n")
				i := 0
				for _, a := range argv {
					if i < len(tc.wantArgv) && a == tc.wantArgv[i] {
						i++
					}
				}
				if i != len(tc.wantArgv) {
					t.Fatalf("argv %q lacks %q in order", argv, tc.wantArgv)
				}
			}
		})
	}
}

func TestAgentRunUsage(t *testing.T) {
	for _, args := range [][]string{
		{"agent", "run", "--kind", "codex"},                    // no prompt
		{"agent", "run", "--kind", "codex", "a", "b"},          // two prompts
		{"agent", "run", "--kind", "codex", "--ext", "x", "p"}, // not KEY=JSON
		{"agent", "run", "--kind", "codex", "--ext", "k=notjson", "p"},
		{"agent", "run", "--kind", "codex", "--timeout", "-1s", "p"},
		{"agent", "nosuch"},
	} {
		var stdout, stderr bytes.Buffer
		if code := run(args, strings.NewReader(""), &stdout, &stderr); code != exitUsage {
			t.Errorf("%q: exit %d, want %d", args, code, exitUsage)
		}
	}
	var stdout, stderr bytes.Buffer
	if code := run([]string{"agent", "run", "-h"}, strings.NewReader(""), &stdout, &stderr); code != exitOK || !strings.Contains(stderr.String(), "--kind") {
		t.Fatalf("-h: exit %d, %q", code, stderr.String())
	}
}

func TestAgentRunSpawnFailureIsAnError(t *testing.T) {
	var stdout, stderr bytes.Buffer
	missing := filepath.Join(t.TempDir(), "no-such-codex-SECRET")
	code := run([]string{"agent", "run", "--kind", "codex", "--binary", missing, "p"}, strings.NewReader(""), &stdout, &stderr)
	if code != exitUsage {
		t.Fatalf("exit %d, want %d", code, exitUsage)
	}
	if !strings.Contains(stderr.String(), "backend error:") || strings.Contains(stdout.String()+stderr.String(), "SECRET") {
		t.Fatalf("stderr %q stdout %q", stderr.String(), stdout.String())
	}
}

// An agent CLI whose provider refused its API key and echoed it in the
// 401 error: the key reaches neither the printed events nor the
// completion, and the run still ends as failed.
func TestAgentRunRedactsAPIKey(t *testing.T) {
	const key = "sk-proj-Qw3rTy7uI0oP2aS5dF8gH1jK4lZ6xC9v"
	const msg = "unexpected status 401 Unauthorized: Incorrect API key provided: " + key + ", url: https://api.openai.com/v1/responses"
	for _, tc := range []struct{ kind, body string }{
		{"codex", `cat > /dev/null
echo '{"type":"thread.started","thread_id":"t-1"}'
echo '{"type":"turn.started"}'
echo '{"type":"error","message":"Reconnecting... 1/5 (` + msg + `)"}'
echo '{"type":"error","message":"` + msg + `"}'
echo '{"type":"turn.failed","error":{"message":"` + msg + `"}}'
exit 1
`},
		{"claude_code", `echo '{"type":"system","subtype":"init","session_id":"s-1"}'
echo '{"type":"assistant","session_id":"s-1","message":{"content":[{"type":"text","text":"Invalid API key · ` + key + `"}]}}'
echo '{"type":"result","subtype":"success","is_error":true,"api_error_status":401,"session_id":"s-1","result":"` + msg + `","num_turns":1}'
exit 1
`},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			bin, _ := fakeCLI(t, tc.body)
			var stdout, stderr bytes.Buffer
			code := run([]string{"agent", "run", "--kind", tc.kind, "--binary", bin, "--cd", t.TempDir(), "fix the bug"}, strings.NewReader(""), &stdout, &stderr)
			if code != exitInvalid {
				t.Fatalf("exit %d, want %d; stderr %s", code, exitInvalid, stderr.String())
			}
			all := stdout.String() + stderr.String()
			if strings.Contains(all, key[:12]) {
				t.Fatalf("the API key was printed:\n%s", all)
			}
			if !strings.Contains(stdout.String(), "[REDACTED]") {
				t.Fatalf("no redacted message printed:\n%s", all)
			}
		})
	}
}

// A failed agent run says why on stderr, with the cause the backend knows
// (claude run as root without IS_SANDBOX=1, claude not logged in), and
// never quotes the CLI's output.
func TestAgentRunSaysTheKnownCause(t *testing.T) {
	for _, tc := range []struct {
		name, body, want string
	}{
		{"claude as root", `echo '--dangerously-skip-permissions cannot be used with root/sudo privileges for security reasons RAW-STDERR-SECRET' >&2
exit 1
`, "contextos agent run: the agent ended without success (exit status 1): claude_code exited non-zero: code=1 (output redacted): claude refuses to skip its permission prompts when run as root; run it as another user, or, when the host sandboxes it, set IS_SANDBOX=1 in its environment (Config.Env)\n"},
		{"claude not logged in", `echo 'RAW-STDERR-SECRET' >&2
echo '{"type":"system","subtype":"init","session_id":"s-1","tools":[]}'
echo '{"type":"assistant","session_id":"s-1","message":{"content":[{"type":"text","text":"Not logged in"}]},"error":"authentication_failed"}'
echo '{"type":"result","subtype":"success","is_error":true,"session_id":"s-1","result":"Not logged in"}'
exit 1
`, "contextos agent run: the agent ended without success (exit status 1): claude_code exited non-zero: code=1 (output redacted): claude is not logged in; give it ANTHROPIC_API_KEY in its environment (Config.Env), or log in (claude /login) as the user it runs as\n"},
		{"no known cause", `echo 'RAW-STDERR-SECRET' >&2
exit 4
`, "contextos agent run: the agent ended without success (exit status 4): claude_code exited non-zero: code=4 (output redacted)\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bin, _ := fakeCLI(t, tc.body)
			var stdout, stderr bytes.Buffer
			code := run([]string{"agent", "run", "--kind", "claude_code", "--binary", bin, "--cd", t.TempDir(), "fix the bug"}, strings.NewReader(""), &stdout, &stderr)
			if code != exitInvalid {
				t.Fatalf("exit %d, want %d; stderr %s", code, exitInvalid, stderr.String())
			}
			if stderr.String() != tc.want {
				t.Errorf("stderr = %q, want %q", stderr.String(), tc.want)
			}
			if strings.Contains(stdout.String()+stderr.String(), "SECRET") {
				t.Errorf("raw CLI output leaked:\n%s%s", stdout.String(), stderr.String())
			}
		})
	}
}
