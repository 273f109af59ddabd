package codex

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/contextos/contextos/agent"
	"github.com/contextos/contextos/agent/agenttest"
)

// The fake codex CLI is this test binary, run with FAKE_CODEX_SCENARIO
// set: TestMain plays the scenario before any test flag is parsed.
const (
	envScenario = "FAKE_CODEX_SCENARIO"
	envTestdata = "FAKE_CODEX_TESTDATA"
	envRecord   = "FAKE_CODEX_RECORD"
)

// Sentinels the fake prints where the backend must never surface them.
const (
	stderrSecret       = "RAW-STDERR-SECRET"
	stderrSecretCancel = "RAW-STDERR-SECRET-CANCEL"
	lineSecret         = "RAW-LINE-SECRET-PARSE"
	stdoutSentinel     = "STDOUT-SENTINEL-DO-NOT-LEAK"
	stderrSentinel     = "STDERR-SENTINEL-DO-NOT-LEAK"
)

// recordedEnv are the variables the fake records.
var recordedEnv = []string{"CODEX_BINARY", "CODEX_HOME", "RUST_LOG", "FAKE_ENV_A", "FAKE_ENV_B", "FAKE_ENV_C"}

// record is what one fake invocation saw.
type record struct {
	Args  []string          `json:"args"`
	Stdin string            `json:"stdin"`
	Cwd   string            `json:"cwd"`
	Env   map[string]string `json:"env"`
	Pid   int               `json:"pid"`
	// Child is the pid of a process the fake started in its group.
	Child int `json:"child,omitempty"`
}

func TestMain(m *testing.M) {
	if s := os.Getenv(envScenario); s != "" {
		os.Exit(fakeCodex(s, os.Args[1:]))
	}
	if os.Getenv(envHost) != "" {
		os.Exit(playHost())
	}
	goleak.VerifyTestMain(m)
}

// fakeCodex plays a scenario and returns the exit code.
func fakeCodex(scenario string, args []string) int {
	if scenario == "sleeper" {
		for {
			time.Sleep(time.Hour)
		}
	}
	rec := record{Args: args, Pid: os.Getpid(), Env: map[string]string{}}
	rec.Cwd, _ = os.Getwd()
	for _, k := range recordedEnv {
		if v, ok := os.LookupEnv(k); ok {
			rec.Env[k] = v
		}
	}
	if len(args) == 1 && args[0] == "--help" {
		writeRecord(rec)
		fmt.Println("Codex CLI")
		fmt.Println("Options:")
		if scenario != "no_add_dir" {
			fmt.Println("      --add-dir <DIR>  Additional directories that should be writable")
		}
		fmt.Println("  -m, --model <MODEL>  Model the agent should use")
		return 0
	}
	stdin, _ := io.ReadAll(os.Stdin)
	rec.Stdin = string(stdin)
	if scenario == "slow" {
		child := exec.Command(os.Args[0])
		child.Env = append(os.Environ(), envScenario+"=sleeper")
		child.Stdout = os.Stdout // holds the pipe open: the whole group must die
		if err := child.Start(); err == nil {
			rec.Child = child.Process.Pid
			reportPID(child.Process.Pid)
		}
		reportPID(os.Getpid())
	}
	writeRecord(rec)
	if scenario == "must_not_spawn" {
		fmt.Println(`{"type":"error","message":"SPAWNED BUT MUST NOT"}`)
		return 99
	}
	if why := checkArgv(args); why != "" {
		fmt.Printf("{\"type\":\"error\",\"message\":%q}\n", "fake argv assertion failed: "+why)
		return 2
	}
	if !strings.HasSuffix(rec.Stdin, "\n") {
		fmt.Println(`{"type":"error","message":"fake: stdin does not end with a newline"}`)
		return 2
	}
	lastMessage := args[slices.Index(args, "--output-last-message")+1]
	resumeID, resumeLast := resumeArgs(args)

	switch scenario {
	case "tool_run", "env":
		return play("tool_run.jsonl", "Reading prompt from stdin...", lastMessage, "Hello from the mock model.", 0)
	case "tool_run_failed":
		return play("tool_run_failed.jsonl", "Reading prompt from stdin...", lastMessage, "The directory does not exist.", 0)
	case "no_credentials":
		return play("no_credentials.jsonl", "Reading prompt from stdin...", lastMessage, "", 1)
	case "parser_robustness":
		return play("parser_robustness.jsonl", "Reading prompt from stdin... "+stderrSecret, lastMessage, "done", 0)
	case "nonzero_exit":
		return play("nonzero_exit.jsonl", stderrSecret+"\n"+`WARNING: proceeding, even though we could not create PATH aliases: Refusing to create helper binaries under temporary dir "/tmp" (codex_home: AbsolutePathBuf("/tmp/home/.codex"))`, "", "", 3)
	case "legacy_flat":
		return play("legacy_flat.jsonl", stderrSecret, "", "", 0)
	case "resume_not_found":
		// The real 0.169: an unknown id fails; --last with no session
		// starts a new thread.
		if resumeLast {
			return play("tool_run.jsonl", "Reading prompt from stdin...", lastMessage, "Hello from the mock model.", 0)
		}
		if resumeID == "" {
			fmt.Println(`{"type":"error","message":"fake: not a resume"}`)
			return 2
		}
		fmt.Fprintf(os.Stderr, "Error: thread/resume: thread/resume failed: no rollout found for thread id %s (code -32600)\n", resumeID)
		return 1
	case "resume_not_found_upstream":
		fmt.Fprintln(os.Stderr, "session not found")
		return 1
	case "resume_error_event":
		fmt.Println(`{"type":"error","message":"unknown session: ` + lineSecret + `"}`)
		return 1
	case "resume_file_not_found":
		fmt.Fprintln(os.Stderr, "Error: config file not found: /root/.codex/config.toml "+stderrSecret)
		return 1
	case "huge_text":
		text := strings.Repeat("a", 100000)
		fmt.Printf("{\"type\":\"thread.started\",\"thread_id\":\"thread-huge\"}\n{\"type\":\"item.completed\",\"item\":{\"id\":\"item_0\",\"type\":\"agent_message\",\"text\":%q}}\n", text)
		return play("", "", lastMessage, text, 0)
	case "agenttest_nonzero":
		fmt.Println(`{"type":"thread.started","thread_id":"thread-1"}`)
		fmt.Fprintln(os.Stderr, agenttest.Secret)
		return 3
	case "agenttest_leaked_key":
		// An API that refuses the key and echoes it, as the CLI prints it
		// (no_credentials.jsonl's shape).
		msg := "unexpected status 401 Unauthorized: Incorrect API key provided: " + agenttest.APIKey + ", url: https://api.openai.com/v1/responses"
		fmt.Println(`{"type":"thread.started","thread_id":"01a20acc-f75e-73e1-9d3c-b8497ce9c992"}`)
		fmt.Println(`{"type":"turn.started"}`)
		fmt.Printf("{\"type\":\"error\",\"message\":%q}\n", "Reconnecting... 1/5 ("+msg+")")
		fmt.Printf("{\"type\":\"item.completed\",\"item\":{\"id\":\"item_0\",\"type\":\"error\",\"message\":%q}}\n", msg)
		fmt.Printf("{\"type\":\"error\",\"message\":%q}\n", msg)
		fmt.Printf("{\"type\":\"turn.failed\",\"error\":{\"message\":%q}}\n", msg)
		return play("", "Reading prompt from stdin...", lastMessage, "", 1)
	case "agenttest_malformed":
		fmt.Println(`{"type":"thread.started","thread_id":"thread-1"}`)
		fmt.Println(`{"type":"turn.started"} ` + agenttest.Secret)
		fmt.Println(`{"type":"item.completed","item":{"id":"item_0","type":"agent_message","text":"still here"}}`)
		return play("", "", lastMessage, "still here", 0)
	case "slow":
		fmt.Println(`{"type":"thread.started","thread_id":"01a20acc-f75e-73e1-9d3c-b8497ce9c992"}`)
		fmt.Println(`{"type":"turn.started"}`)
		fmt.Fprintln(os.Stderr, stderrSecretCancel, agenttest.Secret)
		for {
			fmt.Println(`{"type":"error","message":"Reconnecting... waiting for network (Connection failed: error sending request)"}`)
			time.Sleep(2 * time.Second)
		}
	}
	fmt.Printf("{\"type\":\"error\",\"message\":%q}\n", "fake: unknown scenario "+scenario)
	return 2
}

// play prints a testdata file to stdout and stderrText to stderr, writes
// final to the last-message file (when final or the path is set) and
// returns code.
func play(file, stderrText, lastMessage, final string, code int) int {
	if file != "" {
		b, err := os.ReadFile(filepath.Join(os.Getenv(envTestdata), file))
		if err != nil {
			fmt.Println(`{"type":"error","message":"fake: missing testdata"}`)
			return 2
		}
		os.Stdout.Write(b)
	}
	if stderrText != "" {
		fmt.Fprintln(os.Stderr, stderrText)
	}
	if lastMessage != "" {
		if err := os.WriteFile(lastMessage, []byte(final), 0o600); err != nil {
			return 2
		}
	}
	return code
}

func writeRecord(rec record) {
	path := os.Getenv(envRecord)
	if path == "" {
		return
	}
	b, _ := json.Marshal(rec)
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return
	}
	defer f.Close()
	f.Write(append(b, '\n'))
}

// checkArgv asserts what every codex invocation must have, as upstream's
// fakes do ("" when it holds).
func checkArgv(args []string) string {
	execAt := slices.Index(args, "exec")
	if execAt < 0 {
		return "no exec"
	}
	top, sub := args[:execAt], args[execAt+1:]
	if !slices.Equal(sub[:min(4, len(sub))], []string{"--color", "never", "--skip-git-repo-check", "--json"}) {
		return "exec flags"
	}
	i := slices.Index(sub, "--output-last-message")
	if i < 0 || i+1 >= len(sub) || !filepath.IsAbs(sub[i+1]) {
		return "no --output-last-message"
	}
	for len(top) >= 2 && top[0] == "--config" {
		top = top[2:]
	}
	switch {
	case slices.Equal(top, []string{"--dangerously-bypass-approvals-and-sandbox"}):
	case len(top) == 4 && top[0] == "--ask-for-approval" && top[2] == "--sandbox":
		if !slices.Contains(approvalPolicies, top[1]) || !slices.Contains(sandboxModes, top[3]) {
			return "approval or sandbox value"
		}
	case len(top) == 2 && top[0] == "--sandbox":
		if !slices.Contains(sandboxModes, top[1]) {
			return "sandbox value"
		}
	default:
		return "top-level flags"
	}
	return ""
}

// resumeArgs returns the resume selector of argv.
func resumeArgs(args []string) (id string, last bool) {
	i := slices.Index(args, "resume")
	if i < 0 || i+2 >= len(args) || args[len(args)-1] != "-" {
		return "", false
	}
	if args[i+1] == "--last" {
		return "", true
	}
	return args[i+1], false
}

// reportPID appends pid to agenttest's pid file, when the suite set one.
func reportPID(pid int) {
	if path := os.Getenv(agenttest.PIDFileEnv); path != "" {
		if f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600); err == nil {
			fmt.Fprintln(f, pid)
			f.Close()
		}
	}
}

// envHost makes this test binary a host process running one codex run
// (of the fake CLI's slow scenario) that it never cancels.
const envHost = "CODEX_TEST_HOST"

// playHost is the host: it starts the run, reads its events and blocks
// until it is killed.
func playHost() int {
	td, _ := filepath.Abs("testdata")
	b := New(Config{Binary: os.Args[0], Env: map[string]string{envScenario: "slow", envTestdata: td}})
	run, err := b.Run(context.Background(), agent.RunRequest{Prompt: "work forever"})
	if err != nil {
		return 3
	}
	for range run.Events() {
	}
	select {}
}
